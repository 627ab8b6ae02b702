"""Context editing in real agents: the edited history is persisted, originals go to the
store once, an agent reads an offloaded result back, and long runs stay within budget
without a redundant tool call."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Annotated, Any

import pytest
from integration_kit import AgentModel
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph, add_messages
from langgraph.store.memory import InMemoryStore
from typing_extensions import TypedDict

from agentstate_reducer import (
    ClearToolResults,
    MessageReducer,
    Offload,
    ReducerConfig,
    agent_config,
)
from agentstate_reducer.edit import is_edited
from agentstate_reducer.langgraph import (
    ReducingMiddleware,
    ReducingSaver,
    afetch_original,
    fetch_original,
    recall_tool,
    reducing_add_messages,
    store_hook,
)
from agentstate_reducer.outbox import OutboxHook, Relay, SQLiteOutbox
from agentstate_reducer.tokens import approximate_text_tokens
from agentstate_reducer.validate import PROVIDERS


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]



def text_of(tokens: int, tag: str) -> str:
    """Text of about ``tokens`` tokens (the heuristic's count), distinct per ``tag``."""
    words = [f"{tag}-{i} lorem ipsum" for i in range(tokens)]
    low, high = 1, len(words)
    while low < high:
        mid = (low + high + 1) // 2
        if approximate_text_tokens(" ".join(words[:mid])) <= tokens:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low])


def request_tokens(reducer: MessageReducer, context: list[Any]) -> int:
    return sum(reducer.count_tokens([m for m in context if not isinstance(m, SystemMessage)]))


def tool_results(model: Any, name: str) -> list[str]:
    """Contents of every result of tool ``name`` the model ever saw."""
    seen: dict[str, str] = {}
    for context in model.contexts:
        names = {
            c["id"]: c["name"] for m in context if isinstance(m, AIMessage) for c in m.tool_calls
        }
        for m in context:
            if isinstance(m, ToolMessage) and names.get(m.tool_call_id) == name:
                seen.setdefault(m.tool_call_id, str(m.content))
    return list(seen.values())


def edited_reducer(store: Any, deliveries: Any, **options: Any) -> MessageReducer:
    """The agent recipe (:func:`agent_config`: requests valid for every provider) with
    the given options, its originals going to ``store`` and counted by ``deliveries``."""
    options.setdefault("token_counter", "approximate")
    options.setdefault("preserve_first", False)
    return MessageReducer(config=agent_config(on_prune=[store_hook(store), deliveries], **options))


# -- persistence ---------------------------------------------------------------------------


def _history(turns: int) -> list[Any]:
    out: list[Any] = []
    for t in range(turns):
        out += [
            HumanMessage(f"turn {t}: look", id=f"h{t}"),
            AIMessage("", tool_calls=[{"id": f"c{t}", "name": "lookup", "args": {}}], id=f"a{t}"),
            ToolMessage(text_of(300, f"r{t}"), tool_call_id=f"c{t}", id=f"t{t}"),
            AIMessage(f"answer {t}", id=f"b{t}"),
        ]
    return out


def test_reducing_add_messages_keeps_the_edited_copies(kit: Any) -> None:
    deliveries = kit.deliveries()
    store = InMemoryStore()
    reducer = edited_reducer(
        store, deliveries, max_tokens=900, context_edits=[ClearToolResults(keep=1)]
    )
    merge = reducing_add_messages(reducer, namespace="alice")
    state = merge([], _history(3))
    assert [m.id for m in state] == [m.id for m in _history(3)]
    assert [is_edited(m.content) for m in state if isinstance(m, ToolMessage)] == [
        True,
        True,
        False,
    ]
    again = merge(state, [])
    assert again == state  # nothing new: the edited history is stable
    stored = {item.key: item.value for item in store.search(("alice",))}
    assert len(stored) == 2 and all(v["edited"]["edit"] == "cleared" for v in stored.values())
    assert max(deliveries.counts.values()) == 1


def test_reducing_saver_stores_the_edited_history(kit: Any) -> None:
    deliveries = kit.deliveries()
    store = InMemoryStore()
    reducer = edited_reducer(
        store, deliveries, max_tokens=900, context_edits=[ClearToolResults(keep=1)]
    )
    builder = StateGraph(State)
    builder.add_node("noop", lambda s: {"messages": []})
    builder.add_edge(START, "noop")
    graph = builder.compile(checkpointer=ReducingSaver(InMemorySaver(), reducer))
    config = {"configurable": {"thread_id": "t-saver"}}
    graph.invoke({"messages": _history(3)}, config)
    saved = graph.get_state(config).values["messages"]
    assert [m.id for m in saved] == [m.id for m in _history(3)]
    assert sum(is_edited(m.content) for m in saved if isinstance(m, ToolMessage)) == 2
    keys = {item.key for item in store.search(("memories", "t-saver"))}
    assert keys == {d for d in deliveries.counts}
    assert max(deliveries.counts.values()) == 1  # each checkpoint write saw the originals


