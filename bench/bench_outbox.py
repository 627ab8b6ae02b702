"""The outbox's cost: what OutboxHook adds to one reduce(), and relay throughput.

For each reachable backend (SQLite always; PostgreSQL and Redis when
AGENTSTATE_TEST_POSTGRES_URL / AGENTSTATE_TEST_REDIS_URL or the local defaults answer):

* an agent loop of 2,000 turns, each reduce() pruning a few messages, timed with a
  plain in-memory hook and with OutboxHook (one durable commit per pruning reduce);
* each enqueue of that loop timed alone: its median and 99th percentile; for PostgreSQL
  also interleaved, call by call, with its floor: one bare autocommit INSERT of the same
  20 rows into a one-index table (the commit's fsync, which no client code removes);
* a Relay draining 10,000 jobs in batches of 100 into a no-op sink.

    python bench/bench_outbox.py
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.outbox import Outbox, OutboxHook, Relay, SQLiteOutbox

POSTGRES_URL = os.environ.get(
    "AGENTSTATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("AGENTSTATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
TURNS = 2_000
JOBS = 10_000


@contextmanager
def sqlite() -> Iterator[Outbox]:
    with tempfile.TemporaryDirectory() as tmp:
        outbox = SQLiteOutbox(os.path.join(tmp, "outbox.db"))
        yield outbox
        outbox.close()


@contextmanager
def postgres() -> Iterator[Outbox]:
    import psycopg

    from agentstate_reducer.outbox import PostgresOutbox

    table = f"outbox_bench_{uuid.uuid4().hex[:8]}"
    outbox = PostgresOutbox(POSTGRES_URL, table=table)
    try:
        yield outbox
    finally:
        outbox.close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


@contextmanager
def redis_() -> Iterator[Outbox]:
    from agentstate_reducer.outbox import RedisOutbox

    prefix = f"agentstate-bench:{uuid.uuid4().hex[:8]}"
    outbox = RedisOutbox(REDIS_URL, prefix=prefix)
    try:
        yield outbox
    finally:
        for key in outbox.client.scan_iter(match=f"{prefix}:*"):  # type: ignore[attr-defined]
            outbox.client.delete(key)  # type: ignore[attr-defined]
        outbox.close()


def agent_loop(hook: Callable[[list[Any], Any], Any]) -> tuple[float, int]:
    """Seconds for TURNS reduce() calls (a user and an assistant message each), and how
    many of them pruned."""
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=20, max_messages=40, on_prune=[hook])
    )
    state: list[Any] = [{"role": "system", "content": "You are an agent.", "id": "sys"}]
    pruning = 0
    t0 = time.perf_counter()
    for turn in range(TURNS):
        new = [
            {"role": "user", "content": f"question {turn} " * 8, "id": f"u{turn}"},
            {"role": "assistant", "content": f"answer {turn} " * 10, "id": f"a{turn}"},
        ]
        result = reducer.reduce(state, new, namespace=("memories", "bench"))
        pruning += bool(result.pruned)
        state = result.surviving
    return time.perf_counter() - t0, pruning


class Timed:
    """``OutboxHook(outbox)`` that records how long each enqueue took."""

    def __init__(self, outbox: Outbox) -> None:
        self.hook = OutboxHook(outbox)
        self.seconds: list[float] = []

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        t0 = time.perf_counter()
        self.hook(pruned, namespace)
        self.seconds.append(time.perf_counter() - t0)

    def percentiles(self) -> tuple[float, float]:
        """Median and 99th percentile, in milliseconds."""
        cuts = statistics.quantiles(self.seconds, n=100, method="inclusive")
        return statistics.median(self.seconds) * 1000, cuts[98] * 1000


def postgres_floor(outbox: Outbox, calls: int = 600) -> str:
    """Enqueue latency against one bare INSERT commit of the same rows, interleaved."""
    import psycopg

    table = f"outbox_floor_{uuid.uuid4().hex[:8]}"
    enqueue: list[float] = []
    floor: list[float] = []
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (k text PRIMARY KEY, p text)")
        insert = f"INSERT INTO {table} SELECT * FROM unnest(%s::text[], %s::text[])"
        try:
            for i in range(calls):
                batch = [{"role": "user", "content": "x" * 200, "id": f"f{i}.{j}"}
                         for j in range(20)]
                t0 = time.perf_counter()
                outbox.enqueue(batch, ("memories", "floor"))
                t1 = time.perf_counter()
                conn.execute(insert, ([m["id"] for m in batch], [m["content"] for m in batch]))
                t2 = time.perf_counter()
                enqueue.append(t1 - t0)
                floor.append(t2 - t1)
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {table}")

    def cut(xs: list[float]) -> tuple[float, float]:
        return statistics.median(xs) * 1000, statistics.quantiles(xs, n=100)[98] * 1000

    (e50, e99), (f50, f99) = cut(enqueue), cut(floor)
    return (
        f"PostgreSQL, {calls} enqueues of 20 messages interleaved with a bare INSERT commit "
        f"of the same rows: enqueue p50 {e50:.2f} ms, p99 {e99:.2f} ms; bare commit p50 "
        f"{f50:.2f} ms, p99 {f99:.2f} ms (enqueue / floor: p50 {e50 / f50:.2f}x, "
        f"p99 {e99 / f99:.2f}x)"
    )


def relay_rate(outbox: Outbox) -> float:
    for start in range(0, JOBS, 500):
        ids = range(start, start + 500)
        jobs = [{"role": "user", "content": "x" * 200, "id": f"j{i}"} for i in ids]
        outbox.enqueue(jobs, ("memories", "relay"))
    relay = Relay(outbox, lambda messages, namespace: None, batch=100)
    t0 = time.perf_counter()
    while relay.run_once().claimed:
        pass
    return JOBS / (time.perf_counter() - t0)


def main() -> None:
    plain, pruning = agent_loop(lambda pruned, ns: None)
    print(
        f"{TURNS} reduce() calls, {pruning} of them pruning ~20 messages; "
        f"in-memory hook: {plain * 1000 / TURNS:.3f} ms/call"
    )
    for name, backend in (("SQLite", sqlite), ("PostgreSQL", postgres), ("Redis", redis_)):
        try:
            with backend() as outbox:
                durable, _ = agent_loop(OutboxHook(outbox))
                stored = outbox.counts()["ready"]
            with backend() as outbox:
                timed = Timed(outbox)
                agent_loop(timed)
                floor = postgres_floor(outbox) if name == "PostgreSQL" else ""
            with backend() as fresh:
                rate = relay_rate(fresh)
        except Exception as exc:  # an unreachable server or a missing driver
            print(f"{name}: skipped ({type(exc).__name__}: {str(exc)[:80]})")
            continue
        extra = (durable - plain) * 1000 / pruning
        p50, p99 = timed.percentiles()
        print(
            f"{name}: OutboxHook adds {extra:.2f} ms per pruning reduce() "
            f"({durable / plain:.1f}x the loop with an in-memory hook; {stored} messages "
            f"stored); enqueue p50 {p50:.2f} ms, p99 {p99:.2f} ms ({len(timed.seconds)} "
            f"calls); relay drains {rate:,.0f} jobs/s"
        )
        if floor:
            print(floor)


if __name__ == "__main__":
    main()
