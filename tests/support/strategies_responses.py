"""Hypothesis strategies for valid OpenAI Responses API input lists (Agents SDK items).

A history is a list of items as ``Runner``/``to_input_list()`` keeps them: user messages
(easy ``{"role": "user", "content": ...}`` or typed ``{"type": "message", ...}``), model
responses (an optional ``reasoning`` item, an optional assistant ``message``, parallel
``function_call`` / ``custom_tool_call`` / ``computer_call`` items), their outputs
(matched by ``call_id``, in any order after the calls), and ``compaction`` items between
complete exchanges. The last response may leave its calls pending (no output yet, or
only some). Every drawn history passes ``validate_history(provider="openai-responses")``.

Every item also carries an unknown key (``"x_note"``), which a write-back must keep.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

__all__ = ("responses_histories",)

_words = st.text(alphabet="abcdefgh ", min_size=1, max_size=16).filter(lambda s: s.strip() != "")


class _Ids:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.n}"


@st.composite
def _user(draw: st.DrawFn, ids: _Ids) -> dict[str, Any]:
    text = draw(_words)
    if draw(st.booleans()):
        return {"role": "user", "content": text, "x_note": 1}
    return {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
        "x_note": 1,
    }


@st.composite
def _reasoning(draw: st.DrawFn, ids: _Ids) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": ids("rs"),
        "summary": [{"type": "summary_text", "text": draw(_words)}],
    }
    if draw(st.booleans()):
        item["encrypted_content"] = "gAAAA" + "x" * draw(st.integers(0, 300))
    if draw(st.booleans()):  # raw reasoning text, which trim must never cut in part
        texts = draw(st.lists(_words, min_size=1, max_size=3))
        item["content"] = [{"type": "reasoning_text", "text": t * 8} for t in texts]
    item["x_note"] = 1
    return item


@st.composite
def _call(draw: st.DrawFn, ids: _Ids) -> tuple[dict[str, Any], dict[str, Any]]:
    call = ids("call")
    kinds = ["function_call", "function_call", "custom_tool_call", "computer_call"]
    kind = draw(st.sampled_from(kinds))
    if kind == "function_call":
        item: dict[str, Any] = {
            "type": "function_call",
            "id": ids("fc"),
            "call_id": call,
            "name": "lookup",
            "arguments": json.dumps({"q": draw(_words)}),
            "status": "completed",
        }
        output: dict[str, Any] = {"type": "function_call_output", "call_id": call}
        output["output"] = draw(
            st.one_of(_words, st.builds(lambda t: [{"type": "input_text", "text": t}], _words))
        )
    elif kind == "custom_tool_call":
        item = {"type": "custom_tool_call", "id": ids("ctc"), "call_id": call, "name": "sql",
                "input": draw(_words)}
        output = {"type": "custom_tool_call_output", "call_id": call, "output": draw(_words)}
    else:
        item = {"type": "computer_call", "id": ids("cu"), "call_id": call,
                "action": {"type": "click", "x": 1, "y": 2}, "pending_safety_checks": [],
                "status": "completed"}
        screenshot = {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA"}
        output = {"type": "computer_call_output", "call_id": call, "output": screenshot}
    item["x_note"] = 1
    output["x_note"] = 1
    return item, output


@st.composite
def _response(draw: st.DrawFn, ids: _Ids, *, final: bool) -> list[dict[str, Any]]:
    """The items of one model response (reasoning first), without outputs."""
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        items.append(draw(_reasoning(ids)))
    if final or draw(st.integers(0, 3)) == 0:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "id": ids("msg"),
                "content": [{"type": "output_text", "text": draw(_words), "annotations": []}],
                "status": "completed",
                "x_note": 1,
            }
        )
    return items


@st.composite
def responses_histories(
    draw: st.DrawFn, *, max_exchanges: int = 5, compaction: bool = True, pending: bool = True
) -> list[dict[str, Any]]:
    """Draw a valid Responses input list (see the module docstring)."""
    ids = _Ids()
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": "developer", "content": draw(_words), "x_note": 1})
    exchanges = draw(st.integers(1, max_exchanges))
    for k in range(exchanges):
        if compaction and out and draw(st.integers(0, 4)) == 0:
            out.append({"type": "compaction", "id": ids("cmp"),
                        "encrypted_content": "gAAAA" + "c" * draw(st.integers(0, 200)),
                        "x_note": 1})
        out.append(draw(_user(ids)))
        last = k == exchanges - 1
        for _ in range(draw(st.integers(0, 3))):
            response = draw(_response(ids, final=False))
            pairs = [draw(_call(ids)) for _ in range(draw(st.integers(1, 3)))]
            out.extend(response)
            out.extend(call for call, _ in pairs)
            outputs = [output for _, output in pairs]
            if pending and last and draw(st.integers(0, 3)) == 0:
                # The tools are still running: some outputs, maybe none, and nothing after.
                out.extend(outputs[: draw(st.integers(0, len(outputs) - 1))])
                return out
            out.extend(draw(st.permutations(outputs)))
            if compaction and draw(st.integers(0, 5)) == 0:
                out.append({"type": "compaction", "id": ids("cmp"),
                            "encrypted_content": "gAAAA" + "m" * draw(st.integers(0, 200)),
                            "x_note": 1})
        out.extend(draw(_response(ids, final=True)))
    return out
