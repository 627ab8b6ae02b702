"""reducing_add_messages keeps add_messages' semantics and then prunes; the update
helpers used by the pre-model hook and the middleware."""

from __future__ import annotations

import warnings
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.prebuilt import create_react_agent
from langgraph.warnings import LangGraphDeprecatedSinceV10
from typing_extensions import TypedDict

from agentstate_reducer import MessageReducer, ReducerConfig, ReducerResult
from agentstate_reducer.langgraph import (
    ReducingMiddleware,
    reducing_add_messages,
    reducing_pre_model_hook,
)
from agentstate_reducer.langgraph._graph import removal_update


def ids(messages: list[Any]) -> list[str | None]:
    return [m.id for m in messages]


def merge_with(max_messages: int = 100, min_messages: int = 0, **options: Any) -> Any:
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=min_messages, max_messages=max_messages, **options)
    )
    return reducing_add_messages(reducer)


# -- add_messages semantics ------------------------------------------------------------


def test_ids_are_assigned_and_message_likes_are_coerced() -> None:
    merged = merge_with()([], [("user", "hi"), {"role": "assistant", "content": "hello"}, "bye"])
    assert [type(m).__name__ for m in merged] == ["HumanMessage", "AIMessage", "HumanMessage"]
    assert all(m.id for m in merged)


def test_a_tuple_is_one_message_as_in_add_messages() -> None:
    merged = merge_with()([], ("user", "hi"))
    assert [(type(m).__name__, m.content) for m in merged] == [("HumanMessage", "hi")]


def test_a_message_with_a_known_id_replaces_it_in_place() -> None:
    merge = merge_with()
    left = merge([], [HumanMessage(content="a", id="1"), AIMessage(content="b", id="2")])
    merged = merge(left, HumanMessage(content="A", id="1"))
    assert [(m.id, m.content) for m in merged] == [("1", "A"), ("2", "b")]


def test_remove_message_and_remove_all() -> None:
    merge = merge_with()
    left = merge([], [HumanMessage(content="a", id="1"), AIMessage(content="b", id="2")])
    assert ids(merge(left, [RemoveMessage(id="1")])) == ["2"]
    reset = merge(left, [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage(content="c", id="3")])
    assert ids(reset) == ["3"]


def test_removing_a_message_that_was_pruned_already_is_a_no_op() -> None:
    merge = merge_with(max_messages=2, min_messages=1, preserve_first=False)
    state = merge([], [HumanMessage(content=str(i), id=str(i)) for i in range(3)])
    assert ids(state) == ["2"]
    assert ids(merge(state, [RemoveMessage(id="0"), HumanMessage(content="3", id="3")])) == [
        "2",
        "3",
    ]
    with pytest.raises(ValueError, match="doesn't exist"):
        add_messages(state, [RemoveMessage(id="0")])


def test_none_on_one_side_raises_and_none_on_both_returns_a_partial() -> None:
    merge = merge_with()
    with pytest.raises(ValueError, match="Only received: 'right'"):
        merge(None, HumanMessage(content="a", id="1"))
    with pytest.raises(ValueError, match="Only received: 'left'"):
        merge([], None)
    partial = merge()
    assert ids(partial([], HumanMessage(content="a", id="1"))) == ["1"]


def test_a_removal_dict_is_a_remove_message() -> None:
    merge = merge_with(max_messages=2, min_messages=1, preserve_first=False)
    state = merge([], [HumanMessage(content=str(i), id=str(i)) for i in range(3)])
    assert ids(merge(state, [{"type": "remove", "id": "2"}])) == []
    # An id this reducer pruned: a no-op, in either form.
    assert ids(merge(state, [{"type": "remove", "id": "0", "content": ""}])) == ["2"]
    with pytest.raises(ValueError, match="doesn't exist"):
        merge(state, [{"type": "remove", "id": "never"}])


def test_an_unknown_format_is_named() -> None:
    reducer = MessageReducer()
    # add_messages' words: "Unrecognized format='x'. Expected one of 'langchain-openai', None."
    with pytest.raises(ValueError, match=r"^Unrecognized format='x'\. Expected one of 'lang"):
        reducing_add_messages(reducer, format="x")
    with pytest.raises(ValueError, match="Unrecognized format="):
        reducing_add_messages(reducer)(format="x")
    with pytest.raises(TypeError, match="expected only format="):
        reducing_add_messages(reducer)([], [], strict=True)


