"""End to end: 60 turns of a tool-calling agent, bounded at persistence, in the graph,
by middleware and by a pre-model hook; the scripted model checks every context it gets."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import add_messages
from langgraph.prebuilt import create_react_agent
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite.aio import AsyncSqliteStore
from langgraph.warnings import LangGraphDeprecatedSinceV10

from agentstate_reducer.langgraph import (
    ReducingMiddleware,
    ReducingSaver,
    reducing_add_messages,
    reducing_pre_model_hook,
)

TURNS = 60
MAX_MESSAGES = 20
# One turn adds at most: human, ai with two calls, two results (then the answer).
TURN_GROWTH = 4


def turn_input(kit: Any, approach: str, turn: int) -> dict[str, Any]:
    if preserve_first(approach):
        return kit.turn_input(turn)  # type: ignore[no-any-return]
    return {"messages": [kit.human(turn)]}


def react_agent(kit: Any, model: Any, memory: Any, checkpointer: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        return create_react_agent(
            model,
            list(kit.tools),
            prompt=kit.system_prompt,
            pre_model_hook=reducing_pre_model_hook(memory.reducer),
            checkpointer=checkpointer,
        )


def middleware_agent(kit: Any, model: Any, memory: Any, checkpointer: Any) -> Any:
    return create_agent(
        model,
        list(kit.tools),
        system_prompt=kit.system_prompt,
        middleware=[ReducingMiddleware(memory.reducer)],
        checkpointer=checkpointer,
    )


def build(approach: str, kit: Any, model: Any, memory: Any, checkpointer: Any) -> Any:
    if approach == "saver":
        return kit.message_graph(model, add_messages, ReducingSaver(checkpointer, memory.reducer))
    if approach == "in-graph":
        merge = reducing_add_messages(memory.reducer, namespace=kit.namespace)
        return kit.message_graph(model, merge, checkpointer)
    if approach == "middleware":
        return middleware_agent(kit, model, memory, checkpointer)
    return react_agent(kit, model, memory, checkpointer)


def preserve_first(approach: str) -> bool:
    # The custom graph keeps its system message in state; the agents add theirs per call.
    return approach in ("saver", "in-graph")


APPROACHES = ["saver", "in-graph", "middleware", "pre_model_hook"]


def check(
    approach: str, kit: Any, model: Any, memory: Any, items: Any, namespaces: Any, final: Any
) -> None:
    system_ids = {"system"} if preserve_first(approach) else set()
    kit.assert_memory_complete(items, namespaces, memory, model, final, system_ids=system_ids)
    bound = MAX_MESSAGES + (TURN_GROWTH if approach == "saver" else 0)
    assert kit.max_context(model) <= bound
    assert final[-1].id == f"ai-{TURNS - 1}"


@pytest.mark.parametrize("approach", APPROACHES)
def test_sixty_turns_sync(approach: str, kit: Any) -> None:
    store = InMemoryStore()
    memory = kit.memory(store, preserve_first=preserve_first(approach))
    model = kit.model(TURNS)
    graph = build(approach, kit, model, memory, InMemorySaver())
    config = {"configurable": {"thread_id": "t-1", "memory_namespace": kit.namespace}}
    for turn in range(TURNS):
        graph.invoke(turn_input(kit, approach, turn), config)
    final = graph.get_state(config).values["messages"]
    items = store.search(kit.namespace, limit=10_000)
    check(approach, kit, model, memory, items, store.list_namespaces(), final)


@pytest.fixture
async def async_store() -> AsyncIterator[BaseStore]:
    async with AsyncSqliteStore.from_conn_string(":memory:") as store:
        await store.setup()
        yield store


@pytest.mark.slow
@pytest.mark.parametrize("approach", APPROACHES)
async def test_sixty_turns_async_sqlite(
    approach: str, kit: Any, async_store: BaseStore, tmp_path: Any
) -> None:
    # Channel reducers run on the event loop and call hooks synchronously, so the
    # in-graph reducer writes to a sync store; the others await the async store.
    store = InMemoryStore() if approach == "in-graph" else async_store
    memory = kit.memory(store, preserve_first=preserve_first(approach))
    model = kit.model(TURNS)
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver:
        graph = build(approach, kit, model, memory, saver)
        config = {"configurable": {"thread_id": "t-1", "memory_namespace": kit.namespace}}
        for turn in range(TURNS):
            await graph.ainvoke(turn_input(kit, approach, turn), config)
        final = (await graph.aget_state(config)).values["messages"]
    items = await store.asearch(kit.namespace, limit=10_000)
    check(approach, kit, model, memory, items, await store.alist_namespaces(), final)
