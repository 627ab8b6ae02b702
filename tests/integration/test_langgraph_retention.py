"""ReducingSaver(keep_checkpoints=K): only the K newest checkpoints of a thread stay, with
their writes and blobs, on every saver it supports; the graph cannot tell the difference.

One contract, run against InMemorySaver, SqliteSaver, AsyncSqliteSaver, PostgresSaver and
AsyncPostgresSaver (the PostgreSQL ones skip without a server).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from agentstate_reducer import ConfigError, ConfigTypeError, MessageReducer, ReducerConfig
from agentstate_reducer.langgraph import ReducingSaver, ThreadTTL

TURNS = 8


@dataclass
class Backend:
    """A saver, whether its graph runs under ``ainvoke``, and its rows for a thread."""

    saver: BaseCheckpointSaver[Any]
    is_async: bool
    #: ``thread_id -> {"checkpoints": n, "writes": n, "blobs": n}``.
    rows: Callable[[str], Any]


def _memory_rows(saver: InMemorySaver) -> Callable[[str], Any]:
    async def rows(thread_id: str) -> dict[str, int]:
        return {
            "checkpoints": sum(len(ns) for ns in saver.storage.get(thread_id, {}).values()),
            "writes": sum(len(w) for k, w in saver.writes.items() if k[0] == thread_id),
            "blobs": sum(1 for k in saver.blobs if k[0] == thread_id),
            "namespaces": len(saver.storage.get(thread_id, {})),
        }

    return rows


def _sqlite_rows(conn: sqlite3.Connection) -> Callable[[str], Any]:
    async def rows(thread_id: str) -> dict[str, int]:
        one = "SELECT COUNT(*) FROM {} WHERE thread_id = ?"
        return {
            "checkpoints": conn.execute(one.format("checkpoints"), (thread_id,)).fetchone()[0],
            "writes": conn.execute(one.format("writes"), (thread_id,)).fetchone()[0],
            "blobs": 0,
            "namespaces": conn.execute(
                "SELECT COUNT(DISTINCT checkpoint_ns) FROM checkpoints WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()[0],
        }

    return rows


def _postgres_rows(conninfo: dict[str, Any]) -> Callable[[str], Any]:
    import psycopg

    async def rows(thread_id: str) -> dict[str, int]:
        with psycopg.connect(**conninfo) as conn:
            def count(table: str) -> int:
                row = conn.execute(
                    f"SELECT COUNT(*) AS n FROM {table} WHERE thread_id = %s", (thread_id,)
                ).fetchone()
                return int(row["n"])

            namespaces = conn.execute(
                "SELECT COUNT(DISTINCT checkpoint_ns) AS n FROM checkpoints WHERE thread_id = %s",
                (thread_id,),
            ).fetchone()
            return {"checkpoints": count("checkpoints"), "writes": count("checkpoint_writes"),
                    "blobs": count("checkpoint_blobs"), "namespaces": int(namespaces["n"])}

    return rows


@asynccontextmanager
async def memory(request: Any) -> AsyncIterator[Backend]:
    saver = InMemorySaver()
    yield Backend(saver, False, _memory_rows(saver))


@asynccontextmanager
async def sqlite(request: Any) -> AsyncIterator[Backend]:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        yield Backend(saver, False, _sqlite_rows(conn))
    finally:
        conn.close()


@asynccontextmanager
async def async_sqlite(request: Any, tmp_path: Any) -> AsyncIterator[Backend]:
    path = str(tmp_path / "checkpoints.sqlite")
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        await saver.setup()
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            yield Backend(saver, True, _sqlite_rows(conn))
        finally:
            conn.close()


@asynccontextmanager
async def postgres(request: Any) -> AsyncIterator[Backend]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection

    conninfo = request.getfixturevalue("postgres")
    with Connection.connect(**conninfo) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        yield Backend(saver, False, _postgres_rows(conninfo))


@asynccontextmanager
async def async_postgres(request: Any) -> AsyncIterator[Backend]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection

    conninfo = request.getfixturevalue("postgres")
    async with await AsyncConnection.connect(**conninfo) as conn:
        saver = AsyncPostgresSaver(conn)
        await saver.setup()
        yield Backend(saver, True, _postgres_rows(conninfo))


# The server-backed savers run in the slow lane (each case takes seconds); the fast lane
# keeps the in-process ones.
BACKENDS = [
    "memory",
    "sqlite",
    "async_sqlite",
    pytest.param("postgres", marks=pytest.mark.slow),
    pytest.param("async_postgres", marks=pytest.mark.slow),
]


@pytest.fixture(params=BACKENDS)
def backend_factory(
    request: pytest.FixtureRequest, tmp_path: Any
) -> Callable[[], AbstractAsyncContextManager[Backend]]:
    name = request.param
    if name == "memory":
        return lambda: memory(request)
    if name == "sqlite":
        return lambda: sqlite(request)
    if name == "async_sqlite":
        return lambda: async_sqlite(request, tmp_path)
    if name == "postgres":
        return lambda: postgres(request)
    return lambda: async_postgres(request)


async def run(graph: Any, backend: Backend, payload: Any, config: Any) -> Any:
    if backend.is_async:
        return await graph.ainvoke(payload, config)
    return await asyncio.to_thread(graph.invoke, payload, config)


async def history(graph: Any, backend: Backend, config: Any) -> list[Any]:
    if backend.is_async:
        return [s async for s in graph.aget_state_history(config)]
    return await asyncio.to_thread(lambda: list(graph.get_state_history(config)))


def assert_bounded(last: dict[str, int], before: dict[str, int]) -> None:
    """``last`` holds no more rows than ``before``, a few turns earlier."""
    assert {k: v for k, v in last.items() if k != "writes"} == {
        k: v for k, v in before.items() if k != "writes"
    }
    # A step's writes are saved in the background and can land after the next checkpoint's
    # retention pass; the pass after that removes them.
    assert last["writes"] <= before["writes"] + 3


def reducer() -> MessageReducer:
    return MessageReducer(config=ReducerConfig(min_messages=6, max_messages=10))


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


@pytest.mark.parametrize("keep", [1, 3])
async def test_only_the_newest_checkpoints_stay_and_the_graph_sees_no_difference(
    backend_factory: Any, kit: Any, keep: int
) -> None:
    async with backend_factory() as backend:
        kept = ReducingSaver(backend.saver, reducer(), keep_checkpoints=keep)
        every = ReducingSaver(backend.saver, reducer())
        graphs = {
            "kept": kit.message_graph(kit.model(TURNS), add_messages, kept),
            "every": kit.message_graph(kit.model(TURNS), add_messages, every),
        }
        rows_at: dict[str, list[dict[str, int]]] = {"kept": [], "every": []}
        for turn in range(TURNS):
            for name, graph in graphs.items():
                result = await run(graph, backend, kit.turn_input(turn), config(name))
                rows_at[name].append(await backend.rows(name))
                kit.assert_tool_pairs(result["messages"][1:])
        states = {name: await history(g, backend, config(name)) for name, g in graphs.items()}
        # The same conversation either way: retention deletes only what nobody reads.
        assert [m.content for m in states["kept"][0].values["messages"]] == [
            m.content for m in states["every"][0].values["messages"]
        ]
        assert len(states["kept"]) == keep
        steps = {name: [s.metadata["step"] for s in found] for name, found in states.items()}
        assert steps["kept"] == steps["every"][:keep]
        assert states["kept"][-1].parent_config is None
        last = rows_at["kept"][-1]
        assert last["checkpoints"] == keep
        # Bounded: the rows stop growing once the window and retention are in place.
        assert_bounded(rows_at["kept"][-1], rows_at["kept"][-4])
        assert rows_at["every"][-1]["checkpoints"] > rows_at["every"][-4]["checkpoints"]
        if rows_at["every"][-1]["blobs"]:
            assert last["blobs"] < rows_at["every"][-1]["blobs"] / 4


async def test_a_fork_from_a_kept_checkpoint_runs_and_history_shows_the_kept_ones(
    backend_factory: Any, kit: Any
) -> None:
    async with backend_factory() as backend:
        saver = ReducingSaver(backend.saver, reducer(), keep_checkpoints=4)
        graph = kit.message_graph(kit.model(TURNS + 2), add_messages, saver)
        for turn in range(6):
            await run(graph, backend, kit.turn_input(turn), config("t"))
        snapshots = await history(graph, backend, config("t"))
        # An older kept checkpoint that ended a turn: its next step is a new user turn.
        fork_from = next(s for s in snapshots[1:] if not s.next)
        before = [m.id for m in fork_from.values["messages"]]
        forked = await run(graph, backend, {"messages": [HumanMessage("fork", id="fork")]},
                           fork_from.config)
        assert [m.id for m in forked["messages"]][: len(before)] == before
        assert "fork" in [m.id for m in forked["messages"]]
        after = await history(graph, backend, config("t"))
        assert len(after) == 4
        # The saver stores the reduced list; the run returned its whole in-memory one.
        stored = after[0].values["messages"]
        assert stored == reducer().reduce(forked["messages"]).surviving
        assert stored[-1] == forked["messages"][-1]


async def test_other_threads_are_left_alone(backend_factory: Any, kit: Any) -> None:
    async with backend_factory() as backend:
        plain = kit.message_graph(kit.model(TURNS), add_messages, backend.saver)
        kept = kit.message_graph(
            kit.model(TURNS), add_messages,
            ReducingSaver(backend.saver, reducer(), keep_checkpoints=1),
        )
        for turn in range(3):
            await run(plain, backend, kit.turn_input(turn), config("other"))
        before = await backend.rows("other")
        for turn in range(3):
            await run(kept, backend, kit.turn_input(turn), config("mine"))
        assert await backend.rows("other") == before
        assert (await backend.rows("mine"))["checkpoints"] == 1


# -- subgraph calls ----------------------------------------------------------------------------


def subgraph_graph(checkpointer: Any) -> Any:
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    child = StateGraph(MessagesState)
    child.add_node("look", lambda s: {"messages": [AIMessage("looked " + "x" * 200)]})
    child.add_edge(START, "look")
    parent = StateGraph(MessagesState)
    parent.add_node("child", child.compile())  # checkpoints of its own, per call
    parent.add_node("answer", lambda s: {"messages": [AIMessage("answer")]})
    parent.add_edge(START, "child")
    parent.add_edge("child", "answer")
    return parent.compile(checkpointer=checkpointer)


async def test_namespaces_of_finished_subgraph_calls_go_with_the_root_checkpoints(
    backend_factory: Any
) -> None:
    async with backend_factory() as backend:
        graphs = {
            "kept": subgraph_graph(ReducingSaver(backend.saver, reducer(), keep_checkpoints=3)),
            "every": subgraph_graph(ReducingSaver(backend.saver, reducer())),
        }
        rows: dict[str, list[Any]] = {"kept": [], "every": []}
        results: dict[str, Any] = {}
        for turn in range(6):
            for name, graph in graphs.items():
                results[name] = await run(graph, backend, {"messages": [("user", f"q{turn}")]},
                                          config(name))
                rows[name].append(await backend.rows(name))
        assert rows["every"][-1]["namespaces"] == 1 + 6  # the root and one per call
        assert rows["kept"][-1]["namespaces"] <= 2
        assert_bounded(rows["kept"][-1], rows["kept"][-3])
        state = await history(graphs["kept"], backend, config("kept"))
        stored = state[0].values["messages"]
        assert stored == reducer().reduce(results["kept"]["messages"]).surviving


# -- which savers, and bad values -------------------------------------------------------------


class PruningSaver(BaseCheckpointSaver[Any]):
    """A saver retention knows nothing about, but with LangGraph's prune()."""

    def __init__(self) -> None:
        super().__init__()
        self.memory = InMemorySaver()
        self.pruned: list[tuple[list[str], str]] = []

    def get_tuple(self, config: Any) -> Any:
        return self.memory.get_tuple(config)

    def list(self, *args: Any, **kwargs: Any) -> Any:
        return self.memory.list(*args, **kwargs)

    def put(self, *args: Any) -> Any:
        return self.memory.put(*args)

    def put_writes(self, *args: Any) -> None:
        self.memory.put_writes(*args)

    def prune(self, thread_ids: Any, *, strategy: str = "keep_latest") -> None:
        self.pruned.append((list(thread_ids), strategy))


