"""trim_messages against langchain_core's, 10,000 messages, "approximate" counting, same run.

Both trim the same agent history (user turns, tool calls and their results, answers)
with ``strategy="last"``, ``include_system=True``, ``start_on="human"``; each uses its own
``"approximate"`` counter. The history is given once as LangChain messages and once as
OpenAI dicts (which LangChain first converts to messages). Prints the best of 9 interleaved
runs in milliseconds, the ratio, and how many messages each kept.

    python bench/bench_trim.py
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from agentstate_reducer import trim_messages

N = 10_000
BUDGETS = (4_000, 16_000, 64_000, 128_000, 10**9)
HEADLINE = 16_000


def history(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful research agent. " * 10, "id": "sys"}
    ]
    turn = 0
    while len(out) < n:
        call = f"call_{turn}"
        out += [
            {
                "role": "user",
                "content": f"question {turn}: " + "what about this? " * 6,
                "id": f"u{turn}",
            },
            {
                "role": "assistant",
                "content": "",
                "id": f"a{turn}",
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "search", "arguments": json.dumps({"q": turn})},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": call,
                "content": "result line\n" * 15,
                "id": f"t{turn}",
            },
            {
                "role": "assistant",
                "content": f"answer {turn}: " + "because. " * 12,
                "id": f"r{turn}",
            },
        ]
        turn += 1
    return out[:n]


def best_ms(*fns: Callable[[], object], repeat: int = 9) -> list[float]:
    """Best time of each function in milliseconds, runs interleaved so load hits both alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return [b * 1000 for b in best]


def main() -> None:
    from langchain_core.messages import convert_to_messages
    from langchain_core.messages import trim_messages as lc_trim

    dicts = history(N)
    inputs = {"LangChain messages": list(convert_to_messages(dicts)), "OpenAI dicts": dicts}
    options: dict[str, Any] = {
        "strategy": "last",
        "include_system": True,
        "start_on": "human",
        "token_counter": "approximate",
    }
    print(f"{N:,} messages; strategy='last', include_system, start_on='human', 'approximate'")
    print(
        f"{'input':<19} {'max_tokens':>11} {'langchain ms':>13} {'ours ms':>9} {'ratio':>8}"
        f" {'kept lc/ours':>13}"
    )
    headline: dict[str, float] = {}
    for label, messages in inputs.items():
        for budget in BUDGETS:
            lc_kept = lc_trim(messages, max_tokens=budget, **options)
            ours_kept = trim_messages(messages, max_tokens=budget, **options)
            lc_ms, ours_ms = best_ms(
                lambda: lc_trim(messages, max_tokens=budget, **options),  # noqa: B023
                lambda: trim_messages(messages, max_tokens=budget, **options),  # noqa: B023
            )
            ratio = lc_ms / ours_ms
            shown = "all" if budget >= 10**9 else f"{budget:,}"
            print(
                f"{label:<19} {shown:>11} {lc_ms:>13.2f} {ours_ms:>9.2f} {ratio:>7.2f}x"
                f" {len(lc_kept):>6}/{len(ours_kept):<6}"
            )
            if budget == HEADLINE:
                headline[label] = ratio
    for label, ratio in headline.items():
        print(f"headline, {label}, max_tokens={HEADLINE:,}: {ratio:.1f}x langchain_core's speed")


if __name__ == "__main__":
    main()
