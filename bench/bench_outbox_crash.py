"""Random SIGKILLs of producers and relays: what the outbox loses, repeats and hangs on.

For each reachable backend (SQLite always; PostgreSQL and Redis when
AGENTSTATE_TEST_POSTGRES_URL / AGENTSTATE_TEST_REDIS_URL or the local defaults answer):

* ``--producers`` processes each run an agent (up to ``--turns`` turns): ``reduce()`` with an
  ``OutboxHook``, then the surviving state is checkpointed (written atomically), as a
  LangGraph checkpointer does after each step. A restarted producer resumes from its
  checkpoint and replays the step it was killed in.
* ``--relays`` processes each run ``Relay.run_forever`` into an idempotent sink (a file of
  delivered ``namespace id`` lines).
* A killer SIGKILLs a random producer or relay every ``--interval`` seconds on average
  (0.2x to 1.8x at random) and restarts it, for
  ``--seconds``; then the producers finish their turn, a last relay drains (waiting out the
  leases the killed relays held, until no job is ready or claimed), and the figures:
  messages pruned (recorded only once ``reduce()`` returned), delivered, lost (pruned,
  never delivered), duplicates (deliveries past the first, which an idempotent store
  absorbs) and hangs (a process or the final drain that did not finish in time).

    python bench/bench_outbox_crash.py --seconds 60

``--backend joint`` (PostgreSQL) runs LangGraph instead: each producer runs a graph
checkpointed by ``ReducingSaver(PostgresSaver)`` whose reducer's ``OutboxHook`` writes to a
``PostgresOutbox`` in the saver's database, so a checkpoint and the messages its reduce
pruned commit in one transaction; ``--backend apart`` is the same with the outbox in a
schema the saver does not see (two commits, the outbox's first). The answers have no ids
(``add_messages`` gives each a fresh uuid, and a re-run step new ones), so messages are
counted by content: lost (said, in neither the final state nor the sink), duplicates
(a content stored as two jobs), early (after a producer's kill, messages both in its
latest checkpoint and in the outbox), redelivered (deliveries of one job past the first).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

POSTGRES_URL = os.environ.get(
    "AGENTSTATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("AGENTSTATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
#: A relay killed while delivering costs its jobs an attempt; kills are not failures of
#: the store, so the bench allows many before a job is dead-lettered (counted apart).
ATTEMPTS = {"max_attempts": 1000}

PRELUDE = """
import json, os, sys, time
import agentstate_reducer.outbox as ob
spec = json.loads(sys.argv[1])
outbox = getattr(ob, spec["cls"])(**spec["kwargs"])
"""

PRODUCER = """
from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.outbox import OutboxHook
name, turns, work = sys.argv[2], int(sys.argv[3]), sys.argv[4]
checkpoint = os.path.join(work, f"{name}.state.json")
journal = open(os.path.join(work, f"{name}.pruned"), "a", encoding="utf-8")
config = ReducerConfig(min_messages=6, max_messages=12, on_prune=[OutboxHook(outbox)])
reducer = MessageReducer(config=config)
try:
    with open(checkpoint, encoding="utf-8") as f:
        turn, state = json.load(f)
except FileNotFoundError:
    turn, state = 0, [{"role": "system", "content": "agent", "id": f"{name}-sys"}]
namespace = ["memories", name]
stop = os.path.join(work, "stop")
while turn < turns and not os.path.exists(stop):
    new = [
        {"role": "user", "content": f"question {turn}", "id": f"{name}-u{turn}"},
        {"role": "assistant", "content": f"answer {turn}", "id": f"{name}-a{turn}"},
    ]
    result = reducer.reduce(state, new, namespace=namespace)
    if result.pruned:  # recorded once reduce() returned: the caller may now forget them
        journal.write("".join(m["id"] + "\\n" for m in result.pruned))
        journal.flush()
    turn, state = turn + 1, result.surviving
    tmp = checkpoint + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump([turn, state], f)
    os.replace(tmp, checkpoint)
print("done", flush=True)
"""

RELAY = """
import threading
from agentstate_reducer.outbox import Relay
sink = open(sys.argv[2], "a", encoding="utf-8")
def deliver(messages, namespace):
    sink.write("".join(f"{namespace[1]} {m['id']}\\n" for m in messages))
    sink.flush()
