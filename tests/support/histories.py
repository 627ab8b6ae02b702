"""Hypothesis strategies for real message histories in every shape the package reads."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

SHAPES = ("openai", "anthropic", "langchain")


def system(shape: str, text: str, ident: str) -> Any:
    if shape == "langchain":
        return SystemMessage(content=text, id=ident)
    return {"role": "system", "content": text, "id": ident}


def human(shape: str, text: str, ident: str) -> Any:
    if shape == "langchain":
        return HumanMessage(content=text, id=ident)
    return {"role": "user", "content": text, "id": ident}


def ai(shape: str, text: str, ident: str, calls: list[str] | None = None) -> Any:
    calls = calls or []
    if shape == "langchain":
        return AIMessage(
            content=text,
            id=ident,
            tool_calls=[{"id": c, "name": "lookup", "args": {"q": c}} for c in calls],
        )
    if shape == "anthropic":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [
            {"type": "tool_use", "id": c, "name": "lookup", "input": {"q": c}} for c in calls
        ]
        return {"role": "assistant", "content": blocks or text, "id": ident}
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "id": ident}
    message["tool_calls"] = [
        {
            "id": c,
            "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"q": c})},
        }
        for c in calls
    ] or None
    return message


def results(shape: str, calls: list[str], ident: str) -> list[Any]:
    """The messages answering ``calls``: one per call, or one user turn for Anthropic."""
    if shape == "anthropic":
        blocks = [{"type": "tool_result", "tool_use_id": c, "content": f"r{c}"} for c in calls]
        return [{"role": "user", "content": blocks, "id": ident}]
    if shape == "langchain":
        return [
            ToolMessage(content=f"r{c}", tool_call_id=c, id=f"{ident}-{k}")
            for k, c in enumerate(calls)
        ]
    return [
        {"role": "tool", "tool_call_id": c, "content": f"r{c}", "id": f"{ident}-{k}"}
        for k, c in enumerate(calls)
    ]


@st.composite
def histories(draw: st.DrawFn, *, shape: str | None = None, max_turns: int = 12) -> list[Any]:
    """A conversation: a system prompt, then user turns answered by text or tool-call rounds.

    Includes parallel calls and (sometimes) results orphaned by an earlier trim.
    """
    shape = shape or draw(st.sampled_from(SHAPES))
    out: list[Any] = []
    n = 0

    def nid() -> str:
        nonlocal n
        n += 1
        return f"m{n}"

    if draw(st.booleans()):
        out.append(system(shape, "be helpful " * draw(st.integers(1, 4)), nid()))
    for _ in range(draw(st.integers(0, max_turns))):
        out.append(human(shape, "q " * draw(st.integers(1, 30)), nid()))
        for _ in range(draw(st.integers(0, 2))):
            k = draw(st.integers(1, 3))
            calls = [f"c{n}_{j}" for j in range(k)]
            out.append(ai(shape, "", nid(), calls))
            out.extend(results(shape, calls, nid()))
        out.append(ai(shape, "a " * draw(st.integers(1, 30)), nid()))
    if out and draw(st.integers(0, 9)) == 0:
        # A result whose call was cut away by someone else.
        at = draw(st.integers(1, len(out)))
        out[at:at] = results(shape, ["lost"], nid())
    return out
