"""store_hook against real LangGraph stores: InMemory, SQLite, PostgreSQL, sync and async."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from agentstate_reducer import Background, MessageReducer, ReducerConfig
from agentstate_reducer.langgraph import store_hook


def conversation() -> list[Any]:
    return [
        SystemMessage(content="sys", id="sys"),
        HumanMessage(content="weather in Oslo?", id="h0"),
        AIMessage(
            content="",
            id="a0",
            tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c0"}],
        ),
        ToolMessage(content="rain", tool_call_id="c0", name="weather", id="t0"),
        AIMessage(content="It rains.", id="a1"),
        HumanMessage(content="thanks", id="h1"),
        AIMessage(content="welcome", id="a2"),
    ]


def reducer_for(store: BaseStore, **options: Any) -> MessageReducer:
    return MessageReducer(
        config=ReducerConfig(
            min_messages=2, max_messages=4, on_prune=[store_hook(store, **options)]
        )
    )


def values(store: BaseStore, namespace: tuple[str, ...]) -> dict[str, Any]:
    return {item.key: item.value for item in store.search(namespace, limit=100)}


def test_each_pruned_message_is_stored_by_id_with_role_text_calls_and_time() -> None:
    store = InMemoryStore()
    result = reducer_for(store).reduce(conversation(), namespace=("memories", "alice"))
    assert [m.id for m in result.pruned] == ["h0", "a0", "t0", "a1"]
    stored = values(store, ("memories", "alice"))
    assert sorted(stored) == ["a0", "a1", "h0", "t0"]
    assert stored["h0"]["role"] == "human"
    assert stored["h0"]["content"] == "weather in Oslo?"
    assert stored["a0"]["tool_calls"] == [{"name": "weather", "arguments": '{"city":"Oslo"}'}]
    assert stored["t0"] == {
        **stored["t0"],
        "role": "tool",
        "content": "rain",
        "tool_call_id": "c0",
        "name": "weather",
    }
    assert datetime.fromisoformat(stored["a1"]["pruned_at"]).tzinfo is not None
    assert store.list_namespaces() == [("memories", "alice")]


def test_a_string_namespace_is_one_label_and_none_uses_the_default() -> None:
    store = InMemoryStore()
    hook = store_hook(store, default_namespace="inbox")
    hook([HumanMessage(content="a", id="x")], "alice")
    hook([HumanMessage(content="b", id="y")], None)
    assert sorted(store.list_namespaces()) == [("alice",), ("inbox",)]
    plain = InMemoryStore()
    store_hook(plain)([HumanMessage(content="c", id="z")], None)
    assert plain.list_namespaces() == [("memories",)]


def test_a_redelivery_overwrites_instead_of_duplicating() -> None:
    store = InMemoryStore()
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2, max_messages=4, dedupe_on_prune=False, on_prune=[store_hook(store)]
        )
    )
    reducer.reduce(conversation(), namespace="ns")
    first = values(store, ("ns",))
    reducer.reduce(conversation(), namespace="ns")
    again = values(store, ("ns",))
    assert sorted(again) == sorted(first) == ["a0", "a1", "h0", "t0"]


def test_id_less_messages_are_keyed_by_what_they_say() -> None:
    store = InMemoryStore()
    hook = store_hook(store)
    said = {"role": "user", "content": "hello"}
    hook([said, dict(said)], "ns")
    hook([{"role": "user", "content": "bye"}], "ns")
    keys = sorted(values(store, ("ns",)))
    assert len(keys) == 2
    assert all(k.startswith("sha256-") for k in keys)


def test_the_index_option_reaches_each_put() -> None:
    hook = store_hook(InMemoryStore(), index=False)
    (op,) = hook.ops([HumanMessage(content="a", id="x")], "ns")
    assert (op.namespace, op.key, op.index) == (("ns",), "x", False)
    assert hook.ops([], "ns") == []


@pytest.mark.parametrize(
    "namespace", [("ns", 3), (), "", ("ns", ""), 42], ids=["int", "empty", "blank", "part", "num"]
)
def test_a_bad_namespace_is_named(namespace: Any) -> None:
    hook = store_hook(InMemoryStore())
    with pytest.raises(ValueError) as caught:
        hook([HumanMessage(content="a", id="x")], namespace)
    assert str(caught.value).startswith("namespace must be a non-empty string")
    assert str(caught.value).endswith(f"got {namespace!r}")


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="store must be a LangGraph BaseStore, got 'x'"):
        store_hook("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="default_namespace must be"):
        store_hook(InMemoryStore(), default_namespace=())


@contextmanager
def sqlite_store() -> Iterator[SqliteStore]:
    with SqliteStore.from_conn_string(":memory:") as store:
        store.setup()
        yield store


def test_sqlite_store() -> None:
    with sqlite_store() as store:
        reducer_for(store).reduce(conversation(), namespace=("memories", "alice"))
        assert sorted(values(store, ("memories", "alice"))) == ["a0", "a1", "h0", "t0"]


@asynccontextmanager
async def async_sqlite_store() -> AsyncIterator[AsyncSqliteStore]:
    async with AsyncSqliteStore.from_conn_string(":memory:") as store:
        await store.setup()
        yield store


async def test_an_async_store_is_awaited_by_areduce_on_its_loop() -> None:
    async with async_sqlite_store() as store:
        await reducer_for(store).areduce(conversation(), namespace="alice")
        found = await store.asearch(("alice",), limit=100)
        assert sorted(i.key for i in found) == ["a0", "a1", "h0", "t0"]


async def test_reduce_on_the_async_stores_loop_points_to_areduce() -> None:
    async with async_sqlite_store() as store:
        with pytest.raises(TypeError, match="areduce"):
            reducer_for(store).reduce(conversation(), namespace="alice")


async def test_reduce_off_the_loop_writes_to_an_async_store_synchronously() -> None:
    async with async_sqlite_store() as store:
        reducer = reducer_for(store)
        await asyncio.to_thread(reducer.reduce, conversation(), None, "alice")
        found = await store.asearch(("alice",), limit=100)
        assert sorted(i.key for i in found) == ["a0", "a1", "h0", "t0"]


async def test_background_moves_async_store_writes_off_the_loop() -> None:
    async with async_sqlite_store() as store:
        with Background(store_hook(store)) as hook:
            reducer = MessageReducer(
                config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[hook])
            )
            reducer.reduce(conversation(), namespace="alice")  # sync, on the loop
            await asyncio.to_thread(hook.join)
        assert hook.failed == 0
        found = await store.asearch(("alice",), limit=100)
        assert sorted(i.key for i in found) == ["a0", "a1", "h0", "t0"]


def test_postgres_store(postgres: dict[str, Any]) -> None:
    from langgraph.store.postgres import PostgresStore
    from psycopg import Connection

    with Connection.connect(**postgres) as conn:
        store = PostgresStore(conn)
        store.setup()
        reducer_for(store).reduce(conversation(), namespace=("memories", "alice"))
        stored = values(store, ("memories", "alice"))
        assert sorted(stored) == ["a0", "a1", "h0", "t0"]
        assert stored["a0"]["tool_calls"][0]["name"] == "weather"


async def test_async_postgres_store(postgres: dict[str, Any]) -> None:
    from langgraph.store.postgres.aio import AsyncPostgresStore
    from psycopg import AsyncConnection

    async with await AsyncConnection.connect(**postgres) as conn:
        store = AsyncPostgresStore(conn)
        await store.setup()
        await reducer_for(store).areduce(conversation(), namespace="alice")
        found = await store.asearch(("alice",), limit=100)
        assert sorted(i.key for i in found) == ["a0", "a1", "h0", "t0"]