stop = threading.Event()
if len(sys.argv) > 3:  # the final drain: stop once nothing is left
    relay = Relay(outbox, deliver, batch=50, retry_delay=0, lease_seconds=2)
    while True:
        if relay.run_once().claimed:
            continue
        left = outbox.counts()
        if not left["ready"] and not left["claimed"]:
            break
        # Jobs a killed relay leased stay invisible until their lease runs out (2 s).
        time.sleep(0.2)
    print(json.dumps(outbox.counts()), flush=True)
else:
    Relay(outbox, deliver, batch=20, lease_seconds=2, poll_interval=0.02).run_forever(stop)
"""


@contextmanager
def sqlite(work: Path) -> Iterator[dict[str, Any]]:
    yield {"cls": "SQLiteOutbox", "kwargs": {"path": str(work / "outbox.db"), **ATTEMPTS}}


@contextmanager
def postgres(work: Path) -> Iterator[dict[str, Any]]:
    import psycopg

    table = f"outbox_crash_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES_URL, connect_timeout=3):
        pass
    try:
        kwargs = {"conninfo": POSTGRES_URL, "table": table, **ATTEMPTS}
        yield {"cls": "PostgresOutbox", "kwargs": kwargs}
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


@contextmanager
def redis_(work: Path) -> Iterator[dict[str, Any]]:
    import redis

    prefix = f"agentstate-crash:{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(REDIS_URL, socket_timeout=3)
    client.ping()
    try:
        yield {"cls": "RedisOutbox", "kwargs": {"url": REDIS_URL, "prefix": prefix, **ATTEMPTS}}
    finally:
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        client.close()


class Child:
    """A child process whose output goes to a file: a pipe nobody reads would block a
    chatty child, which would look like a hang."""

    def __init__(self, work: Path, spec: dict[str, Any], script: str, *args: str) -> None:
        self.log = work / f"{uuid.uuid4().hex}.log"
        with open(self.log, "w", encoding="utf-8") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", PRELUDE + textwrap.dedent(script), json.dumps(spec),
                 *args],
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> bool:
        """SIGKILL it if it still runs; whether it did."""
        if self.proc.poll() is not None:
            return False
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        return True

    def finish(self, timeout: float) -> bool:
        """Wait for it to end by itself; False (and killed) when it hangs."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return False
        if self.proc.returncode != 0:
            raise RuntimeError(f"child failed: {self.output()[-2000:]}")
        return True

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8")


def lines(path: Path) -> list[str]:
    """Complete lines only: a kill mid-write leaves a partial last line, not a record."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return text.split("\n")[:-1]


GRAPH = """
import json, os, sys
from typing import Annotated, Any
import psycopg
from psycopg.rows import dict_row
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict
from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.langgraph import ReducingSaver

class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turn: int

def agent(state, config):
    thread, turn = config["configurable"]["thread_id"], state.get("turn", 0)
    return {"messages": [AIMessage(f"{thread} t{turn} a{k}") for k in range(3)],
            "turn": turn + 1}

def saver_conn():
    return psycopg.Connection.connect(spec["saver"], autocommit=True, prepare_threshold=0,
                                      row_factory=dict_row)
"""

JOINT_PRODUCER = GRAPH + """
from agentstate_reducer.outbox import OutboxHook
name, turns, work = sys.argv[2], int(sys.argv[3]), sys.argv[4]
reducer = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4,
                                              on_prune=[OutboxHook(outbox)]))
saver = ReducingSaver(PostgresSaver(saver_conn()), reducer)
builder = StateGraph(State)
builder.add_node("agent", agent)
builder.add_edge(START, "agent")
graph = builder.compile(checkpointer=saver)
config = {"configurable": {"thread_id": name}}
ready = os.path.join(work, f"{name}.ready")
stop = os.path.join(work, "stop")
while True:
    saved = saver.get_tuple(config)
    turn = saved.checkpoint["channel_values"].get("turn", 0) if saved else 0
    if saved is not None and (saved.pending_writes or graph.get_state(config).next):
        graph.invoke(None, config)  # a step left unfinished
    elif turn < turns and not os.path.exists(stop):
        graph.invoke({"messages": [HumanMessage(f"{name} t{turn} q")]}, config)
    else:
        break
    if not os.path.exists(ready):
        open(ready, "w").close()