class OpaqueSaver(BaseCheckpointSaver[Any]):
    """No way to delete one checkpoint."""


def test_a_saver_with_only_prune_serves_keep_checkpoints_1(kit: Any) -> None:
    inner = PruningSaver()
    graph = kit.message_graph(kit.model(2), add_messages,
                              ReducingSaver(inner, reducer(), keep_checkpoints=1))
    graph.invoke(kit.turn_input(0), config("t"))
    assert inner.pruned and set(map(str, inner.pruned)) == {str((["t"], "keep_latest"))}
    with pytest.raises(ConfigError, match="keep_checkpoints=2 is not supported for PruningSaver"):
        ReducingSaver(inner, reducer(), keep_checkpoints=2)


def test_unsupported_savers_and_bad_values_are_named() -> None:
    with pytest.raises(ConfigError, match=r"for OpaqueSaver, .*; supported: InMemorySaver"):
        ReducingSaver(OpaqueSaver(), reducer(), keep_checkpoints=3)
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ConfigError, match=re.escape(
            f"keep_checkpoints must be None or an int >= 1, got {bad!r}"
        )):
            ReducingSaver(InMemorySaver(), reducer(), keep_checkpoints=bad)  # type: ignore[arg-type]
    assert ReducingSaver(InMemorySaver(), reducer()).keep_checkpoints is None


