"""LangGraph's own ``add_messages`` cases, adapted: ``reducing_add_messages(MessageReducer())``
(a reducer that never prunes) must behave as ``add_messages`` does in every calling form.

Each case runs against both, so a change in LangGraph's behaviour shows up here as a
difference, not as a stale expectation. Written after the cases of LangGraph's
``libs/langgraph/tests/test_messages_state.py`` and the dict/tuple coercion cases of its
``test_channels.py``; the pruning-specific difference (removing an id the reducer pruned)
is tested in ``test_langgraph_graph.py``.
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from pydantic import create_model
from typing_extensions import TypedDict

from agentstate_reducer import MessageReducer
from agentstate_reducer.langgraph import reducing_add_messages

MERGES = {
    "add_messages": add_messages,
    "reducing_add_messages": reducing_add_messages(MessageReducer()),
}


@pytest.fixture(params=sorted(MERGES))
def merge(request: pytest.FixtureRequest) -> Any:
    return MERGES[request.param]


def shape(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    """What a message list says, ids aside (add_messages assigns random ones)."""
    return [(type(m).__name__, m.content) for m in messages]


# -- merging --------------------------------------------------------------------------------


def test_one_message_is_appended(merge: Any) -> None:
    result = merge([HumanMessage("Hello", id="1")], AIMessage("Hi there!", id="2"))
    assert result == [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]


def test_a_list_is_appended_in_order(merge: Any) -> None:
    right = [AIMessage("Hi there!", id="2"), SystemMessage("System message", id="3")]
    assert merge([HumanMessage("Hello", id="1")], right) == [HumanMessage("Hello", id="1"), *right]


def test_a_known_id_replaces_the_message(merge: Any) -> None:
    result = merge([HumanMessage("Hello", id="1")], HumanMessage("Hello again", id="1"))
    assert result == [HumanMessage("Hello again", id="1")]


def test_missing_ids_are_assigned_uuid4s(merge: Any) -> None:
    result = merge([HumanMessage("Hello")], [AIMessage("Hi there!")])
    assert len(result) == 2
    assert all(UUID(m.id, version=4) for m in result)


def test_a_repeated_id_in_the_update_keeps_the_last(merge: Any) -> None:
    result = merge([], [AIMessage("Hi there!", id="1"), AIMessage("Hi there again!", id="1")])
    assert [(m.id, m.content) for m in result] == [("1", "Hi there again!")]


def test_remove_then_re_add_keeps_the_last(merge: Any) -> None:
    right = [RemoveMessage(id="1"), AIMessage("Hi there!", id="1"), AIMessage("again", id="1")]
    result = merge([AIMessage("Hello!", id="1")], right)
    assert [(m.id, m.content) for m in result] == [("1", "again")]


def test_mixed_update_replace_remove_and_append(merge: Any) -> None:
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]
    right = [HumanMessage("Updated", id="1"), RemoveMessage(id="2"), SystemMessage("New", id="3")]
    assert merge(left, right) == [HumanMessage("Updated", id="1"), SystemMessage("New", id="3")]


def test_empty_sides(merge: Any) -> None:
    hello = HumanMessage("Hello", id="1")
    assert merge([], []) == []
    assert merge([], [hello]) == [hello]
    assert merge([hello], []) == [hello]


def test_single_messages_on_both_sides(merge: Any) -> None:
    left, right = HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")
    assert merge(left, right) == [left, right]


def test_message_likes_are_coerced(merge: Any) -> None:
    result = merge([], [("user", "hi"), {"role": "ai", "content": "hello", "id": "a"}, "bye"])
    assert shape(result) == [
        ("HumanMessage", "hi"), ("AIMessage", "hello"), ("HumanMessage", "bye")
    ]
    replaced = merge(result, [{"role": "human", "content": "again", "id": "a"}])
    assert shape(replaced)[1] == ("HumanMessage", "again")


def test_a_chunk_becomes_a_message(merge: Any) -> None:
    result = merge([HumanMessage("Hello", id="1")], [AIMessageChunk("Hi", id="2")])
    assert [type(m).__name__ for m in result] == ["HumanMessage", "AIMessage"]


def test_a_known_id_among_new_ones_replaces_in_place(merge: Any) -> None:
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi", id="2")]
    result = merge(left, [HumanMessage("new", id="3"), AIMessage("Hi again", id="2")])
    assert [(m.id, m.content) for m in result] == [("1", "Hello"), ("2", "Hi again"), ("3", "new")]


def test_a_message_of_the_list_without_an_id_is_given_one(merge: Any) -> None:
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi")]
    result = merge(left, [HumanMessage("next", id="3")])
    assert [m.id for m in result][::2] == ["1", "3"]
    assert UUID(result[1].id, version=4)


def test_a_top_level_tuple_is_one_message(merge: Any) -> None:
    assert shape(merge([], ("user", "hi"))) == [("HumanMessage", "hi")]


# -- removing --------------------------------------------------------------------------------


def test_remove_message(merge: Any) -> None:
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]
    assert merge(left, RemoveMessage(id="2")) == [HumanMessage("Hello", id="1")]


def test_removing_twice_in_one_update(merge: Any) -> None:
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]
    result = merge(left, [RemoveMessage(id="2"), RemoveMessage(id="2")])
    assert result == [HumanMessage("Hello", id="1")]


def test_removing_every_message_by_id(merge: Any) -> None:
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]
    assert merge(left, [RemoveMessage(id="1"), RemoveMessage(id="2")]) == []


def test_removing_an_id_that_never_existed_raises(merge: Any) -> None:
    with pytest.raises(ValueError, match="delete a message with an ID that doesn't exist"):
        merge([HumanMessage("Hello", id="1")], RemoveMessage(id="2"))


def test_the_removal_dict_is_the_remove_message(merge: Any) -> None:
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]
    assert merge(left, [{"type": "remove", "id": "2", "content": ""}]) == left[:1]
    with pytest.raises(ValueError, match="doesn't exist"):
        merge(left, [{"type": "remove", "id": "3", "content": ""}])


def test_remove_all_messages(merge: Any) -> None:
    left = [HumanMessage("Hello"), AIMessage("Hi there!")]
    assert merge(left, [RemoveMessage(id=REMOVE_ALL_MESSAGES)]) == []
    left = [HumanMessage("Hello"), AIMessage("Hi there!")]
    result = merge(left, [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("Updated")])
    assert shape(result) == [("HumanMessage", "Updated")]
    left = [HumanMessage("Hello"), AIMessage("Hi there!")]
    right = [HumanMessage("Before"), RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("After")]
    assert shape(merge(left, right)) == [("HumanMessage", "After")]


# -- calling forms ---------------------------------------------------------------------------


def test_no_arguments_return_a_partial(merge: Any) -> None:
    partial = merge()
    assert partial([HumanMessage("a", id="1")], [AIMessage("b", id="2")]) == [
        HumanMessage("a", id="1"), AIMessage("b", id="2")
    ]


@pytest.mark.parametrize("side", ["left", "right"])
def test_one_none_side_raises(merge: Any, side: str) -> None:
    args = {"left": [HumanMessage("a", id="1")], "right": [HumanMessage("b", id="2")]}
    args[side] = None
    received = "right" if side == "left" else "left"
    with pytest.raises(ValueError, match=f"Only received: '{received}'"):
        merge(**args)


def test_an_unknown_format_raises(merge: Any) -> None:
    with pytest.raises(ValueError, match="format"):
        merge([], [HumanMessage("a")], format="xml")


# -- in a graph ------------------------------------------------------------------------------


def run_foo_graph(state_schema: Any, input: dict[str, Any]) -> dict[str, Any]:
    def foo(state: Any) -> dict[str, Any]:
        return {"messages": [HumanMessage("foo")]}

    graph = StateGraph(state_schema)
    graph.add_node("foo", foo)
    graph.add_edge(START, "foo")
    graph.add_edge("foo", END)
    return dict(graph.compile().invoke(input))


def typed_state(merge: Any) -> Any:
    return TypedDict("State", {"messages": Annotated[list[AnyMessage], merge]})


def pydantic_state(merge: Any) -> Any:
    # create_model: a class body's annotation would be read from the module's globals.
    return create_model("State", messages=(Annotated[list[AnyMessage], merge], ...))


@pytest.mark.parametrize("schema", [typed_state, pydantic_state])
def test_a_state_graph_takes_the_standard_input(merge: Any, schema: Any) -> None:
    result = run_foo_graph(schema(merge), {"messages": [("user", "meow")]})
    assert shape(result["messages"]) == [("HumanMessage", "meow"), ("HumanMessage", "foo")]


def test_messages_state_is_the_same_with_either() -> None:
    plain = run_foo_graph(MessagesState, {"messages": [("user", "meow")]})
    ours = run_foo_graph(typed_state(MERGES["reducing_add_messages"]),
                         {"messages": [("user", "meow")]})
    assert shape(plain["messages"]) == shape(ours["messages"])


def anthropic_shaped() -> list[BaseMessage]:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                         "data": "1234"}}
    return [
        HumanMessage(content=[
            {"type": "text", "text": "Here's an image:", "cache_control": {"type": "ephemeral"}},
            image,
        ]),
        AIMessage(content=[{"type": "tool_use", "name": "foo", "input": {"bar": "baz"},
                            "id": "1"}]),
        HumanMessage(content=[{"type": "tool_result", "tool_use_id": "1", "is_error": False,
                               "content": [image]}]),
    ]


def test_format_langchain_openai_in_a_graph(merge: Any) -> None:
    def foo(state: Any) -> dict[str, Any]:
        return {"messages": anthropic_shaped()}

    graph = StateGraph(typed_state(merge(format="langchain-openai")))
    graph.add_node("foo", foo)
    graph.add_edge(START, "foo")
    graph.add_edge("foo", END)
    result = graph.compile().invoke({"messages": [("user", "meow")]})
    for m in result["messages"]:
        m.id = None
    url = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,1234"}}
    assert result["messages"] == [
        HumanMessage("meow"),
        HumanMessage(content=[{"type": "text", "text": "Here's an image:"}, url]),
        AIMessage(content="", tool_calls=[
            {"name": "foo", "type": "tool_call", "args": {"bar": "baz"}, "id": "1"}
        ]),
        ToolMessage(content=[url], tool_call_id="1"),
    ]


def test_format_given_to_reducing_add_messages_directly() -> None:
    ours = reducing_add_messages(MessageReducer(), format="langchain-openai")
    expected = add_messages(format="langchain-openai")([], anthropic_shaped())
    got = ours([], anthropic_shaped())
    assert [(type(m).__name__, m.content) for m in got] == [
        (type(m).__name__, m.content) for m in expected
    ]


def test_an_append_of_new_messages_skips_the_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    """New messages onto a list of messages that all have ids: ``left + right``, without
    the merge's conversions; an update that replaces an id still goes through it."""
    import agentstate_reducer.langgraph._graph as graph_module

    merged: list[int] = []
    merge_messages = graph_module.merge_messages

    def counting(*args: Any, **kwargs: Any) -> Any:
        merged.append(1)
        return merge_messages(*args, **kwargs)

    monkeypatch.setattr(graph_module, "merge_messages", counting)
    merge = reducing_add_messages(MessageReducer())
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi", id="2")]
    state = merge(left, [HumanMessage("next"), AIMessage("ok", id="4")])
    assert not merged and [m.content for m in state] == ["Hello", "Hi", "next", "ok"]
    assert UUID(state[2].id, version=4)
    merge(state, [AIMessage("replaced", id="2")])
    assert merged == [1]
