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


def floor_counting(
    messages: list[Any], counter: Callable[[Any], int], limit: int | None = None
) -> int:
    """:func:`floor` plus ``counter(message)`` from the last message back, as the reducer
    counts, until the total passes ``limit`` (every message when ``None``); returns it."""
    floor(messages)
    if limit is None:
        return sum(map(counter, messages))
    total = 0
    for message in reversed(messages):
        total += counter(message)
        if total > limit:
            break
    return total


def floor_responses(items: list[Any]) -> list[tuple[Any, Any, Any]]:
    """:func:`floor` for OpenAI Responses items: the type (or role), the call id a
    ``function_call`` issues and the one a ``function_call_output`` answers."""
    out = []
    append = out.append
    for item in items:
        kind = item.get("type")
        call = item.get("call_id")
        append((item.get("role") if kind is None or kind == "message" else kind,
                (call,) if kind == "function_call" else (),
                call if kind == "function_call_output" else None))
    return out


def floor_gemini(contents: list[Any]) -> list[tuple[Any, Any, Any]]:
    """:func:`floor` for Gemini contents: the role, the names of the functions its parts
    call and of those they answer (Gemini calls carry no id)."""
    out = []
    append = out.append
    for content in contents:
        calls, answer = [], None
        for part in content.get("parts") or ():
            if "functionCall" in part:
                calls.append(part["functionCall"].get("name"))
            elif "functionResponse" in part:
                answer = part["functionResponse"].get("name")
        append((content.get("role"), calls, answer))
    return out


if __name__ == "__main__":
    from conversations import history

    msgs = history(10_000)
    best = float("inf")
    for _ in range(9):
        t0 = time.perf_counter()
        floor(msgs)
        best = min(best, time.perf_counter() - t0)
    print(f"floor, 10,000 dicts: {best * 1000:.2f} ms")
