"""Storage: with ReducingSaver a thread's checkpoints stay window-sized and the database
grows linearly in turns; without it, it grows quadratically (measured side by side)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from statistics import mean
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import add_messages
from langgraph.store.memory import InMemoryStore

from agentstate_reducer.langgraph import ReducingSaver

TURNS = 100
MAX_MESSAGES = 20
#: Turns are of three kinds (0, 1 or 2 tool calls): compare whole cycles.
CYCLE = 12
#: Message sizes differ by kind, so the window's bytes vary a little at equal length.
BLOB_MARGIN = 1.15


@dataclass
class Growth:
    """Per turn: the newest checkpoint's message count and messages blob, the stored bytes."""

    messages: list[int] = field(default_factory=list)
    blob: list[int] = field(default_factory=list)
    stored: list[int] = field(default_factory=list)

    def step(self, i: int) -> int:
        return self.stored[i] - self.stored[i - 1]

    def mean_step(self, start: int) -> float:
        return mean(self.step(i) for i in range(start, start + CYCLE))


def run(
    kit: Any, checkpointer: BaseCheckpointSaver[Any], stored_bytes: Callable[[], int]
) -> Growth:
    saver = checkpointer.inner if isinstance(checkpointer, ReducingSaver) else checkpointer
    graph = kit.message_graph(kit.model(TURNS), add_messages, checkpointer)
    config = {"configurable": {"thread_id": "t-1"}}
    growth = Growth()
    for turn in range(TURNS):
        graph.invoke(kit.turn_input(turn), config)
        newest = saver.get_tuple(config)
        messages = newest.checkpoint["channel_values"]["messages"]
        growth.messages.append(len(messages))
        growth.blob.append(len(saver.serde.dumps_typed(messages)[1]))
        growth.stored.append(stored_bytes())
    return growth


def check_bounded(reduced: Growth, plain: Growth) -> int:
    """The assertions shared by every backend; returns the turn the window filled."""
    filled = next(t for t, n in enumerate(reduced.messages) if n < plain.messages[t])
    at_fill = max(reduced.blob[: filled + 1])
    assert max(reduced.blob[filled:]) <= at_fill * BLOB_MARGIN
    assert reduced.blob[-1] <= at_fill * BLOB_MARGIN
    assert max(reduced.messages) <= MAX_MESSAGES
    # Linear: the bytes added per turn at the end match those right after the window filled.
    early, late = reduced.mean_step(filled + 1), reduced.mean_step(TURNS - CYCLE)
    assert late <= early * 1.10
    # The unreduced thread, same turns: its per-turn growth keeps rising (quadratic total).
    assert plain.mean_step(TURNS - CYCLE) >= 3 * plain.mean_step(filled + 1)
    assert plain.stored[-1] >= 4 * reduced.stored[-1]
    assert plain.blob[-1] >= 10 * reduced.blob[-1]
    return filled


# -- SQLite ------------------------------------------------------------------------------


@contextmanager
def sqlite_saver(path: str) -> Iterator[tuple[SqliteSaver, Callable[[], int]]]:
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()

        def stored() -> int:
            rows = conn.execute(
                "SELECT (SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) "
                "FROM checkpoints) + (SELECT coalesce(sum(length(value)), 0) FROM writes)"
            )
            return int(rows.fetchone()[0])

        yield saver, stored
    finally:
        conn.close()


@pytest.mark.slow
def test_sqlite_storage_grows_linearly(kit: Any, tmp_path: Any) -> None:
    with sqlite_saver(str(tmp_path / "plain.sqlite")) as (saver, stored):
        plain = run(kit, saver, stored)
    memory = kit.memory(InMemoryStore(), max_messages=MAX_MESSAGES)
    with sqlite_saver(str(tmp_path / "reduced.sqlite")) as (saver, stored):
        reduced = run(kit, ReducingSaver(saver, memory.reducer), stored)
    filled = check_bounded(reduced, plain)
    print(report("SqliteSaver", reduced, plain, filled))


# -- PostgreSQL --------------------------------------------------------------------------------


@contextmanager
def postgres_saver(connect: dict[str, Any]) -> Iterator[tuple[Any, Callable[[], int]]]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection

    with Connection.connect(**connect) as conn:
        saver = PostgresSaver(conn)  # type: ignore[arg-type]
        saver.setup()

        def stored() -> int:
            row = conn.execute(
                "SELECT (SELECT coalesce(sum(length(checkpoint::text) + length(metadata::text)), 0)"
                " FROM checkpoints)"
                " + (SELECT coalesce(sum(length(blob)), 0) FROM checkpoint_blobs)"
                " + (SELECT coalesce(sum(length(blob)), 0) FROM checkpoint_writes) AS total"
            ).fetchone()
            assert row is not None
            return int(row["total"])

        yield saver, stored


@pytest.mark.slow
def test_postgres_storage_grows_linearly(kit: Any, postgres: dict[str, Any]) -> None:
    with postgres_saver(postgres) as (saver, stored):
        plain = run(kit, saver, stored)
        saver.delete_thread("t-1")
        memory = kit.memory(InMemoryStore(), max_messages=MAX_MESSAGES)
        reduced = run(kit, ReducingSaver(saver, memory.reducer), stored)
    filled = check_bounded(reduced, plain)
    print(report("PostgresSaver", reduced, plain, filled))


def report(name: str, reduced: Growth, plain: Growth, filled: int) -> str:
    return (
        f"\n{name}, {TURNS} turns, max_messages={MAX_MESSAGES}, window filled at turn {filled}:"
        f"\n  newest messages blob: reduced {reduced.blob[-1]} B (at fill "
        f"{max(reduced.blob[: filled + 1])} B), plain {plain.blob[-1]} B"
        f"\n  bytes per turn, after fill -> last {CYCLE}: reduced "
        f"{reduced.mean_step(filled + 1):.0f} -> {reduced.mean_step(TURNS - CYCLE):.0f}, "
        f"plain {plain.mean_step(filled + 1):.0f} -> {plain.mean_step(TURNS - CYCLE):.0f}"
        f"\n  stored after {TURNS} turns: reduced {reduced.stored[-1]} B, "
        f"plain {plain.stored[-1]} B"
    )


@pytest.fixture(autouse=True)
def _show_figures(capsys: pytest.CaptureFixture[str]) -> Iterator[None]:
    yield
    out = capsys.readouterr().out
    if out:
        with capsys.disabled():
            print(out, end="")