def test_a_bad_reducer_is_named() -> None:
    with pytest.raises(TypeError, match="reducer must be a MessageReducer, got 3"):
        reducing_add_messages(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reducer must be a MessageReducer"):
        reducing_pre_model_hook("r")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reducer must be a MessageReducer"):
        ReducingMiddleware(object())  # type: ignore[arg-type]


# -- laws --------------------------------------------------------------------------------


@st.composite
def updates(draw: Any) -> list[list[Any]]:
    """Batches of updates: new turns (some with tool calls), replacements, removals.

    Replacements and removals target plain human turns of earlier batches (some of
    them pruned by then); touching a tool call would orphan its results on purpose.
    """
    batches: list[list[Any]] = []
    made = 0
    humans: list[str] = []
    for _ in range(draw(st.integers(1, 12))):
        batch: list[Any] = []
        earlier = list(humans)
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["human", "ai", "tool-pair", "replace", "remove"]))
            made += 1
            if kind == "human":
                batch.append(HumanMessage(content=f"h{made}", id=f"m{made}"))
                humans.append(f"m{made}")
            elif kind == "ai":
                batch.append(AIMessage(content=f"a{made}", id=f"m{made}"))
            elif kind == "tool-pair":
                calls = draw(st.integers(1, 2))
                batch.append(
                    AIMessage(
                        content="",
                        id=f"m{made}",
                        tool_calls=[
                            {"name": "f", "args": {}, "id": f"c{made}.{k}"} for k in range(calls)
                        ],
                    )
                )
                batch += [
                    ToolMessage(content="r", tool_call_id=f"c{made}.{k}", id=f"t{made}.{k}")
                    for k in range(calls)
                ]
            elif earlier:
                target = draw(st.sampled_from(earlier))
                earlier.remove(target)
                humans.remove(target)
                if kind == "replace":
                    batch.append(HumanMessage(content="again", id=target))
                    humans.append(target)
                else:
                    batch.append(RemoveMessage(id=target))
        batches.append(batch)
    return batches


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(updates(), st.integers(0, 6), st.integers(0, 6))
def test_merge_then_prune_law_and_invariants(
    batches: list[list[Any]], low: int, extra: int
) -> None:
    reducer = MessageReducer(config=ReducerConfig(min_messages=low, max_messages=low + extra))
    merge = reducing_add_messages(reducer)
    state: list[Any] = [SystemMessage(content="sys", id="sys")]
    for batch in batches:
        known = {m.id for m in state}
        valid = [m for m in batch if not isinstance(m, RemoveMessage) or m.id in known]
        merged = add_messages(list(state), list(valid))
        expected = reducer.reduce(merged).surviving
        in_progress = len(reducer.plan(merged).protected)  # a tool exchange under way stays
        state = merge(state, batch)
        assert ids(state) == ids(expected)
        assert [m.content for m in state] == [m.content for m in expected]
        assert state[0].id == "sys"
        # preserve_first adds one
        assert len(state) <= max(low + extra, low + 1) + in_progress
        issued = set()
        for m in state:
            if isinstance(m, AIMessage):
                issued.update(c["id"] for c in m.tool_calls)
            if isinstance(m, ToolMessage):
                assert m.tool_call_id in issued, "orphaned tool result"
        assert reducer.reduce(state).pruned == []  # idempotence


# -- namespaces in the graph -----------------------------------------------------------------


def record(into: list[Any]) -> Any:
    def remember(pruned: list[Any], namespace: Any) -> None:
        into.append((namespace, ids(pruned)))

    return remember


def recording_reducer(seen: list[Any]) -> MessageReducer:
    return MessageReducer(
        config=ReducerConfig(
            min_messages=1, max_messages=2, preserve_first=False, on_prune=[record(seen)]
        )
    )


def two(*names: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=n, id=n) for n in names]}


def chat_graph(merge: Any) -> Any:
    state = TypedDict("state", {"messages": Annotated[list[AnyMessage], merge]})  # noqa: UP013
    builder = StateGraph(state)
    builder.add_node("echo", lambda s: {"messages": [AIMessage(content="ok")]})
    builder.add_edge(START, "echo")
    return builder