def test_middleware_replaces_edited_messages_by_id(kit: Any) -> None:
    deliveries = kit.deliveries()
    store = InMemoryStore()
    reducer = edited_reducer(
        store, deliveries, max_tokens=1_500, context_edits=[ClearToolResults(keep=1)]
    )
    big = {f"q{t}": text_of(400, f"r{t}") for t in range(4)}

    @tool
    def lookup(query: str) -> str:
        """Look a query up."""
        return big[query]

    plans = [[("lookup", {"query": f"q{t}"})] for t in range(4)]
    model = AgentModel(plans=plans)
    agent = create_agent(
        model, [lookup], middleware=[ReducingMiddleware(reducer)], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t-mw"}}
    for t in range(4):
        agent.invoke({"messages": [HumanMessage(f"turn {t}: look", id=f"h{t}")]}, config)
    state = agent.get_state(config).values["messages"]
    results = [m for m in state if isinstance(m, ToolMessage)]
    assert any(is_edited(m.content) for m in results)
    assert len({m.id for m in state}) == len(state)  # replaced in place, never appended twice
    assert all(request_tokens(reducer, c) <= 1_500 for c in model.contexts)
    assert max(model.calls.values()) == 1
    assert model.check.requests == len(model.contexts) and not model.check.invalid


# -- the way back ---------------------------------------------------------------------------


def test_fetch_original_and_the_recall_tool_read_an_offloaded_result(kit: Any) -> None:
    deliveries = kit.deliveries()
    store = InMemoryStore()
    reducer = edited_reducer(store, deliveries, max_tokens=100_000,
                             context_edits=[Offload(above=500, head=50, tail=20)])
    payload = text_of(2_000, "payload")
    history = [
        HumanMessage("turn 0: fetch", id="h"),
        AIMessage("", tool_calls=[{"id": "c", "name": "fetch", "args": {}}], id="a"),
        ToolMessage(payload, tool_call_id="c", id="t"),
    ]
    result = reducer.reduce(history, namespace=("memories", "bob"))
    (edit,) = result.edited
    assert edit.handle in result.surviving[2].content
    assert fetch_original(store, edit.handle, namespace=("memories", "bob")) == payload
    assert fetch_original(store, edit.handle) is None  # another namespace
    assert fetch_original(store_hook(store), edit.handle, namespace=("memories", "bob")) == payload
    assert asyncio.run(afetch_original(store, edit.handle, namespace=("memories", "bob"))) == (
        payload
    )
    read = recall_tool(store, namespace=("memories", "bob"), page_chars=1_000)
    first = read.invoke({"handle": edit.handle})
    assert first.startswith(f"[{edit.handle}: characters 0-1000 of {len(payload)}; ")
    assert first.endswith(payload[:1000])
    last = read.invoke({"handle": edit.handle, "offset": len(payload) - 10})
    assert last.endswith(payload[-10:]) and "for more" not in last
    assert "Nothing is stored" in read.invoke({"handle": "ctx_0000000000000000"})
    with pytest.raises(TypeError, match="handle"):
        fetch_original(store, "")
    with pytest.raises(ValueError, match="page_chars"):
        recall_tool(store, page_chars=0)


def test_the_way_back_from_the_outbox_before_and_after_the_relay(tmp_path: Any) -> None:
    """With an outbox between the reducer and the store, an original is read back from
    the outbox while it is pending, from the store the relay delivers to once it is
    delivered, and from either through ``[store, outbox]``, also after a purge."""
    store = InMemoryStore()
    outbox = SQLiteOutbox(tmp_path / "outbox.db")
    reducer = MessageReducer(
        config=ReducerConfig(
            max_tokens=100_000,
            token_counter="approximate",
            context_edits=[Offload(above=500, head=50, tail=20)],
            on_prune=[OutboxHook(outbox)],
        )
    )
    payload = text_of(2_000, "payload")
    history = [
        HumanMessage("turn 0: fetch", id="h"),
        AIMessage("", tool_calls=[{"id": "c", "name": "fetch", "args": {}}], id="a"),
        ToolMessage(payload, tool_call_id="c", id="t"),
    ]
    ns = ("memories", "bob")
    (edit,) = reducer.reduce(history, namespace=ns).edited
    handle = edit.handle
    assert fetch_original(store, handle, namespace=ns) is None  # not delivered yet
    assert fetch_original(outbox, handle, namespace=ns) == payload
    assert fetch_original(outbox, handle) is None  # another namespace
    read = recall_tool([store, outbox], namespace=ns, page_chars=1_000)
    assert read.invoke({"handle": handle}).endswith(payload[:1_000])
    assert asyncio.run(read.ainvoke({"handle": handle})).endswith(payload[:1_000])
    # The relay delivers into the store that fetch_original and the tool read.
    assert Relay(outbox, store_hook(store)).run_once().delivered == 1
    assert fetch_original(store, handle, namespace=ns) == payload
    time.sleep(0.05)
    assert outbox.purge(0) == 1
    assert fetch_original(outbox, handle, namespace=ns) is None
    assert fetch_original([outbox, store], handle, namespace=ns) == payload
    assert asyncio.run(afetch_original([outbox, store], handle, namespace=ns)) == payload
    with pytest.raises(TypeError, match="an Outbox or a non-empty list"):
        fetch_original([], handle)
    with pytest.raises(TypeError, match="an Outbox or a non-empty list"):
        recall_tool([store, "x"])  # type: ignore[list-item]
    outbox.close()


# -- scenarios --------------------------------------------------------------------------------


def report(name: str, model: AgentModel, sizes: list[int], budget: int) -> None:
    print(
        f"\n{name}: {model.check.requests} requests checked for {', '.join(PROVIDERS)}, "
        f"invalid: {dict(model.check.invalid) or 0}, largest {max(sizes)} tokens (budget "
        f"{budget}), tool calls {sum(model.calls.values())}, repeated "
        f"{sum(n - 1 for n in model.calls.values())}"
    )


@pytest.mark.slow
def test_forty_turns_with_one_oversized_result_on_a_small_budget(kit: Any) -> None:
    turns, budget, oversized_turn = 40, 1_500, 5
    deliveries = kit.deliveries()
    store = InMemoryStore()
    reducer = edited_reducer(
        store,
        deliveries,
        max_tokens=budget,
        target_tokens=1_000,
        context_edits=[ClearToolResults(keep=2), Offload(above=800, head=100, tail=50)],
    )
    big = text_of(3_500, "big")
    results = {f"q{t}": text_of(120, f"r{t}") for t in range(turns)}
    results[f"q{oversized_turn}"] = big

    @tool
    def lookup(query: str) -> str:
        """Look a query up."""
        return results[query]

    read_original = recall_tool(store, reducer=reducer, page_chars=2_000)
    plans = [[("lookup", {"query": f"q{t}"})] for t in range(turns)]
    model = AgentModel(plans=plans, recall=read_original.name)
    agent = create_agent(
        model,
        [lookup, read_original],
        system_prompt="Answer with the lookup tool.",
        middleware=[ReducingMiddleware(reducer)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t-40"}}
    for t in range(turns):
        agent.invoke({"messages": [HumanMessage(f"turn {t}: look it up", id=f"h{t}")]}, config)
        assert agent.get_state(config).values["messages"][-1].id == f"answer-{t}"
    sizes = [request_tokens(reducer, c) for c in model.contexts]
    report("40 turns, one 3,500-token result", model, sizes, budget)
    assert max(sizes) <= budget, max(sizes)
    # Every request, system prompt included, is valid for every provider.
    assert model.check.requests == len(model.contexts) == 2 * turns + 1
    assert not model.check.invalid, model.check.examples
    assert model.lost_question == 0
    # No redundant call: each lookup once, the oversized result read back once.
    assert set(model.calls) == {("lookup", f'{{"query": "q{t}"}}') for t in range(turns)} | {
        (read_original.name, json.dumps({"handle": h}))
        for h in deliveries.counts
        if h.startswith("ctx_") and fetch_original(store, h, namespace=("memories", "t-40")) == big
    }
    assert max(model.calls.values()) == 1
    (page,) = tool_results(model, read_original.name)
    assert page.endswith(big[:2_000])
    handles = [k for k in deliveries.counts if k.startswith("ctx_")]
    assert max(deliveries.counts.values()) == 1
    assert big in {fetch_original(store, h, namespace=("memories", "t-40")) for h in handles}


@pytest.mark.slow
def test_a_sixty_step_autonomous_turn_stays_within_budget(kit: Any) -> None:
    steps, budget = 60, 8_000
    deliveries = kit.deliveries()
    store = InMemoryStore()
    reducer = edited_reducer(
        store, deliveries, max_tokens=budget, context_edits=[ClearToolResults(keep=3)]
    )
    results = {f"s{k}": text_of(1_300, f"step{k}") for k in range(steps)}

    @tool
    def lookup(query: str) -> str:
        """Look a query up."""
        return results[query]

    plans = [[("lookup", {"query": f"s{k}"}) for k in range(steps)]]
    model = AgentModel(plans=plans)
    agent = create_agent(
        model, [lookup], middleware=[ReducingMiddleware(reducer)], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t-60"}, "recursion_limit": 4 * steps}
    agent.invoke({"messages": [HumanMessage("turn 0: work through it all", id="h0")]}, config)
    sizes = [request_tokens(reducer, c) for c in model.contexts]
    report("one 60-step turn of 1,300-token results", model, sizes, budget)
    assert len(sizes) == steps + 1
    assert max(sizes) <= budget, max(sizes)
    assert model.check.requests == steps + 1
    assert not model.check.invalid, model.check.examples
    assert Counter(model.calls.values()) == {1: steps}  # no step was ever repeated
    final = agent.get_state(config).values["messages"]
    assert final[-1].id == "answer-0"
    cleared = [m for m in final if isinstance(m, ToolMessage) and is_edited(m.content)]
    assert len(cleared) >= steps - 3 - 6  # all but the last few were cleared on the way
    assert set(deliveries.counts) == {m.content.split("handle ")[1][:20] for m in cleared}
