"""Checkpoint and hand-off in one commit (issue 25 item 9): a real PostgresSaver and a
PostgresOutbox in one database under ReducingSaver store each checkpoint and the messages
its reduce pruned in one transaction.

Before, the outbox committed first and the checkpoint second: a checkpoint write that
failed (or a process killed between the two) left the outbox holding messages the durable
state still had, and a step re-run after the crash created its messages again under new
ids, handing a message it created and pruned at once over twice.

Needs PostgreSQL: set AGENTSTATE_TEST_POSTGRES_URL (or run one on 127.0.0.1:5432 with
trust auth and a database 'test'); the tests skip otherwise.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
from collections import Counter
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.langgraph import ReducingSaver
from agentstate_reducer.outbox import AsyncOutboxHook, OutboxHook

pytest.importorskip("psycopg")
pytest.importorskip("langgraph.checkpoint.postgres")

TABLE = "joint_outbox"


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turn: int


def _agent(state: State, config: RunnableConfig) -> dict[str, Any]:
    """Three answers without ids (add_messages gives each a fresh uuid), as a model's
    reply and tool results are; a re-run step makes them again under new ids."""
    thread = config["configurable"]["thread_id"]
    turn = state.get("turn", 0)
    answers = [AIMessage(f"{thread} t{turn} a{k}") for k in range(3)]
    return {"messages": answers, "turn": turn + 1}


async def _aagent(state: State, config: RunnableConfig) -> dict[str, Any]:
    return _agent(state, config)


def _graph(checkpointer: Any, node: Any = _agent) -> Any:
    builder = StateGraph(State)
    builder.add_node("agent", node)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=checkpointer)


def _config(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def _question(thread: str, turn: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"{thread} t{turn} q")]}


def _said(thread: str, turns: int) -> set[str]:
    """Every message of ``turns`` turns of ``thread``, by content."""
    return {f"{thread} t{t} {x}" for t in range(turns) for x in ("q", "a0", "a1", "a2")}


def _reducer(hook: Any) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[hook]))


def _url(postgres: dict[str, Any], options: str | None = None) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(postgres["conninfo"], options=options or postgres["options"])


def _handed(conn: Any, table: str = TABLE) -> Counter[str]:
    """The content of each message in the outbox, counted."""
    rows = conn.execute(f"SELECT payload FROM {table}").fetchall()
    payloads = [row["payload"] if isinstance(row, dict) else row[0] for row in rows]
    return Counter(json.loads(payload)["kwargs"]["content"] for payload in payloads)


def _kept(saver: Any, thread: str) -> set[str]:
    """The content of each message in the thread's latest committed checkpoint."""
    found = saver.get_tuple(_config(thread))
    if found is None:
        return set()
    return {m.content for m in found.checkpoint["channel_values"].get("messages", [])}