def test_the_given_namespace_wins_and_none_without_one_at_top_level() -> None:
    seen: list[Any] = []
    reducer = recording_reducer(seen)
    fixed = chat_graph(reducing_add_messages(reducer, namespace="alice")).compile()
    fixed.invoke(two("a", "b"))
    assert seen and {ns for ns, _ in seen} == {"alice"}
    seen.clear()
    free = chat_graph(reducing_add_messages(reducer)).compile()
    config = {"configurable": {"thread_id": "t", "memory_namespace": "bob"}}
    free.invoke(two("c", "d"), config)
    assert seen and {ns for ns, _ in seen} == {None}


def test_a_subgraph_reducer_reads_the_namespace_from_the_run() -> None:
    seen: list[Any] = []
    reducer = recording_reducer(seen)
    inner = chat_graph(reducing_add_messages(reducer)).compile()
    outer = chat_graph(add_messages)
    outer.add_node("inner", inner)
    outer.add_edge("echo", "inner")
    graph = outer.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t", "memory_namespace": ("memories", "bob")}}
    graph.invoke({"messages": [HumanMessage(content="c", id="c")]}, config)
    assert seen and {ns for ns, _ in seen} == {("memories", "bob")}


# -- updates for the pre-model hook and the middleware ------------------------------------------


def turn_list() -> list[Any]:
    return [HumanMessage(content=str(i), id=f"h{i}") for i in range(4)]


def test_removal_update_removes_each_pruned_id() -> None:
    existing = turn_list()
    result = ReducerResult(existing[2:], existing[:2])
    update = removal_update(existing, result)
    assert [(type(m).__name__, m.id) for m in update["messages"]] == [
        ("RemoveMessage", "h0"),
        ("RemoveMessage", "h1"),
    ]
    assert ids(add_messages(existing, update["messages"])) == ["h2", "h3"]


def test_removal_update_replaces_the_list_when_a_summary_was_injected() -> None:
    existing = turn_list()
    summary = [HumanMessage(content="summary", id="s"), AIMessage(content="OK", id="k")]
    result = ReducerResult([*summary, *existing[3:]], existing[:3], "summary")
    update = removal_update(existing, result, "chat")
    assert update["chat"][0].id == REMOVE_ALL_MESSAGES
    assert ids(add_messages(existing, update["chat"])) == ["s", "k", "h3"]


def test_removal_update_replaces_the_list_when_a_pruned_message_has_no_id() -> None:
    existing = [HumanMessage(content="x"), *turn_list()]
    result = ReducerResult(existing[1:], existing[:1])
    assert removal_update(existing, result)["messages"][0].id == REMOVE_ALL_MESSAGES
    assert removal_update(existing, ReducerResult(existing, [])) == {}


def test_pre_model_hook_returns_no_update_under_the_threshold() -> None:
    hook = reducing_pre_model_hook(MessageReducer(2, 10))
    assert hook.invoke({"messages": turn_list()}) == {}


class Scripted:
    """Scripted replies for the summary runs (no tools: the summary is what is checked)."""

    @staticmethod
    def model(kit: Any, turns: int) -> Any:
        model = kit.model(turns)
        model.messages = iter(AIMessage(content=f"answer {i}", id=f"ai-{i}") for i in range(turns))
        return model


def summarising_reducer() -> MessageReducer:
    return MessageReducer(
        config=ReducerConfig(
            min_messages=4,
            max_messages=8,
            preserve_first=False,
            summarize_fn=lambda pruned: f"{len(pruned)} older messages",
            inject_summary=True,
        )
    )


