"""Token counting figures: heuristic accuracy per script, and incremental counting in reduce.

Run: ``make bench`` (or ``.venv/bin/python bench/bench_tokens.py [--quick]``).

1. Accuracy: the character heuristic against exact o200k_base and cl100k_base counts on
   the corpus in ``tests/fixtures/token_corpus`` (calibration and holdout halves), per
   class, as the markdown rows of docs/tokens.md.
2. Speed of one count: a 100-character ASCII text, and a message carrying it as a dict
   and as a LangChain message object, with the heuristic and with exact counts. Then,
   per language class (the class's text of both halves), the heuristic against exact
   ``encode_ordinary``; the mixed corpus (one dict message per line) in messages per
   second; and the exact o200k_base counter on those messages (text cache emptied
   first) against raw ``encode_ordinary`` of their texts: the framing overhead.
3. Incremental counting: a LangGraph-style append loop (one ``reduce`` per state
   update, one new message each) in token mode with the exact counter, with the kept
   history held near 100, 1,000 and 5,000 messages. It reports the cost per call of
   the whole ``reduce`` and of its counting stage (``TokenCountCache.read``: views and
   token counts), with the cache, and with every message read and counted again each
   call (the cache emptied before each call), and the ratio of the two, measured in
   the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentstate_reducer import MessageReducer, ReducerConfig, tokens
from agentstate_reducer.tokens import (
    TokenCountCache,
    approximate_text_tokens,
    approximate_token_count,
    exact_token_counter,
    load_encoding,
    load_o200k_base,
)

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "token_corpus"
STEPS = 2_000
HISTORIES = (100, 1_000, 5_000)

_SENTENCE = (
    "the report shows that revenue grew in the third quarter while costs stayed flat and "
    "the team plans to hire two engineers next month to keep up with support requests"
)
_WORDS = _SENTENCE.split()


def accuracy() -> None:
    print("Heuristic vs exact tokens (text only, no framing), as docs/tokens.md has it")
    print("| encoding | set | class | characters | exact | heuristic | error |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for encoding in tokens.heuristic._WEIGHTS:
        exact = load_encoding(encoding).encode_ordinary
        estimate = tokens.heuristic._HEURISTICS[encoding]
        for half in ("calibration", "holdout"):
            total_exact = total_heur = 0
            for path in sorted((CORPUS / half).glob("*.txt")):
                text = path.read_text(encoding="utf-8")
                e, h = len(exact(text)), estimate(text)
                total_exact, total_heur = total_exact + e, total_heur + h
                print(f"| {encoding} | {half} | {path.stem} | {len(text)} | {e} | {h} | "
                      f"{(h - e) / e:+.1%} |")
            error = (total_heur - total_exact) / total_exact
            print(f"| **{encoding}** | **{half} total** | | | **{total_exact}** | "
                  f"**{total_heur}** | **{error:+.1%}** |")
    print()


def _best(fn: Callable[[], object], number: int, repeat: int = 25) -> float:
    """Best seconds per call over ``repeat`` rounds of ``number`` calls."""
    return min(timeit.timeit(fn, number=number) / number for _ in range(repeat))


def _corpus_lines() -> list[str]:
    return [
        line
        for path in sorted(CORPUS.glob("*/*.txt"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def heuristic_speed() -> None:
    encode = load_o200k_base().encode_ordinary
    heuristic = tokens.heuristic._HEURISTICS["o200k_base"]
    print("Per language class (both halves' text): heuristic vs exact o200k_base encode")
    print(f"{'class':<10}{'chars':>7}{'heuristic':>12}{'exact':>11}{'ratio':>8}")
    classes = sorted({path.stem for path in CORPUS.glob("*/*.txt")})
    for name in classes:
        paths = sorted(CORPUS.glob(f"*/{name}.txt"))
        text = "\n".join(path.read_text(encoding="utf-8") for path in paths)
        # The heuristic itself: approximate_text_tokens would answer a repeat from memory.
        h = _best(lambda text=text: heuristic(text), 20)  # type: ignore[misc]
        e = _best(lambda text=text: encode(text), 5)  # type: ignore[misc]
        print(f"{name:<10}{len(text):>7}{h * 1e6:>10.1f}us{e * 1e6:>9.1f}us{e / h:>7.1f}x")
    lines = _corpus_lines()
    messages = [{"role": "user", "content": line} for line in lines]
    memo = tokens.heuristic._approximate_o200k

    def estimated() -> None:
        memo.forget()  # each text counted, none answered from memory
        for m in messages:
            approximate_token_count(m)

    t = _best(estimated, 5)
    print(f"mixed corpus, {len(messages)} dict messages (one per line): "
          f"{len(messages) / t:,.0f} messages/s with the heuristic (memory emptied first)")
    exact = tokens.encodings._ExactCounter(load_o200k_base())

    def counted() -> None:
        exact.forget()
        for m in messages:
            exact(m)

    def raw() -> None:
        for line in lines:
            len(encode(line))

    c, r = _best(counted, 3), _best(raw, 3)
    print(f"exact o200k_base counter on them (text cache emptied first): {c * 1e3:.2f} ms; "
          f"raw encode_ordinary of the texts: {r * 1e3:.2f} ms; overhead {c / r:.2f}x")
    print()


def speed() -> None:
    from langchain_core.messages import HumanMessage

    text = (_SENTENCE[:96] + " ok.")[:100]
    message = {"role": "user", "content": text, "id": "m1"}
    human = HumanMessage(content=text, id="m1")
    exact = exact_token_counter()
    encode = load_o200k_base().encode_ordinary
    subjects: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        (
            "100-character ASCII text",
            lambda: tokens.heuristic._HEURISTICS["o200k_base"](text),
            lambda: len(encode(text)),
        ),
        ("the same, seen before", lambda: approximate_text_tokens(text),
         lambda: exact.text_tokens(text)),  # type: ignore[attr-defined]
        # Exact counts of a text seen before come from the counter's text cache.
        ("dict message with it", lambda: approximate_token_count(message), lambda: exact(message)),
        (
            "LangChain HumanMessage with it",
            lambda: approximate_token_count(human),
            lambda: exact(human),
        ),
    ]
    print("One count, best of 7 x 20,000 calls, microseconds per call")
    print(f"{'subject':<32}{'heuristic':>11}{'exact':>9}")
    for label, heuristic, exactly in subjects:
        h = min(timeit.repeat(heuristic, number=20_000, repeat=7)) / 20_000 * 1e6
        e = min(timeit.repeat(exactly, number=20_000, repeat=7)) / 20_000 * 1e6
        print(f"{label:<32}{h:>9.2f}us{e:>7.2f}us")
    print()


def _message(i: int) -> dict[str, Any]:
    """A varied agent history: user turns, tool calls, tool results, answers."""
    if i == 0:
        return {"role": "system", "content": "You are a research assistant.", "id": "m0"}
    words = " ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(20 + i % 40))
    kind = i % 4
    if kind == 0:
        return {"role": "user", "content": f"{words} ({i})", "id": f"m{i}"}
    if kind == 1:
        args = {"query": words[:60], "limit": i % 10, "filters": {"year": 2024}}
        call = {"id": f"c{i}", "type": "function", "function": {"name": "search"}}
        call["function"]["arguments"] = json.dumps(args)
        return {"role": "assistant", "content": None, "tool_calls": [call], "id": f"m{i}"}
    if kind == 2:
        return {"role": "tool", "tool_call_id": f"c{i - 1}", "content": words, "id": f"m{i}"}
    return {"role": "assistant", "content": f"Answer {i}: {words}", "id": f"m{i}"}


def _langchain_message(i: int) -> Any:
    """The same message as a LangChain message object."""
    from langchain_core.messages import convert_to_messages

    return convert_to_messages([_message(i)])[0]


def _budget(history: int) -> int:
    counter = exact_token_counter()
    sample = [_message(i) for i in range(1, 401)]
    return int(history * sum(counter(m) for m in sample) / len(sample))


def _loop(
    history: int, steps: int, recount: bool, make: Callable[[int], Any] = _message
) -> tuple[list[float], list[float], int, int]:
    """Run the append loop: per-call reduce and counting-stage times, final size, counted."""
    config = ReducerConfig(max_tokens=_budget(history), token_counter="tiktoken")
    reducer = MessageReducer(config=config)
    cache = reducer._token_counts  # the reducer's count cache, timed on its own below
    assert isinstance(cache, TokenCountCache)
    state: list[Any] = [make(0)]
    state = reducer.reduce(state, [make(i) for i in range(1, history + 1)]).surviving
    reduce_times: list[float] = []
    count_times: list[float] = []
    counted = cache.misses
    new = [make(history + 1)]
    forget = getattr(cache.counter, "forget", None)  # an exact counter's text cache
    for step in range(steps):
        if recount:
            cache.clear()
            if forget is not None:
                forget()
        t0 = time.perf_counter()
        state = reducer.reduce(state, new).surviving
        reduce_times.append(time.perf_counter() - t0)
        # The counting stage alone, on the list the next call will see.
        new = [make(history + 2 + step)]
        if recount:
            cache.clear()
            if forget is not None:
                forget()
        t0 = time.perf_counter()
        cache.read(state + new)
        count_times.append(time.perf_counter() - t0)
    return reduce_times, count_times, len(state), cache.misses - counted


def incremental(quick: bool) -> None:
    steps = 200 if quick else STEPS
    print(
        f"Append loop, exact counter, one new message per reduce; cached: {steps} steps, "
        "recount: the first 40 steps (its cost per call does not change along the loop)"
    )
    for label, make in (("dicts", _message), ("LangChain message objects", _langchain_message)):
        print(f"-- {label}")
        _table(steps, make)
    print(
        "(medians per call; 'counting' is TokenCountCache.read, views and counts, on the "
        "next call's list; 'counted/call': messages the cached loop sent to the counter "
        "per call)"
    )


def _table(steps: int, make: Callable[[int], Any]) -> None:
    header = (
        f"{'kept':>6}{'reduce cached':>15}{'reduce recount':>16}{'ratio':>8}"
        f"{'counting cached':>17}{'recount':>10}{'ratio':>8}{'counted/call':>14}"
    )
    print(header)
    for history in HISTORIES:
        cached_reduce, cached_count, size, counted = _loop(history, steps, False, make)
        full_reduce, full_count, _, _ = _loop(history, min(steps, 40), True, make)
        r_c, r_f = statistics.median(cached_reduce), statistics.median(full_reduce)
        c_c, c_f = statistics.median(cached_count), statistics.median(full_count)
        print(
            f"{size:>6}{r_c * 1e3:>13.2f}ms{r_f * 1e3:>14.2f}ms{r_f / r_c:>7.1f}x"
            f"{c_c * 1e3:>15.2f}ms{c_f * 1e3:>8.2f}ms{c_f / c_c:>7.1f}x"
            f"{counted / steps:>14.2f}"
        )
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 steps instead of 2,000")
    args = parser.parse_args()
    accuracy()
    speed()
    heuristic_speed()
    incremental(args.quick)


if __name__ == "__main__":
    main()