@pytest.fixture
def db(postgres: dict[str, Any]) -> Iterator[tuple[Any, Any, Any]]:
    """A PostgresSaver (set up), a PostgresOutbox in the same schema, a reading connection."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    from agentstate_reducer.outbox import PostgresOutbox

    with psycopg.Connection.connect(**postgres) as conn, psycopg.Connection.connect(
        **postgres
    ) as reader:
        saver = PostgresSaver(conn)
        saver.setup()
        outbox = PostgresOutbox(_url(postgres), table=TABLE)
        try:
            yield saver, outbox, reader
        finally:
            outbox.close()


def test_one_database_is_one_commit(db: tuple[Any, Any, Any]) -> None:
    saver, outbox, reader = db
    checkpointer = ReducingSaver(saver, _reducer(OutboxHook(outbox)), keep_checkpoints=3)
    assert checkpointer.joint_commit is True
    graph = _graph(checkpointer)
    for turn in range(8):
        graph.invoke(_question("a", turn), _config("a"))
    handed, kept = _handed(reader), _kept(saver, "a")
    assert max(handed.values()) == 1
    assert set(handed) == _said("a", 8) - kept and len(kept) <= 4


def test_a_failed_checkpoint_write_stores_none_of_its_pruned_messages(
    db: tuple[Any, Any, Any],
) -> None:
    saver, outbox, reader = db
    # A checkpoint write the server refuses while the flag table holds a row.
    reader.execute("CREATE TABLE refuse (x int)")
    reader.execute(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF EXISTS (SELECT 1 FROM refuse) THEN RAISE EXCEPTION 'refused'; END IF; "
        "RETURN NEW; END $$"
    )
    reader.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON checkpoints FOR EACH ROW "
        "EXECUTE FUNCTION refuse()"
    )
    graph = _graph(ReducingSaver(saver, _reducer(OutboxHook(outbox))))
    for turn in range(3):
        graph.invoke(_question("a", turn), _config("a"))
    before = _handed(reader)
    assert before  # something was pruned already
    reader.execute("INSERT INTO refuse VALUES (1)")
    with pytest.raises(Exception, match="refused"):
        graph.invoke(_question("a", 3), _config("a"))
    # Nothing of the refused write is in the outbox (two commits stored its pruned rows).
    assert _handed(reader) == before
    reader.execute("DELETE FROM refuse")
    for turn in range(3, 6):  # the failed turn's question was never stored: ask again
        graph.invoke(_question("a", turn), _config("a"))
    handed, kept = _handed(reader), _kept(saver, "a")
    assert max(handed.values()) == 1
    assert set(handed) == _said("a", 6) - kept


def test_an_outbox_the_saver_cannot_see_is_two_commits(
    db: tuple[Any, Any, Any], postgres: dict[str, Any]
) -> None:
    import psycopg

    from agentstate_reducer.outbox import PostgresOutbox

    saver = db[0]
    schema = "elsewhere_" + os.urandom(4).hex()
    with psycopg.connect(postgres["conninfo"], autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            with PostgresOutbox(_url(postgres, f"-c search_path={schema}"), table=TABLE) as far:
                checkpointer = ReducingSaver(saver, _reducer(OutboxHook(far)))
                assert checkpointer.joint_commit is False  # another table by that name
                graph = _graph(checkpointer)
                for turn in range(4):
                    graph.invoke(_question("a", turn), _config("a"))
                handed = _handed(admin, f'"{schema}".{TABLE}')
                assert set(handed) == _said("a", 4) - _kept(saver, "a")
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_no_outbox_hook_no_joint_commit(db: tuple[Any, Any, Any]) -> None:
    saver, _, _ = db
    assert ReducingSaver(saver, _reducer(lambda pruned, ns: None)).joint_commit is False


async def test_async_saver_commits_jointly(postgres: dict[str, Any]) -> None:
    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from agentstate_reducer.outbox import PostgresOutbox

    async with await psycopg.AsyncConnection.connect(**postgres) as conn:
        saver = AsyncPostgresSaver(conn)
        await saver.setup()
        with PostgresOutbox(_url(postgres), table=TABLE) as outbox:
            checkpointer = ReducingSaver(saver, _reducer(AsyncOutboxHook(outbox)))
            assert checkpointer.joint_commit is None  # asked on the first write
            graph = _graph(checkpointer, _aagent)
            for turn in range(6):
                await graph.ainvoke(_question("a", turn), _config("a"))
            assert checkpointer.joint_commit is True
            with psycopg.Connection.connect(**postgres) as reader:
                handed = _handed(reader)
            found = await saver.aget_tuple(_config("a"))
            assert found is not None
            kept = {m.content for m in found.checkpoint["channel_values"]["messages"]}
            assert max(handed.values()) == 1
            assert set(handed) == _said("a", 6) - kept


# -- crashes: a child killed at random, many times --------------------------------

THREADS = ("c0", "c1")
TURNS = 60


def _child(postgres: dict[str, Any], url: str, turns: int, ready: Any) -> None:
    """Run turns on every thread until each has ``turns``; resume a step left pending.
    ``ready`` is set once the first turn of this process is done."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    from agentstate_reducer.outbox import PostgresOutbox

    conn = psycopg.Connection.connect(**postgres)
    outbox = PostgresOutbox(url, table=TABLE)
    cp = ReducingSaver(PostgresSaver(conn), _reducer(OutboxHook(outbox)))
    graph = _graph(cp)
    left = True
    while left:
        left = False
        for thread in THREADS:
            # From what is committed: a checkpoint with writes pending is a step to
            # finish (get_state shows those writes applied, as if the step were done).
            saved = cp.get_tuple(_config(thread))
            turn = saved.checkpoint["channel_values"].get("turn", 0) if saved else 0
            if saved is not None and (saved.pending_writes or graph.get_state(
                _config(thread)
            ).next):
                graph.invoke(None, _config(thread))
            elif turn < turns:
                graph.invoke(_question(thread, turn), _config(thread))
            else:
                continue
            ready.set()
            left = True


@pytest.mark.slow
def test_killed_between_and_around_the_writes_nothing_lost_or_repeated(
    db: tuple[Any, Any, Any], postgres: dict[str, Any]
) -> None:
    saver, _, reader = db
    # A checkpoint write that takes a few ms more, so kills land inside it often.
    reader.execute(
        "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "PERFORM pg_sleep(0.005); RETURN NEW; END $$"
    )
    reader.execute(
        "CREATE TRIGGER slow BEFORE INSERT ON checkpoints FOR EACH ROW EXECUTE FUNCTION slow()"
    )
    # A fork server: children start at once, from a process that ran nothing else (a
    # child forked from this one would share its connections' sockets).
    fork = multiprocessing.get_context("forkserver")
    fork.set_forkserver_preload([
        "langgraph.checkpoint.postgres", "langgraph.graph", "agentstate_reducer.langgraph",
        "agentstate_reducer.outbox.postgres", __name__,
    ])
    rng = random.Random(25)
    kills = premature = 0
    for _ in range(40):
        ready = fork.Event()
        child = fork.Process(target=_child, args=(postgres, _url(postgres), TURNS, ready))
        child.start()
        ready.wait(60)  # a kill while it starts up tests nothing
        child.join(rng.uniform(0.0, 0.2))
        if child.exitcode is not None:
            break  # every turn done
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join()
        kills += 1
        # After each kill: no message both in the durable state and handed over, none twice.
        handed = _handed(reader)
        kept = set().union(*(_kept(saver, t) for t in THREADS))
        premature += len(kept & set(handed))
        assert max(handed.values(), default=1) == 1, f"handed over twice after {kills} kills"
    done = fork.Event()
    final = fork.Process(target=_child, args=(postgres, _url(postgres), TURNS, done))
    final.start()
    final.join(120)
    assert final.exitcode == 0
    handed = _handed(reader)
    kept = set().union(*(_kept(saver, t) for t in THREADS))
    said = set().union(*(_said(t, TURNS) for t in THREADS))
    assert kills >= 10
    assert premature == 0
    assert max(handed.values()) == 1  # 0 duplicates
    assert said - kept - set(handed) == set()  # 0 lost
    assert set(handed) | kept == said and not (set(handed) & kept)
