"""One reduce() over a 10,000-message history with tool-call turns, in count and token mode.

Prints milliseconds per call (best of several runs) and the scaling from 2,500 to
10,000 messages, which stays near 4x for a linear-time reduce; then where a token-mode
reduce of 10,000 messages spends its time: reading every message into its record
(``read_messages``), counting the messages the plan reaches (a reduce counts lazily,
from the newest back, so what is pruned without a look is never counted), the pure
plan, and the rest. Timings run with the garbage collector off (collected before each
run), so a collection landing in one stage does not move time between stages.

    python bench/bench_reduce.py
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from typing import Any

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.plan import make_plan
from agentstate_reducer.read import read_messages
from agentstate_reducer.tokens import TokenCountCache, resolve_token_counter
from agentstate_reducer.tokens.cache import LazyCounts


def history(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent.", "id": "sys"}]
    turn = 0
    while len(out) < n:
        call = f"call_{turn}"
        out += [
            {"role": "user", "content": f"question {turn} " * 8, "id": f"u{turn}"},
            {
                "role": "assistant",
                "content": None,
                "id": f"a{turn}",
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "search", "arguments": json.dumps({"q": turn})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call, "content": "result " * 20, "id": f"t{turn}"},
            {"role": "assistant", "content": f"answer {turn} " * 10, "id": f"r{turn}"},
        ]
        turn += 1
    return out[:n]


def best_ms(fn: Callable[[], object], repeat: int = 7) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best * 1000


def main() -> None:
    modes = {
        "count mode": lambda n: ReducerConfig(min_messages=n // 5, max_messages=n // 2),
        "token mode": lambda n: ReducerConfig(
            max_tokens=6 * n, target_tokens=5 * n, token_counter="approximate"
        ),
    }
    print(f"{'mode':<11} {'n':>7} {'ms/reduce':>10} {'pruned':>7}")
    for name, make in modes.items():
        times = {}
        for n in (2_500, 10_000):
            msgs = history(n)
            # A fresh reducer per run so no cached count helps (token mode).
            times[n] = best_ms(lambda: MessageReducer(config=make(n)).reduce(msgs))  # noqa: B023
            pruned = len(MessageReducer(config=make(n)).reduce(msgs).pruned)
            print(f"{name:<11} {n:>7} {times[n]:>10.2f} {pruned:>7}")
        print(
            f"{name:<11} scaling 2,500 -> 10,000: x{times[10_000] / times[2_500]:.2f} (linear: x4)"
        )
    breakdown(modes["token mode"](10_000), history(10_000))


def breakdown(config: ReducerConfig, msgs: list[dict[str, Any]]) -> None:
    counter = resolve_token_counter(config.token_counter)
    views = read_messages(msgs)

    def lazy_counts() -> LazyCounts:
        return LazyCounts.of(TokenCountCache(counter), msgs, views)

    counted = lazy_counts()
    plan = make_plan(views, config, counted)
    reached = sum(c is not None for c in counted._counts)
    total = best_ms(lambda: MessageReducer(config=config).reduce(msgs))
    read = best_ms(lambda: read_messages(msgs))
    count = best_ms(lambda: make_plan(views, config, lazy_counts()))
    planning = best_ms(lambda: make_plan(views, config, counted))
    eager = best_ms(lambda: TokenCountCache(counter).read(msgs))
    print(
        f"token mode 10,000, best of 7 each (gc off): reduce {total:.2f} ms = reading "
        f"{read:.2f} ms + counting {count - planning:.2f} ms ({reached:,} messages the plan "
        f"reached) + plan {planning:.2f} ms + the rest {total - read - count:.2f} ms; "
        f"counting all 10,000 eagerly would take {eager:.2f} ms "
        f"({len(plan.pruned):,} pruned)"
    )


if __name__ == "__main__":
    main()