# -- DeltaChannel: a checkpoint another one is rebuilt from is kept ------------------------


def _append(state: list[Any], writes: list[Any]) -> list[Any]:
    """A DeltaChannel reducer: batching-invariant, as DeltaChannel requires."""
    return [*state, *(m for w in writes for m in (w if isinstance(w, list) else [w]))]


class DeltaState(TypedDict):
    messages: Annotated[list[Any], DeltaChannel(_append, snapshot_frequency=5)]
    turns: int


def delta_graph(checkpointer: Any) -> Any:
    def answer(state: DeltaState) -> dict[str, Any]:
        return {"messages": [f"answer {len(state['messages'])}"], "turns": state["turns"] + 1}

    def check(state: DeltaState) -> dict[str, Any]:
        return {"messages": [f"checked {state['turns']}"]}

    builder = StateGraph(DeltaState)
    builder.add_node(answer)
    builder.add_node(check)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", "check")
    builder.add_edge("check", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("keep", [1, 2])
async def test_delta_channel_threads_resume_with_retention(
    backend_factory: Any, keep: int
) -> None:
    # Only a snapshot checkpoint holds a DeltaChannel's value; the others are rebuilt from
    # it and the writes after it. Retention keeps that chain, so every thread resumes whole.
    async with backend_factory() as backend:
        kept = delta_graph(ReducingSaver(backend.saver, reducer(), keep_checkpoints=keep))
        every = delta_graph(InMemorySaver())
        threads = [f"delta-{keep}-{n}" for n in range(3)]
        for turn in range(7):
            for thread in threads:
                payload = {"messages": [f"{thread} question {turn}"], "turns": turn}
                got = await run(kept, backend, payload, config(thread))
                want = every.invoke(payload, config(thread))
                assert got == want, (thread, turn)
        for thread in threads:  # resumed from storage alone, by a graph that ran nothing
            fresh = delta_graph(ReducingSaver(backend.saver, reducer(), keep_checkpoints=keep))
            if backend.is_async:
                state = await fresh.aget_state(config(thread))
            else:
                state = await asyncio.to_thread(fresh.get_state, config(thread))
            assert state.values == every.get_state(config(thread)).values
            assert len(state.values["messages"]) == 7 * 3
            # A new process knows none of the chain: it walks the parents to find it.
            payload = {"messages": [f"{thread} after a restart"], "turns": 7}
            got = await run(fresh, backend, payload, config(thread))
            assert got == every.invoke(payload, config(thread))
        rows = await backend.rows(threads[0])
        # Bounded by the snapshot cadence, not by the thread's length: at most the chain
        # from the newest checkpoints back to their snapshot (every 5 updates).
        assert rows["checkpoints"] <= keep + 5


# -- time-based retention: ThreadTTL and the sweep -------------------------------------------


async def turns(graph: Any, backend: Backend, thread: str, count: int, start: int = 0) -> Any:
    result = None
    for turn in range(start, start + count):
        payload = {"messages": [f"{thread} question {turn}"], "turns": turn}
        result = await run(graph, backend, payload, config(thread))
    return result


async def sweep(saver: ReducingSaver, backend: Backend, now: float) -> list[str]:
    if backend.is_async:
        return await saver.asweep(now)
    return await asyncio.to_thread(saver.sweep, now)


async def test_idle_threads_are_deleted_and_the_others_left(backend_factory: Any) -> None:
    async with backend_factory() as backend:
        saver = ReducingSaver(backend.saver, reducer(), ttl=ThreadTTL(idle=timedelta(hours=1)))
        graph = delta_graph(saver)
        await turns(graph, backend, "idle", 2)
        between = time.time()
        await asyncio.sleep(0.05)
        await turns(graph, backend, "busy", 2)
        # An hour after "idle" was last written, "busy" is still younger than an hour.
        assert await sweep(saver, backend, between + 3600) == ["idle"]
        assert (await backend.rows("idle"))["checkpoints"] == 0
        assert (await backend.rows("busy"))["checkpoints"] > 0
        assert await sweep(saver, backend, between) == []
        # The deleted thread starts afresh; the other resumes whole.
        result = await turns(graph, backend, "busy", 1, start=2)
        assert len(result["messages"]) == 9


async def test_old_threads_expire_by_age_however_busy(backend_factory: Any) -> None:
    async with backend_factory() as backend:
        saver = ReducingSaver(backend.saver, reducer(), ttl=ThreadTTL(age=3600))
        graph = delta_graph(saver)
        await turns(graph, backend, "old", 1)
        # Taken between the two starts, not before "old": a first turn on a loaded machine
        # can outlast any fixed margin.
        between = time.time()
        await asyncio.sleep(0.05)
        await turns(graph, backend, "young", 1)
        # A new process goes on writing "old": its start is read back from storage.
        again = delta_graph(ReducingSaver(backend.saver, reducer(), ttl=ThreadTTL(age=3600)))
        await turns(again, backend, "old", 2, start=1)
        assert await sweep(saver, backend, between + 3600) == ["old"]


@pytest.mark.parametrize("drive", ["sync", "async"])
def test_a_thread_idle_by_its_checkpoint_id_is_swept_without_a_read(drive: str) -> None:
    """The newest checkpoint's id tells when it was written: an idle thread is swept
    without reading it, by either driver, an age limit set or not."""
    inner = InMemorySaver()
    saver = ReducingSaver(inner, reducer(), ttl=ThreadTTL(idle=60, age=3600))
    delta_graph(saver).invoke({"messages": ["question"], "turns": 0}, config("idle"))
    reads: list[Any] = []
    get_tuple, aget_tuple = inner.get_tuple, inner.aget_tuple

    def counted(config: Any) -> Any:
        reads.append(config)
        return get_tuple(config)

    async def acounted(config: Any) -> Any:
        reads.append(config)
        return await aget_tuple(config)

    inner.get_tuple, inner.aget_tuple = counted, acounted  # type: ignore[method-assign]
    now = time.time() + 61
    swept = saver.sweep(now) if drive == "sync" else asyncio.run(saver.asweep(now))
    assert swept == ["idle"]
    assert reads == []


@pytest.mark.parametrize("keep", [None, 2])
async def test_keep_latest_leaves_one_checkpoint_that_resumes_whole(
    backend_factory: Any, keep: int | None
) -> None:
    async with backend_factory() as backend:
        ttl = ThreadTTL(idle=60, strategy="keep_latest")
        saver = ReducingSaver(backend.saver, reducer(), keep_checkpoints=keep, ttl=ttl)
        graph, every = delta_graph(saver), delta_graph(InMemorySaver())
        threads = ["a", "b", "c"]
        for thread in threads:
            await turns(graph, backend, thread, 4)
            for turn in range(4):
                every.invoke({"messages": [f"{thread} question {turn}"], "turns": turn},
                             config(thread))
        assert await sweep(saver, backend, time.time() + 61) == threads
        for thread in threads:
            rows = await backend.rows(thread)
            # One checkpoint, plus the ones back to the snapshot its DeltaChannel needs.
            assert 1 <= rows["checkpoints"] <= 6
            fresh = delta_graph(ReducingSaver(backend.saver, reducer()))
            got = await turns(fresh, backend, thread, 1, start=4)
            want = every.invoke({"messages": [f"{thread} question 4"], "turns": 4},
                                config(thread))
            assert got == want


def test_a_sweep_never_blocks_a_run_on_another_thread() -> None:
    inner = InMemorySaver()
    saver = ReducingSaver(inner, reducer(), ttl=ThreadTTL(idle=60))
    graph = delta_graph(saver)
    graph.invoke({"messages": ["old"], "turns": 0}, config("old"))
    graph.invoke({"messages": ["other"], "turns": 0}, config("other"))
    deleting, release = threading.Event(), threading.Event()
    real_delete = inner.delete_thread

    def slow_delete(thread_id: str) -> None:
        deleting.set()
        release.wait(30)
        real_delete(thread_id)

    inner.delete_thread = slow_delete  # type: ignore[method-assign]
    swept: list[list[str]] = []
    sweeper = threading.Thread(target=lambda: swept.append(saver.sweep(time.time() + 61)))
    sweeper.start()
    assert deleting.wait(30)
    # Mid-sweep: a run on a thread not being deleted goes through, start to end.
    graph.invoke({"messages": ["more"], "turns": 1}, config("other"))
    # A run writing the thread being deleted waits for that one deletion, then writes on.
    late = threading.Thread(
        target=graph.invoke, args=({"messages": ["again"], "turns": 1}, config("old"))
    )
    late.start()
    late.join(0.2)
    assert late.is_alive()
    release.set()
    sweeper.join(30)
    late.join(30)
    assert not late.is_alive() and not sweeper.is_alive()
    assert swept == [["old", "other"]] or swept == [["old"]]
    assert graph.get_state(config("old")).values["turns"] == 2  # its writes landed after


def test_the_background_sweep_deletes_idle_threads() -> None:
    inner = InMemorySaver()
    ttl = ThreadTTL(idle=0.05, sweep_every=0.02)
    saver = ReducingSaver(inner, reducer(), ttl=ttl)
    delta_graph(saver).invoke({"messages": ["hi"], "turns": 0}, config("bg"))
    deadline = time.monotonic() + 30
    while inner.storage.get("bg") and time.monotonic() < deadline:
        time.sleep(0.02)
    saver._need_sweeper().stop()
    assert not inner.storage.get("bg")


def test_ttl_arguments_are_checked() -> None:
    with pytest.raises(ConfigError, match="idle= or age="):
        ThreadTTL()
    with pytest.raises(ConfigError, match="idle must be positive"):
        ThreadTTL(idle=0)
    with pytest.raises(ConfigTypeError, match="age must be a timedelta or seconds"):
        ThreadTTL(age="1d")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="strategy must be 'delete' or 'keep_latest'"):
        ThreadTTL(idle=1, strategy="archive")
    with pytest.raises(ConfigError, match="sweep_every must be positive"):
        ThreadTTL(idle=1, sweep_every=-1)
    with pytest.raises(ConfigTypeError, match="ttl must be a ThreadTTL"):
        ReducingSaver(InMemorySaver(), reducer(), ttl=3600)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="sweep\\(\\) needs"):
        ReducingSaver(InMemorySaver(), reducer()).sweep()


