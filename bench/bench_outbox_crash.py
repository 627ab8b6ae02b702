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
    parser.add_argument("--backend", action="append", choices=("sqlite", "postgres", "redis"))
    args = parser.parse_args(argv)
    backends: dict[str, Callable[[Path], Any]] = {
        "sqlite": sqlite, "postgres": postgres, "redis": redis_
    }
    total: Counter[str] = Counter()
    for name in args.backend or list(backends):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                context = backends[name](Path(tmp))
                spec = context.__enter__()
            except Exception as exc:  # an unreachable server or a missing driver
                print(f"{name}: skipped ({type(exc).__name__}: {str(exc)[:80]})")
                continue
            try:
                figures = run(spec, Path(tmp), args)
            finally:
                context.__exit__(None, None, None)
        total.update(figures)
        print(f"{name}: " + ", ".join(f"{k} {v:,}" for k, v in figures.items()), flush=True)
    print("total: " + ", ".join(f"{k} {v:,}" for k, v in total.items()))
    return 0 if total["lost"] == 0 and total["hangs"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
