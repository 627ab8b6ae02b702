"""Anthropic compaction blocks (issue 26 item 2), read like Responses compaction items.

Anthropic (Compaction): when input passes the trigger the API summarises the
conversation into a ``{"type": "compaction", "content": ...}`` block at the head of the
assistant's reply; "on subsequent requests, append the response to your messages. The
API automatically drops all message blocks prior to the compaction block". So what
precedes the latest one is not sent, the message holding it is never pruned nor edited,
and its summary is counted. One test per shape: Anthropic dicts, LangChain messages
with the provider's block, LangChain v1 ``non_standard`` blocks, LangChain dict
serialisations.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict

from agentstate_reducer import (
    ClearToolResults,
    MessageReducer,
    ReducerConfig,
    agent_config,
    validate_history,
)
from agentstate_reducer.read import GROUP_BOUNDARY, editable_parts, message_parts, read_messages

SUMMARY = "Summary: the user asked for the weather in Paris and Rome; both were sunny. " * 4


def _dicts(summary: str, tag: str) -> list[Any]:
    return [
        {"role": "user", "content": f"first question {tag} " + "word " * 40},
        {"role": "assistant", "content": "first answer " + "word " * 60},
        {"role": "user", "content": f"second question {tag}"},
        {
            "role": "assistant",
            "content": [
                {"type": "compaction", "content": summary},
                {"type": "tool_use", "id": f"c-{tag}", "name": "weather", "input": {"q": "Oslo"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"c-{tag}",
                                      "content": "rain " * 80}]},
        {"role": "assistant", "content": "It rains in Oslo. " + "word " * 40},
        {"role": "user", "content": "third question " + "word " * 40},
    ]


def _langchain(summary: str, tag: str) -> list[Any]:
    return [
        HumanMessage(f"first question {tag} " + "word " * 40, id="h0"),
        AIMessage("first answer " + "word " * 60, id="a0"),
        HumanMessage(f"second question {tag}", id="h1"),
        AIMessage(
            content=[{"type": "compaction", "content": summary},
                     {"type": "tool_use", "id": f"c-{tag}", "name": "weather",
                      "input": {"q": "Oslo"}}],
            tool_calls=[{"id": f"c-{tag}", "name": "weather", "args": {"q": "Oslo"}}],
            id="a1",
        ),
        ToolMessage("rain " * 80, tool_call_id=f"c-{tag}", id="t1"),
        AIMessage("It rains in Oslo. " + "word " * 40, id="a2"),
        HumanMessage("third question " + "word " * 40, id="h2"),
    ]


def _v1_blocks(summary: str, tag: str) -> list[Any]:
    messages = _langchain(summary, tag)
    held = messages[3]
    messages[3] = AIMessage(
        content=[{"type": "non_standard", "value": {"type": "compaction", "content": summary}},
                 {"type": "tool_call", "id": f"c-{tag}", "name": "weather",
                  "args": {"q": "Oslo"}}],
        tool_calls=held.tool_calls,
        id="a1",
    )
    return messages


def _serialised(summary: str, tag: str) -> list[Any]:
    return messages_to_dict(_langchain(summary, tag))


SHAPES: dict[str, Callable[[str, str], list[Any]]] = {
    "anthropic-dicts": _dicts,
    "langchain": _langchain,
    "langchain-v1": _v1_blocks,
    "langchain-dicts": _serialised,
}


@pytest.fixture(params=list(SHAPES))
def build(request: pytest.FixtureRequest) -> Callable[[str, str], list[Any]]:
    return SHAPES[request.param]


def test_the_block_is_read_as_a_boundary_and_its_summary_is_billed(
    build: Callable[[str, str], list[Any]],
) -> None:
    history = build(SUMMARY, "x")
    views = read_messages(history)
    assert [v.group == GROUP_BOUNDARY for v in views] == [False, False, False, True, False,
                                                          False, False]
    assert SUMMARY in message_parts(history[3]).texts
    assert editable_parts(history[3]) == ()  # never offered to context editing
    reducer = MessageReducer(config=ReducerConfig(max_tokens=100_000, token_counter="approximate"))
    longer = reducer.count_tokens([build(SUMMARY * 3, "x")[3]])[0]
    assert longer > reducer.count_tokens([history[3]])[0] + 100  # counted, as sent


def test_what_precedes_it_is_not_sent(build: Callable[[str, str], list[Any]]) -> None:
    history = build(SUMMARY, "x")
    result = MessageReducer(config=ReducerConfig(max_messages=100)).reduce(history)
    # The first question is preserved (preserve_first); the rest before the block goes.
    assert result.surviving == [history[0], *history[3:]]
    assert result.pruned_by_reason == {"compacted": 2}
    assert all(a is b for a, b in zip(result.surviving, [history[0], *history[3:]], strict=True))


def test_the_latest_block_is_the_boundary(build: Callable[[str, str], list[Any]]) -> None:
    first, second = build("old summary", "a"), build(SUMMARY, "b")
    history = [*first, *second[1:]]
    result = MessageReducer(config=ReducerConfig(max_messages=100)).reduce(history)
    assert result.surviving[1] is history[len(first) + 2]  # the second compaction


def test_the_block_is_never_pruned_nor_edited(build: Callable[[str, str], list[Any]]) -> None:
    history = build(SUMMARY, "x")
    before = copy.deepcopy(history)
    tight = agent_config(
        max_tokens=150,
        target_tokens=100,
        token_counter="approximate",
        context_edits=[ClearToolResults(trigger_tokens=50, keep=0)],
    )
    result = MessageReducer(config=tight).reduce(history)
    assert history[3] in result.surviving
    held = next(m for m in result.surviving if m is history[3])
    assert held == before[3]  # the object itself, unchanged
    assert history == before
    for count_mode in (ReducerConfig(max_messages=2, min_messages=1),):
        assert history[3] in MessageReducer(config=count_mode).reduce(history).surviving


def test_survivors_are_valid_for_anthropic_and_a_second_reduce_changes_nothing(
    build: Callable[[str, str], list[Any]],
) -> None:
    config = agent_config(max_tokens=400, target_tokens=300, token_counter="approximate")
    reducer = MessageReducer(config=config)
    result = reducer.reduce(build(SUMMARY, "x"))
    assert validate_history(result.surviving, provider="anthropic") == []
    again = reducer.reduce(result.surviving)
    assert again.pruned == [] and again.surviving == result.surviving
