"""LangChain v1 standard content blocks read the same for the plan, validation and billing."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agentstate_reducer import MessageReducer, ReducerConfig, trim_messages, validate_history
from agentstate_reducer.read import (
    MEDIA_PART,
    REASONING_PART,
    TOOL_USE_PART,
    content_kinds,
    message_parts,
    read_message,
)
from agentstate_reducer.reducer import repair_dangling_calls

CALL_BLOCKS = [
    {"type": "tool_call", "id": "c1", "name": "f", "args": {}},
    {"type": "tool_use", "id": "c1", "name": "f", "input": {}},
    {"type": "invalid_tool_call", "id": "c1", "name": "f", "args": "{bad"},
]


def _dict_history(block: dict[str, Any]) -> list[Any]:
    call = {"role": "assistant", "content": [block]}
    return [
        {"role": "user", "content": "q"},
        call,
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    ]


def _langchain_history(block: dict[str, Any]) -> list[Any]:
    return [
        HumanMessage("q", id="h"),
        AIMessage(content=[block], id="a"),
        ToolMessage("r", tool_call_id="c1", id="t"),
    ]


@pytest.mark.parametrize("block", CALL_BLOCKS, ids=lambda b: b["type"])
@pytest.mark.parametrize("history", [_dict_history, _langchain_history], ids=["dict", "object"])
def test_a_call_block_in_content_is_a_call_for_the_plan(history: Any, block: Any) -> None:
    h = history(block)
    assert read_message(h[1]).calls == ("c1",)
    result = MessageReducer(config=ReducerConfig(max_messages=100)).reduce(h)
    assert result.pruned == []
    assert result.surviving == h
    assert validate_history(h) == []
    assert repair_dangling_calls(h)[1] == []  # answered: nothing to repair


@pytest.mark.parametrize("history", [_dict_history, _langchain_history], ids=["dict", "object"])
def test_a_call_block_cut_with_its_result_keeps_the_pair(history: Any) -> None:
    h = history(CALL_BLOCKS[0]) + (
        [{"role": "user", "content": "next"}]
        if history is _dict_history
        else [HumanMessage("next", id="n")]
    )
    out = MessageReducer(config=ReducerConfig(max_messages=2, min_messages=1)).reduce(h).surviving
    assert validate_history(out) == []
    kept = trim_messages(h, max_tokens=3, token_counter=len)
    assert validate_history(kept) == []


def test_an_unanswered_call_block_is_dangling() -> None:
    h = [*_dict_history(CALL_BLOCKS[0])[:2], {"role": "user", "content": "and?"}]
    assert [p.rule for p in validate_history(h)] == ["unanswered-call"]
    repaired, _ = repair_dangling_calls(h)
    assert repaired[2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": repaired[2]["content"],
    }
    assert validate_history(repaired) == []


@pytest.mark.parametrize("kind", ["server_tool_call", "server_tool_use"])
def test_a_server_side_call_is_billed_but_needs_no_tool_result(kind: str) -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": kind, "id": "s1", "name": "web_search", "args": {"q": "x"}},
            {"type": "server_tool_result", "tool_call_id": "s1", "output": "found"},
            {"type": "text", "text": "answer"},
        ],
    }
    h = [{"role": "user", "content": "q"}, message, {"role": "user", "content": "thanks"}]
    assert read_message(message).calls == ()
    assert message_parts(message).tool_calls == (("web_search", '{"q":"x"}'),)
    assert validate_history(h) == []
    assert repair_dangling_calls(h)[1] == []


V1_BLOCKS = [
    ({"type": "reasoning", "reasoning": "think first"}, REASONING_PART),
    ({"type": "thinking", "thinking": "think first", "signature": "s"}, REASONING_PART),
    ({"type": "image", "url": "https://example.invalid/a.png"}, MEDIA_PART),
    ({"type": "image", "base64": "AAAA", "mime_type": "image/png"}, MEDIA_PART),
    ({"type": "file", "file_id": "f1"}, MEDIA_PART),
    ({"type": "tool_call", "id": "c1", "name": "f", "args": {}}, TOOL_USE_PART),
]


@pytest.mark.parametrize(("block", "kind"), V1_BLOCKS, ids=lambda v: str(v))
def test_v1_blocks_read_the_same_as_dicts_and_objects(block: Any, kind: str) -> None:
    as_dict = {"role": "assistant", "content": [block]}
    as_object = AIMessage(content=[block])
    for message in (as_dict, as_object):
        assert content_kinds(message) == (kind,)
    assert message_parts(as_dict) == message_parts(as_object)
    parts = message_parts(as_dict)
    assert parts.media == (1 if kind == MEDIA_PART else 0)
    if kind == REASONING_PART:
        assert parts.texts == ("think first",)


def test_reasoning_only_assistant_turn_is_not_empty_for_anthropic() -> None:
    h = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}]},
        {"role": "user", "content": "go on"},
    ]
    # Not empty-text; but Anthropic rejects a turn ending with its thinking block.
    assert [p.rule for p in validate_history(h, provider="anthropic")] == ["thinking-last"]