async def test_a_delta_channel_fork_from_a_kept_checkpoint_resumes(backend_factory: Any) -> None:
    async with backend_factory() as backend:
        graph = delta_graph(ReducingSaver(backend.saver, reducer(), keep_checkpoints=2))
        every = delta_graph(InMemorySaver())
        for turn in range(4):
            payload = {"messages": [f"q{turn}"], "turns": turn}
            await run(graph, backend, payload, config("fork"))
            every.invoke(payload, config("fork"))
        kept = await history(graph, backend, config("fork"))
        want = list(every.get_state_history(config("fork")))
        older = kept[1]  # the second newest, the checkpoint before the last step
        twin = next(s for s in want if s.metadata["step"] == older.metadata["step"])
        assert older.values == twin.values
        payload = {"messages": ["forked"], "turns": 9}
        got = await run(graph, backend, payload, older.config)
        assert got == every.invoke(payload, twin.config)
        # The fork is now the newest; what it and the old head need is still there.
        state = await history(graph, backend, config("fork"))
        assert state[0].values == got


@pytest.mark.parametrize("drive", ["sync", "async"])
def test_a_deletion_starting_right_after_a_write_learns_the_start_leaves_the_write_whole(
    drive: str,
) -> None:
    """A sweep may begin deleting a thread between a write learning the thread's start and
    stamping it (the deletion forgets the start): the write stamps what it learned."""
    from agentstate_reducer.langgraph._ttl import STARTED, Sweeper

    class ForgotRightAfter(dict[str, float]):
        def setdefault(self, key: str, default: float) -> float:  # type: ignore[override]
            value = super().setdefault(key, default)
            del self[key]  # as _Deleting does, the moment the lock is free
            return value

    sweeper = Sweeper(InMemorySaver(), ThreadTTL(age=3600))
    sweeper._started = ForgotRightAfter()
    where = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    before = time.time()
    if drive == "sync":
        metadata = sweeper.before_put(where, {"step": 1})
    else:
        metadata = asyncio.run(sweeper.abefore_put(where, {"step": 1}))
    assert metadata["step"] == 1
    assert before <= metadata[STARTED] <= time.time()