@pytest.mark.parametrize("approach", ["middleware", "pre_model_hook"])
def test_an_injected_summary_reaches_the_model_and_the_state(approach: str, kit: Any) -> None:
    reducer = summarising_reducer()
    model = Scripted.model(kit, 12)
    if approach == "middleware":
        agent = create_agent(
            model, [], middleware=[ReducingMiddleware(reducer)], checkpointer=InMemorySaver()
        )
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
            hook = reducing_pre_model_hook(reducer)
            agent = create_react_agent(model, [], pre_model_hook=hook, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for turn in range(12):
        agent.invoke({"messages": [kit.human(turn)]}, config)
    final = agent.get_state(config).values["messages"]
    assert final[0].content.startswith("Summary of the ")
    assert len(final) <= 8 + 1  # bounded before the model call, then its answer
    assert any(c[0].content.startswith("Summary of the ") for c in model.contexts)
    assert kit.max_context(model) <= 8


# -- as_langgraph_reducer in a create_agent state (docs/trim.md) ---------------------------------


def _agent_state(merge: Any) -> Any:
    from langchain.agents import AgentState

    return type("State", (AgentState,), {"__annotations__": {
        "messages": Annotated[list[Any], merge]
    }})


@pytest.mark.parametrize("form", ["as_langgraph_reducer", "reducing_add_messages"])
def test_a_create_agent_state_with_every_kind_of_update(form: str) -> None:
    """Standard tuple input, ReducingMiddleware's RemoveMessages and LangChain's
    SummarizationMiddleware (RemoveMessage(REMOVE_ALL_MESSAGES) + a summary) together."""
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=12,
                                                  preserve_first=False))
    merge = reducer.as_langgraph_reducer() if form == "as_langgraph_reducer" else (
        reducing_add_messages(reducer))
    small = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8,
                                                preserve_first=False))
    answers = GenericFakeChatModel(messages=iter(AIMessage(f"answer {i}") for i in range(100)))
    summaries = GenericFakeChatModel(messages=iter(AIMessage(f"summary {i}") for i in range(100)))
    agent = create_agent(
        answers, tools=[], state_schema=_agent_state(merge), checkpointer=InMemorySaver(),
        middleware=[SummarizationMiddleware(summaries, trigger=("messages", 6),
                                            keep=("messages", 2)),
                    ReducingMiddleware(small)],
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(12):
        result = agent.invoke({"messages": [("user", f"question {turn}")]}, config)
        stored = result["messages"]
        assert not any(isinstance(m, (RemoveMessage, tuple)) for m in stored)
        assert all(isinstance(m, (HumanMessage, AIMessage)) for m in stored)
        assert len(stored) <= 12
    assert stored[-2].content == "question 11" and stored[-1].content.startswith("answer")


def test_as_langgraph_reducer_merges_only_what_needs_add_messages() -> None:
    fn = MessageReducer(min_messages=2, max_messages=3, config=None).as_langgraph_reducer()
    state = fn([], ("user", "hi"))
    assert [(type(m).__name__, m.content) for m in state] == [("HumanMessage", "hi")]
    state = fn(state, [AIMessage("a", id="a1"), HumanMessage("b", id="b1")])
    assert ids(fn(state, RemoveMessage(id="a1")))[1:] == ["b1"]
    replaced = fn(state, HumanMessage("B", id="b1"))
    assert [m.content for m in replaced] == ["hi", "a", "B"]
    # Plain dicts are still concatenated as they are, never converted.
    one = {"role": "user", "content": "x"}
    assert fn([one], [one]) == [one, one]
    with pytest.raises(ValueError, match="doesn't exist"):
        fn(state, RemoveMessage(id="never"))


def test_a_refused_merge_leaves_no_comparison_for_the_next_reduce() -> None:
    """A merge whose reduce is refused (an async summariser called through the sync
    channel) must not hand its comparison of ``left`` on: the next reduce of the same
    list, edited in place since, compares it again and sees the edit."""
    import asyncio

    async def summarize(pruned: list[Any]) -> str:
        return f"{len(pruned)} messages"

    config = ReducerConfig(
        max_tokens=100, target_tokens=60, token_counter="approximate", summarize_fn=summarize
    )
    reducer = MessageReducer(config=config)
    history = [
        HumanMessage(content=f"q{i}", id=f"u{i}") if i % 2 == 0
        else AIMessage(content=f"a{i}", id=f"a{i}")
        for i in range(6)
    ]
    left = asyncio.run(reducer.areduce(history, [])).surviving
    with pytest.raises(TypeError, match="areduce"):
        reducing_add_messages(reducer)(left, [HumanMessage(content="next", id="n1")])
    left[1].content = "y " * 2000  # edited in place: about 1,000 tokens over the budget
    new = [HumanMessage(content="next", id="n2")]
    got = asyncio.run(reducer.areduce(left, new))
    fresh = asyncio.run(
        MessageReducer(config=config).areduce([m.model_copy() for m in left], new)
    )
    assert fresh.pruned
    assert got.pruned == fresh.pruned and got.surviving == fresh.surviving