print(json.dumps({"joint": saver.joint_commit}), flush=True)
"""

JOINT_RELAY = RELAY.replace(  # the sink records each job: its id and its content
    "sink.write(\"\".join(f\"{namespace[1]} {m['id']}\\n\" for m in messages))",
    "sink.write(\"\".join(f\"{m.id}\\t{m.content}\\n\" for m in messages))",
)
assert JOINT_RELAY != RELAY


def run_joint(spec: dict[str, Any], work: Path, args: argparse.Namespace) -> dict[str, int]:
    """The ``joint`` / ``apart`` run: LangGraph producers, kills, a drain, the figures."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    rng = random.Random(args.seed)
    names = [f"g{i}" for i in range(args.producers)]
    sink = str(work / "sink.txt")
    turns = str(args.turns)
    conn = psycopg.Connection.connect(spec["saver"], autocommit=True, prepare_threshold=0,
                                      row_factory=dict_row)
    saver = PostgresSaver(conn)
    saver.setup()
    table = spec["outbox_table"]

    def producer(name: str) -> Child:
        (work / f"{name}.ready").unlink(missing_ok=True)
        return Child(work, spec, JOINT_PRODUCER, name, turns, str(work))

    def kept(name: str) -> set[str]:
        found = saver.get_tuple({"configurable": {"thread_id": name}})
        messages = found.checkpoint["channel_values"].get("messages", []) if found else []
        return {m.content for m in messages}

    def handed() -> Counter[str]:
        with psycopg.connect(spec["kwargs"]["conninfo"], autocommit=True) as c:
            rows = c.execute(f"SELECT payload FROM {table}").fetchall()
        return Counter(json.loads(payload)["kwargs"]["content"] for (payload,) in rows)

    producers = {n: producer(n) for n in names}
    relays = [Child(work, spec, JOINT_RELAY, sink) for _ in range(args.relays)]
    kills = early = 0
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(0.2, 1.8) * args.interval)
        if rng.random() < 0.6:
            name = rng.choice(names)
            # A producer still starting up has no write to interrupt: let it start.
            if (work / f"{name}.ready").exists() and producers[name].kill():
                kills += 1
                early += len(kept(name) & set(handed()))
                producers[name] = producer(name)
        else:
            k = rng.randrange(len(relays))
            kills += relays[k].kill()
            relays[k] = Child(work, spec, JOINT_RELAY, sink)
    (work / "stop").touch()
    hangs = sum(not child.finish(120) for child in producers.values())
    joint = {json.loads(c.output().strip().splitlines()[-1])["joint"]
             for c in producers.values() if c.output().strip()}
    for child in relays:
        child.kill()
    final = Child(work, spec, JOINT_RELAY, sink, "drain")
    counts: dict[str, int] = {}
    if final.finish(300):
        counts = json.loads(final.output().strip().splitlines()[-1])
    else:
        hangs += 1
    deliveries = [line.split("\t", 1) for line in lines(work / "sink.txt")]
    jobs = {(ident, content) for ident, content in deliveries}
    per_content = Counter(content for _, content in jobs)
    state = set().union(*(kept(n) for n in names))
    said = set()
    for name in names:
        found = saver.get_tuple({"configurable": {"thread_id": name}})
        done = found.checkpoint["channel_values"].get("turn", 0) if found else 0
        said |= {f"{name} t{t} {x}" for t in range(done) for x in ("q", "a0", "a1", "a2")}
    conn.close()
    return {
        "joint commit": int(joint == {True}),
        "kills": kills,
        "said": len(said),
        "delivered": len(per_content),
        "lost": len(said - state - set(per_content)),
        "duplicates": sum(per_content.values()) - len(per_content),
        "early": early,
        "redelivered": len(deliveries) - len(jobs),
        "hangs": hangs,
        "dead-lettered": counts.get("failed", 0),
    }


