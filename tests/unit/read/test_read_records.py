"""read_records: the records read_messages gives, with what the read saw of the structure
on the way (the messages issuing or answering calls, whether any groups), which the
structure of the history takes instead of a pass over every record (issue 23)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import histories
from strategies_responses import responses_histories

from agentstate_reducer import ReducerConfig
from agentstate_reducer._structure import link_calls, structure_of
from agentstate_reducer.plan.rules import plan_structure
from agentstate_reducer.read import read_messages
from agentstate_reducer.read.chat import Records, read_records

_any_history = histories() | responses_histories() | st.lists(
    st.sampled_from([
        {"role": "user", "content": "q", "id": "u"},
        {"role": "tool", "content": "r", "tool_call_id": "c1"},
        {"role": "tool", "content": "r", "tool_call_id": ""},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "assistant", "content": "t",
         "tool_calls": [{"id": "c1", "name": "f", "args": {}},
                        {"id": "c2", "name": "g", "args": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "r"}]},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "r"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
    ]),
    max_size=8,
)


def _expected(messages: list[Any]) -> Records:
    views = read_messages(messages)
    linking = [i for i, v in enumerate(views) if v.calls or v.answers]
    return Records(views, linking, any(v.group for v in views))


@settings(max_examples=200, deadline=None)
@given(_any_history)
def test_the_read_finds_what_the_records_say(messages: list[Any]) -> None:
    assert read_records(messages) == _expected(messages)


@settings(max_examples=200, deadline=None)
@given(_any_history, st.booleans(), st.integers(0, 4))
def test_a_structure_given_what_the_read_found_plans_as_one_that_finds_it(
    messages: list[Any], preserve_first: bool, keep: int
) -> None:
    views, linking, grouped = read_records(messages)
    told = structure_of(views, preserve_first=preserve_first, linking=linking, grouped=grouped)
    found = structure_of(views, preserve_first=preserve_first)
    assert told.parents == found.parents == link_calls(views)[0]
    assert told.answering == found.answering
    assert told.grouped is found.grouped
    config = ReducerConfig(
        min_messages=keep, max_messages=keep + 1, preserve_first=preserve_first
    )
    assert plan_structure(told, config) == plan_structure(found, config)
