"""The floor: one bare Python pass over a history, reading what any pruner must read.

For each message it reads the role, the ids of the tool calls it issues and the id of
the call it answers, and keeps them as one tuple per message: no validation, no
aliases, no linking, no pruning. ``floor_counting`` adds one call of a token counter per
message. ``make bench`` states every one-shot ``reduce()`` as a multiple of these.

    python bench/floor.py        # prints the floor for 10,000 dicts
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def floor(messages: list[Any]) -> list[tuple[Any, Any, Any]]:
    """Role, issued tool-call ids and answered tool-call id of each message."""
    out = []
    append = out.append
    for m in messages:
        if type(m) is dict:
            role = m.get("role")
            calls = m.get("tool_calls")
            answer = m.get("tool_call_id")
        else:  # a LangChain message: only ai messages have tool_calls, only tool ones an id
            role = m.type
            calls = m.tool_calls if role == "ai" else None
            answer = m.tool_call_id if role == "tool" else None
        append((role, [c["id"] for c in calls] if calls else (), answer))
    return out


def floor_counting(messages: list[Any], counter: Callable[[Any], int]) -> int:
    """:func:`floor` plus ``counter(message)`` for every message; returns the total."""
    floor(messages)
    return sum(map(counter, messages))


if __name__ == "__main__":
    from conversations import history

    msgs = history(10_000)
    best = float("inf")
    for _ in range(9):
        t0 = time.perf_counter()
        floor(msgs)
        best = min(best, time.perf_counter() - t0)
    print(f"floor, 10,000 dicts: {best * 1000:.2f} ms")
