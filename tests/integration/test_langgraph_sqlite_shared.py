"""SqliteSaver and SqliteStore on one sqlite3 connection under ReducingSaver(keep_checkpoints=10):
threads (and tasks, for the async pair) running turns at once never nest transactions.

Each saver and each store has a lock of its own, but a transaction belongs to the
connection: before ReducingSaver gave the pair one lock, a store write's BEGIN landed
inside a checkpoint's open transaction ("cannot start a transaction within a
transaction"), as a logged hook failure or an error out of invoke().
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from agentstate_reducer import Background, MessageReducer, ReducerConfig
from agentstate_reducer.langgraph import ReducingSaver, store_hook

pytestmark = pytest.mark.slow

THREADS = 5
TURNS = 25


def _reply(state: dict[str, Any]) -> dict[str, Any]:
    question = state["messages"][-1]
    return {"messages": [AIMessage(f"answer to {question.content}", id=f"{question.id}-a")]}


async def _areply(state: dict[str, Any]) -> dict[str, Any]:
    return _reply(state)


def _graph(node: Any, checkpointer: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", node)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=checkpointer)


def _question(thread: int, turn: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"question {turn}", id=f"t{thread}-{turn}")]}


def _config(thread: int) -> Any:
    return {"configurable": {"thread_id": f"t{thread}"}}


def _every_id(thread: int) -> set[str]:
    return {f"t{thread}-{turn}{end}" for turn in range(TURNS) for end in ("", "-a")}


def _stored(conn: sqlite3.Connection, thread: int) -> set[str]:
    rows = conn.execute("SELECT key FROM store WHERE prefix = ?", (f"memories.t{thread}",))
    return {key for (key,) in rows}


def _reducer(hook: Any) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(min_messages=2, max_messages=6, on_prune=[hook]))


def _hook_failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "on_prune" in r.getMessage()]


@pytest.mark.parametrize(
    ("isolation", "background"),
    [(None, False), ("", True)],
    ids=["autocommit-inline", "legacy-background"],
)
def test_threads_share_one_connection(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, isolation: str | None, background: bool
) -> None:
    # isolation_level=None is how SqliteStore.from_conn_string opens its connection;
    # Python's default ("") is what SqliteSaver.from_conn_string uses.
    conn = sqlite3.connect(
        tmp_path / "app.sqlite", check_same_thread=False, isolation_level=isolation
    )
    try:
        saver, store = SqliteSaver(conn), SqliteStore(conn)
        # SqliteStore.setup() leaves a transaction open on a connection in Python's
        # default mode; SqliteSaver.setup() commits it.
        store.setup()
        saver.setup()
        hook: Any = store_hook(store)
        if background:
            hook = Background(hook, workers=2)
        checkpointer = ReducingSaver(saver, _reducer(hook), keep_checkpoints=10)
        assert store.lock is saver.lock  # one lock for the connection's two users
        graph = _graph(_reply, checkpointer)
        errors: list[BaseException] = []

        def run(thread: int) -> None:
            try:
                for turn in range(TURNS):
                    graph.invoke(_question(thread, turn), _config(thread))
            except BaseException as exc:  # reported below
                errors.append(exc)

        with caplog.at_level(logging.ERROR, logger="agentstate_reducer"):
            workers = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            if background:
                hook.close(wait=True, timeout=30)
        assert errors == []
        assert _hook_failures(caplog) == []
        for thread in range(THREADS):
            kept = {m.id for m in graph.get_state(_config(thread)).values["messages"]}
            assert len(kept) <= 6
            # Every message left the state into the store, and nothing else is there.
            assert _stored(conn, thread) == _every_id(thread) - kept
            rows = conn.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (f"t{thread}",)
            ).fetchone()[0]
            assert rows == 10
    finally:
        conn.close()


async def test_tasks_share_one_async_connection(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import aiosqlite

    conn = await aiosqlite.connect(tmp_path / "app.sqlite")
    try:
        saver, store = AsyncSqliteSaver(conn), AsyncSqliteStore(conn)
        await saver.setup()
        await store.setup()
        checkpointer = ReducingSaver(saver, _reducer(store_hook(store)), keep_checkpoints=10)
        assert store.lock is saver.lock
        graph = _graph(_areply, checkpointer)

        async def run(thread: int) -> None:
            for turn in range(TURNS):
                await graph.ainvoke(_question(thread, turn), _config(thread))

        with caplog.at_level(logging.ERROR, logger="agentstate_reducer"):
            await asyncio.gather(*(run(t) for t in range(THREADS)))
        assert _hook_failures(caplog) == []
        for thread in range(THREADS):
            state = await graph.aget_state(_config(thread))
            kept = {m.id for m in state.values["messages"]}
            async with conn.execute(
                "SELECT key FROM store WHERE prefix = ?", (f"memories.t{thread}",)
            ) as cur:
                stored = {key for (key,) in await cur.fetchall()}
            assert stored == _every_id(thread) - kept
    finally:
        await conn.close()


def test_only_a_store_on_the_same_connection_is_joined(tmp_path: Path) -> None:
    one = sqlite3.connect(tmp_path / "one.sqlite", check_same_thread=False)
    other = sqlite3.connect(tmp_path / "other.sqlite", check_same_thread=False)
    try:
        saver, far, near = SqliteSaver(one), SqliteStore(other), SqliteStore(one)
        near.setup()
        saver.setup()
        far_lock = far.lock
        reducer = MessageReducer(
            config=ReducerConfig(on_prune=[store_hook(far), store_hook(near)])
        )
        ReducingSaver(saver, reducer)
        assert far.lock is far_lock and near.lock is saver.lock
        # A second saver on the connection joins the lock the first pair holds.
        second = SqliteSaver(one)
        ReducingSaver(second, MessageReducer(config=ReducerConfig(on_prune=[store_hook(near)])))
        assert second.lock is saver.lock is near.lock
        # Reentrant: a thread iterating the saver may write to the store meanwhile.
        with saver.lock:
            near.put(("memories",), "k", {"v": 1})
        assert near.get(("memories",), "k") is not None
    finally:
        one.close()
        other.close()
