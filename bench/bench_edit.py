"""What context editing adds to one reduce() over 10,000 messages.

The same histories as ``bench_reduce.py`` (a quarter of the messages are tool
results), reduced with and without ``context_edits=[ClearToolResults(keep=3),
Offload(above=2_000)]``: one-shot (a fresh reducer, so no cached count helps) in token
mode over and under the threshold and in count mode over it, for dicts and LangChain
messages; and the append loop (one reduce per new message on the reducer's own output).
The "edited" shapes are the big histories with every edit already made, as a reducer
with editing returns them: what each later reduce of a long thread sees. Prints
milliseconds of CPU time of this process (best of several runs, so other processes on a
shared machine weigh less), the ratio with / without editing, and what editing adds per
edit made (microseconds; ``-`` when nothing was edited).

    python bench/bench_edit.py
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench_reduce import history

from agentstate_reducer import ClearToolResults, MessageReducer, Offload, ReducerConfig

N = 10_000
EDITS = [ClearToolResults(keep=3), Offload(above=2_000)]


def best_ms(*fns: Callable[[], object], repeat: int = 9) -> list[float]:
    """Best time of each function, in ms, running them in turn (a shared machine's noise
    then hits each alike)."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            best[k] = min(best[k], time.process_time() - t0)
    return [b * 1000 for b in best]


def with_big_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same history with each tool result about 300 tokens long."""
    return [
        {**m, "content": f"{m['id']}: " + "lorem ipsum dolor sit amet " * 60}
        if m["role"] == "tool"
        else m
        for m in messages
    ]


def already_edited(messages: list[Any]) -> list[Any]:
    """``messages`` with every edit made (each result but the last 3 cleared), nothing
    pruned: the history a reducer with editing keeps returning, edit after edit."""
    config = ReducerConfig(
        max_tokens=10**9,
        token_counter="approximate",
        context_edits=[ClearToolResults(keep=3, trigger_tokens=1), Offload(above=2_000)],
    )
    return MessageReducer(config=config).reduce(messages).surviving


def as_langchain(messages: list[dict[str, Any]]) -> list[Any]:
    from langchain_core.messages import convert_to_messages

    return list(convert_to_messages(messages))


def one_shot(
    config: Callable[[list[Any]], ReducerConfig], msgs: list[Any]
) -> tuple[float, float, int]:
    plain, edited = best_ms(
        lambda: MessageReducer(config=config([])).reduce(msgs),
        lambda: MessageReducer(config=config(EDITS)).reduce(msgs),
    )
    return plain, edited, len(MessageReducer(config=config(EDITS)).reduce(msgs).edited)


def append_loop(config: ReducerConfig, msgs: list[Any], steps: int = 100) -> float:
    """Median ms per step of ``state = reduce(state, [next message])``."""
    reducer = MessageReducer(config=config)
    state = reducer.reduce(msgs[: N - steps]).surviving
    times = []
    for message in msgs[N - steps :]:
        t0 = time.process_time()
        state = reducer.reduce(state, [message]).surviving
        times.append(time.process_time() - t0)
    times.sort()
    return times[len(times) // 2] * 1000


def main() -> None:
    dicts = history(N)
    big = with_big_results(dicts)
    shapes = {
        "dicts": dicts,
        "langchain": as_langchain(dicts),
        "dicts, big": big,
        "lc, big": as_langchain(big),
        "dicts, edited": already_edited(big),
        "lc, edited": already_edited(as_langchain(big)),
    }
    cases: dict[str, Callable[[list[Any]], ReducerConfig]] = {
        "token, over": lambda edits: ReducerConfig(
            max_tokens=6 * N, target_tokens=5 * N, token_counter="approximate", context_edits=edits
        ),
        "token, 8k": lambda edits: ReducerConfig(
            max_tokens=8_000, token_counter="approximate", context_edits=edits
        ),
        "token, under": lambda edits: ReducerConfig(
            max_tokens=200 * N, token_counter="approximate", context_edits=edits
        ),
        "count, over": lambda edits: ReducerConfig(
            min_messages=N // 5, max_messages=N // 2, token_counter="approximate",
            context_edits=edits,
        ),
    }
    print(
        f"{'case':<14} {'shape':<13} {'plain ms':>9} {'edit ms':>9} {'ratio':>6} {'edits':>6}"
        f" {'us/edit':>8}"
    )
    for name, config in cases.items():
        for shape, msgs in shapes.items():
            plain, edited, count = one_shot(config, msgs)
            per_edit = f"{(edited - plain) * 1000 / count:>8.1f}" if count else f"{'-':>8}"
            print(
                f"{name:<14} {shape:<13} {plain:>9.2f} {edited:>9.2f} "
                f"{edited / plain:>6.2f} {count:>6} {per_edit}"
            )
    print()
    print(f"{'append loop':<14} {'shape':<13} {'plain ms':>9} {'edit ms':>9} {'ratio':>6}")
    for shape, msgs in shapes.items():
        over = cases["token, over"]
        plain = append_loop(over([]), msgs)
        edited = append_loop(over(EDITS), msgs)
        ratio = edited / plain
        print(f"{'token, over':<14} {shape:<13} {plain:>9.3f} {edited:>9.3f} {ratio:>6.2f}")


if __name__ == "__main__":
    main()