@contextmanager
def joint_(work: Path, *, apart: bool = False) -> Iterator[dict[str, Any]]:
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"crash_{uuid.uuid4().hex[:8]}"
    elsewhere = f"{schema}_outbox"
    with psycopg.connect(POSTGRES_URL, connect_timeout=3, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE SCHEMA "{elsewhere}"')
    saver = make_conninfo(POSTGRES_URL, options=f"-c search_path={schema}")
    box = make_conninfo(POSTGRES_URL, options=f"-c search_path={elsewhere if apart else schema}")
    try:
        kwargs = {"conninfo": box, "table": "agentstate_outbox", **ATTEMPTS}
        yield {"cls": "PostgresOutbox", "kwargs": kwargs, "saver": saver,
               "outbox_table": f'"{elsewhere if apart else schema}".agentstate_outbox'}
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'DROP SCHEMA IF EXISTS "{elsewhere}" CASCADE')


def run(spec: dict[str, Any], work: Path, args: argparse.Namespace) -> dict[str, int]:
    rng = random.Random(args.seed)
    names = [f"p{i}" for i in range(args.producers)]
    sink = str(work / "sink.txt")
    turns = str(args.turns)

    def producer(name: str) -> Child:
        return Child(work, spec, PRODUCER, name, turns, str(work))

    producers = {n: producer(n) for n in names}
    relays = [Child(work, spec, RELAY, sink) for _ in range(args.relays)]
    kills = 0
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(0.2, 1.8) * args.interval)
        if rng.random() < 0.6:
            name = rng.choice(names)
            if producers[name].kill():  # a producer that finished stays done
                kills += 1
                producers[name] = producer(name)
        else:
            k = rng.randrange(len(relays))
            kills += relays[k].kill()
            relays[k] = Child(work, spec, RELAY, sink)
    (work / "stop").touch()  # producers finish the turn they are in
    hangs = sum(not child.finish(60) for child in producers.values())
    for child in relays:
        child.kill()
    final = Child(work, spec, RELAY, sink, "drain")
    counts: dict[str, int] = {}
    if final.finish(300):
        counts = json.loads(final.output().strip().splitlines()[-1])
    else:
        hangs += 1
    pruned = {(n, ident) for n in names for ident in lines(work / f"{n}.pruned")}
    deliveries = Counter(tuple(line.split(" ", 1)) for line in lines(work / "sink.txt"))
    delivered = set(deliveries)
    return {
        "kills": kills,
        "pruned": len(pruned),
        "delivered": len(delivered),
        "lost": len(pruned - delivered),
        "duplicates": sum(deliveries.values()) - len(delivered),
        "hangs": hangs,
        "dead-lettered": counts.get("failed", 0),
        # Stored by a reduce killed before it returned, then pruned again on its replay.
        "unrecorded": len(delivered - pruned),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="killing time per backend")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--relays", type=int, default=2)
    parser.add_argument("--turns", type=int, default=100_000, help="most turns per producer")
    parser.add_argument("--interval", type=float, default=0.5, help="mean seconds between kills")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument(
        "--backend", action="append", choices=("sqlite", "postgres", "redis", "joint", "apart")
    )
    args = parser.parse_args(argv)
    backends: dict[str, Callable[[Path], Any]] = {
        "sqlite": sqlite, "postgres": postgres, "redis": redis_, "joint": joint_,
        "apart": lambda work: joint_(work, apart=True),
    }
    total: Counter[str] = Counter()
    for name in args.backend or ["sqlite", "postgres", "redis", "joint"]:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                context = backends[name](Path(tmp))
                spec = context.__enter__()
            except Exception as exc:  # an unreachable server or a missing driver
                print(f"{name}: skipped ({type(exc).__name__}: {str(exc)[:80]})")
                continue
            try:
                runner = run_joint if name in ("joint", "apart") else run
                figures = runner(spec, Path(tmp), args)
            finally:
                context.__exit__(None, None, None)
        total.update(figures)
        print(f"{name}: " + ", ".join(f"{k} {v:,}" for k, v in figures.items()), flush=True)
    print("total: " + ", ".join(f"{k} {v:,}" for k, v in total.items()))
    return 0 if total["lost"] == 0 and total["hangs"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
