"""The outbox: one contract every backend passes, then OutboxHook, Relay and the reducer.

PostgreSQL and Redis run when reachable (AGENTSTATE_TEST_POSTGRES_URL,
AGENTSTATE_TEST_REDIS_URL) and skip otherwise. Each test uses its own table or key
prefix and removes it, so reruns and parallel runs do not collide.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from histories import ai, human, results, system
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import agentstate_reducer.outbox as outbox_pkg
from agentstate_reducer import (
    ClearToolResults,
    MessageFormatError,
    MessageReducer,
    OutboxError,
    ReducerConfig,
    UnstorableError,
)
from agentstate_reducer.outbox import (
    AsyncOutboxHook,
    Job,
    Outbox,
    OutboxHook,
    Relay,
    RelayRound,
    SQLiteOutbox,
)
from agentstate_reducer.outbox.base import (
    MAX_DEPTH,
    TAG,
    Row,
    decode_message,
    encode_message,
    message_key,
)

POSTGRES_URL = os.environ.get(
    "AGENTSTATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("AGENTSTATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
NS = ("memories", "alice")


def batch(n: int, *, start: int = 0, prefix: str = "m") -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"message {i}", "id": f"{prefix}{i}"}
        for i in range(start, start + n)
    ]


def ids(jobs: list[Job]) -> list[str]:
    return [job.key for job in jobs]


class Sink:
    """An idempotent long-term memory: one entry per (namespace, message id)."""

    def __init__(self) -> None:
        self.entries: dict[tuple[Any, str], Any] = {}
        #: Every delivery, so tests can tell at-least-once from exactly-once.
        self.deliveries: Counter[tuple[Any, str]] = Counter()
        self.lock = threading.Lock()

    def __call__(self, messages: list[Any], namespace: Any) -> None:
        with self.lock:
            for message in messages:
                ident = message["id"] if isinstance(message, dict) else message.id
                self.entries[(namespace, ident)] = message
                self.deliveries[(namespace, ident)] += 1


def drain(outbox: Outbox, deliver: Callable[[list[Any], Any], Any]) -> int:
    relay = Relay(outbox, deliver, batch=50, retry_delay=0)
    delivered = 0
    while True:
        done = relay.run_once()
        delivered += done.delivered
        if done.claimed == 0:
            return delivered


# -- running an outbox in another process -----------------------------------------------

PRELUDE = """
import json, sys, time
import agentstate_reducer.outbox as ob
spec = json.loads(sys.argv[1])
outbox = getattr(ob, spec["cls"])(**spec["kwargs"])
"""

CLAIMER = """
print("ready", flush=True)
sys.stdin.readline()
got = []
while True:
    jobs = outbox.claim(2, 30)
    if not jobs:
        break
    got += [job.id for job in jobs]
    time.sleep(0.02)  # "delivering"
print(json.dumps(got), flush=True)
"""

PRUNER = """
from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.outbox import OutboxHook
history = json.loads(sys.argv[2])
config = ReducerConfig(min_messages=5, max_messages=10, on_prune=[OutboxHook(outbox)])
print("ready", flush=True)
sys.stdin.readline()
result = MessageReducer(config=config).reduce(history, namespace=["memories", "alice"])
print(json.dumps([m["id"] for m in result.pruned]), flush=True)
time.sleep(60)  # killed here: after the enqueue, before any delivery
"""

READ_ONLY_CHILD = """
import json, os, sys
import agentstate_reducer.outbox.sqlite
from agentstate_reducer.outbox import SQLiteOutbox
if sys.argv[2] == "True":
    os.setgid(65534)
    os.setuid(65534)
outbox = SQLiteOutbox(sys.argv[1])
found = {"counts": outbox.counts(), "read_only": outbox.read_only}
found["get"] = outbox.get("m1", ["memories", "alice"]).message["content"]
found["dead"] = [job.key for job in outbox.dead_letters()]
for name, call in (("enqueue", lambda: outbox.enqueue([{"role": "user", "content": "x"}])),
                   ("claim", lambda: outbox.claim(1))):
    try:
        call()
        found[name] = "no error"
    except Exception as exc:
        found[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(found))
"""

HANGING_RELAY = """
from agentstate_reducer.outbox import Relay
def deliver(messages, namespace):
    print(json.dumps([m["id"] for m in messages]), flush=True)
    time.sleep(60)  # killed here: after the claim, before the ack
Relay(outbox, deliver, lease_seconds=float(sys.argv[2])).run_once()
"""


@dataclass
class Backend:
    """How to build one backend's outbox here and in a child process."""

    cls: str
    kwargs: dict[str, Any]
    created: list[Outbox] = field(default_factory=list)

    def make(self, **extra: Any) -> Outbox:
        outbox: Outbox = getattr(outbox_pkg, self.cls)(**{**self.kwargs, **extra})
        self.created.append(outbox)
        return outbox

    def spawn(self, script: str, *args: str) -> subprocess.Popen[str]:
        spec = json.dumps({"cls": self.cls, "kwargs": self.kwargs})
        return subprocess.Popen(
            [sys.executable, "-c", PRELUDE + textwrap.dedent(script), spec, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def close(self) -> None:
        for outbox in self.created:
            outbox.close()


def read_line(child: subprocess.Popen[str]) -> str:
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line:
        assert child.stderr is not None
        raise AssertionError(f"child exited early: {child.stderr.read()}")
    return line.strip()


def kill(child: subprocess.Popen[str]) -> None:
    if child.poll() is None:
        os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=10)


# -- the contract ------------------------------------------------------------------------


class OutboxContract:
    """What every backend guarantees; a subclass provides the ``backend`` fixture."""

    @pytest.fixture
    def outbox(self, backend: Backend) -> Outbox:
        return backend.make()

    # enqueue

    def test_enqueue_stores_each_message_once(self, outbox: Outbox) -> None:
        assert outbox.enqueue(batch(5), NS) == 5
        assert outbox.enqueue(batch(5), NS) == 0
        assert outbox.enqueue(batch(3, start=4), NS) == 2
        assert outbox.counts() == {"ready": 7, "claimed": 0, "done": 0, "failed": 0}

    def test_repeats_within_one_batch_are_stored_once(self, outbox: Outbox) -> None:
        assert outbox.enqueue(batch(2) + batch(2), NS) == 2
        assert ids(outbox.claim(10)) == ["m0", "m1"]

    def test_the_same_id_in_two_namespaces_is_two_jobs(self, outbox: Outbox) -> None:
        assert outbox.enqueue(batch(2), NS) == 2
        assert outbox.enqueue(batch(2), ("memories", "bob")) == 2
        # A list and a tuple are the same namespace.
        assert outbox.enqueue(batch(2), ["memories", "bob"]) == 0
        assert outbox.enqueue(batch(2)) == 2
        jobs = outbox.claim(10)
        assert [job.namespace for job in jobs] == [NS] * 2 + [("memories", "bob")] * 2 + [None] * 2

    def test_messages_without_an_id_are_keyed_by_content(self, outbox: Outbox) -> None:
        plain = [{"role": "user", "content": "hi"}, {"content": "hi", "role": "user"}]
        assert outbox.enqueue(plain, NS) == 1
        assert outbox.enqueue([{"role": "user", "content": "hi!"}], NS) == 1
        keys = ids(outbox.claim(10))
        assert len(set(keys)) == 2 and all(k.startswith("sha256:") for k in keys)

    def test_enqueue_is_all_or_nothing(self, outbox: Outbox) -> None:
        bad = [*batch(2), object()]
        with pytest.raises(MessageFormatError, match="index 2"):
            outbox.enqueue(bad, NS)
        with pytest.raises(UnstorableError, match=r"index 1, field \['when'\].*object"):
            outbox.enqueue([batch(1)[0], {"id": "x", "when": object()}], NS)
        with pytest.raises(UnstorableError, match=r"namespace part \[1\] is <object"):
            outbox.enqueue(batch(1), ("memories", object()))
        assert sum(outbox.counts().values()) == 0

    def test_round_trip_of_dicts_and_langchain_messages(self, outbox: Outbox) -> None:
        messages: list[Any] = [
            {"role": "user", "content": [{"type": "text", "text": "héllo ✓"}], "id": "d1"},
            {"role": "assistant", "content": None, "id": "d2", "meta": {"n": 1.5, "ok": True}},
            SystemMessage(content="be brief", id="s"),
            HumanMessage(content="what is 2+2?", id="h"),
            AIMessage(
                content="",
                id="a",
                tool_calls=[{"name": "calc", "args": {"expr": "2+2"}, "id": "c1"}],
            ),
            ToolMessage(content="4", tool_call_id="c1", id="t"),
        ]
        assert outbox.enqueue(messages, NS) == len(messages)
        jobs = outbox.claim(10)
        assert [job.message for job in jobs] == messages
        assert [type(job.message) for job in jobs] == [type(m) for m in messages]

    def test_what_json_lacks_is_stored_losslessly(self, outbox: Outbox) -> None:
        messages: list[Any] = [
            {"role": "user", "content": b"\x00\xffraw", "id": "bytes"},
            {"role": "user", "content": "lone \ud800 surrogate", "id": "id \udfff"},
            {"role": "user", "content": "nul", "id": "id\x00nul"},
            {"role": "user", "content": "int id", "id": 1},
            {"role": "user", "content": "str id", "id": "1"},
            {"role": "user", "content": "looks encoded", "id": 'json:"1"'},
            {"role": "user", "content": {1: "int key", TAG: "the tag key"}, "id": "keys"},
            HumanMessage(content=[{"type": "file", "data": b"%PDF"}], id="lc-bytes"),
        ]
        namespace = ("memories", "nul\x00 and \ud800")
        assert outbox.enqueue(messages, namespace) == len(messages)
        assert outbox.enqueue(messages, namespace) == 0
        jobs = outbox.claim(20)
        assert [job.message for job in jobs] == messages
        assert {job.namespace for job in jobs} == {namespace}
        assert len({job.key for job in jobs}) == len(messages)  # 1 and "1" stay apart

    def test_nesting_past_the_limit_is_refused_clearly(self, outbox: Outbox) -> None:
        deep: Any = "leaf"
        for _ in range(MAX_DEPTH - 1):
            deep = [deep]
        assert outbox.enqueue([{"role": "user", "content": deep, "id": "ok"}], NS) == 1
        for _ in range(1000):
            deep = {"k": deep}
        with pytest.raises(UnstorableError, match=r"index 1, field \['content'\]\['k'\]\['k'\]"
                           r"\.\.\.: the outbox cannot store nesting deeper than 100 levels"):
            outbox.enqueue([batch(1)[0], {"role": "user", "content": deep, "id": "x"}], NS)
        assert outbox.counts()["ready"] == 1

    async def test_a_cancelled_areduce_loses_and_duplicates_nothing(
        self, outbox: Outbox
    ) -> None:
        """Cancelled (a timed-out LangGraph run) before, then while, the outbox stores."""
        insert = outbox._insert
        storing = threading.Event()
        calls: list[str] = []

        def slow_insert(rows: list[Row]) -> int:
            storing.set()
            time.sleep(0.3)
            return insert(rows)

        async def first(pruned: list[Any], namespace: Any) -> None:
            calls.append("first")
            if len(calls) == 1:
                await asyncio.sleep(30)  # the first run is cancelled here

        outbox._insert = slow_insert  # type: ignore[method-assign]
        hooks = [first, AsyncOutboxHook(outbox)]
        config = ReducerConfig(min_messages=2, max_messages=4, on_prune=hooks)
        reducer = MessageReducer(config=config)
        history = batch(6)
        for cancel_when in (lambda: len(calls) == 1, storing.is_set):
            task = asyncio.create_task(reducer.areduce(history, namespace=NS))
            while not cancel_when() and not task.done():
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        result = await reducer.areduce(history, namespace=NS)  # the step is retried
        await asyncio.sleep(0.5)  # a cancelled store finishes in its thread
        sink = Sink()
        drain(outbox, sink)
        assert sorted(i for _, i in sink.deliveries) == sorted(m["id"] for m in result.pruned)
        assert set(sink.deliveries.values()) == {1}
        assert calls == ["first"] * 3

    @pytest.mark.slow
    def test_two_relays_with_a_delivery_slower_than_the_lease(self, outbox: Outbox) -> None:
        """2.5 lease lengths per delivery: each message once, none dead-lettered."""
        outbox.enqueue(batch(6), NS)
        sink = Sink()

        def slow(messages: list[Any], namespace: Any) -> None:
            time.sleep(1.0)
            sink(messages, namespace)

        stop = threading.Event()
        relays = [Relay(outbox, slow, batch=3, lease_seconds=0.4, poll_interval=0.05)] * 2
        threads = [threading.Thread(target=r.run_forever, args=(stop,)) for r in relays]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 20
        while outbox.counts()["done"] < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        for thread in threads:
            thread.join(10)
        assert set(sink.deliveries.values()) == {1} and len(sink.deliveries) == 6
        assert outbox.counts() == {"ready": 0, "claimed": 0, "done": 6, "failed": 0}

    def test_renew_extends_only_leases_still_held(self, outbox: Outbox) -> None:
        outbox.enqueue(batch(2), NS)
        jobs = outbox.claim(10, 0.3)
        assert outbox.renew(jobs, 30) == 2
        time.sleep(0.4)
        assert outbox.claim(10, 30) == []  # renewed: still held
        assert outbox.ack(jobs) == 2
        assert outbox.renew(jobs, 30) == 0
        assert outbox.renew([], 30) == 0

    def test_one_poison_message_does_not_take_its_batch_down(self, backend: Backend) -> None:
        outbox = backend.make(max_attempts=1)
        outbox.enqueue(batch(30), NS)
        sink = Sink()
        calls = 0

        def picky(messages: list[Any], namespace: Any) -> None:
            nonlocal calls
            calls += 1
            if any(m["id"] == "m17" for m in messages):
                raise ValueError("the store rejects m17")
            sink(messages, namespace)

        assert Relay(outbox, picky, retry_delay=0).run_once() == RelayRound(30, 29, 1)
        assert len(sink.entries) == 29 and calls < 30  # bisected, not one call each
        (dead,) = outbox.dead_letters()
        assert dead.key == "m17" and dead.last_error == "ValueError: the store rejects m17"
        assert outbox.revive() == 1
        assert ids(outbox.claim(10)) == ["m17"]  # revived alone, not with its old group

    def test_a_corrupted_envelope_is_dead_lettered_alone(self, backend: Backend) -> None:
        outbox = backend.make()
        outbox.enqueue(batch(3), NS)
        outbox.enqueue(batch(10, prefix="o"), ("other",))
        broken = self.corrupt(backend, outbox, "m1")
        sink = Sink()
        assert Relay(outbox, sink).run_once() == RelayRound(13, 12, 1)
        assert len(sink.entries) == 12 and (NS, "m1") not in sink.entries
        (dead,) = outbox.dead_letters()
        assert dead.id == broken and dead.decode_error is not None
        assert dead.last_error is not None and "cannot be decoded" in dead.last_error
        assert outbox.discard([dead]) == 1
        assert outbox.dead_letters() == []
        assert outbox.counts() == {"ready": 0, "claimed": 0, "done": 13, "failed": 0}

    def corrupt(self, backend: Backend, outbox: Outbox, key: str) -> int:
        """Break the stored envelope of the job with ``key``; return its id."""
        raise NotImplementedError

    def test_a_dead_letter_can_be_edited_and_revived(self, backend: Backend) -> None:
        outbox = backend.make(max_attempts=1)
        outbox.enqueue(batch(2), NS)
        jobs = outbox.claim(10)
        assert outbox.fail(jobs[0], "rejected", dead=True) == "failed"
        assert outbox.edit(jobs[1], {"role": "user", "content": "x"}) is False  # not dead
        assert outbox.ack(jobs[1:]) == 1
        (dead,) = outbox.dead_letters()
        fixed = {"role": "user", "content": "fixed", "id": "m0"}
        assert outbox.edit(dead, fixed) is True
        assert outbox.revive([dead]) == 1
        (again,) = outbox.claim(10)
        assert again.message == fixed and again.key == "m0"

    def test_threads_that_end_leave_no_connection_open(self, backend: Backend) -> None:
        outbox = backend.make()
        outbox.enqueue(batch(1), NS)
        before = self.open_connections(backend, outbox)

        def use() -> None:
            outbox.counts()

        for _ in range(6):
            threads = [threading.Thread(target=use) for _ in range(10)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
        # 60 threads, at most 10 at once: what stays open is bounded by the peak, never
        # one connection per thread that ever used the outbox.
        assert self.open_connections(backend, outbox) <= max(before, 10)
        outbox.close()
        # A server ends a closed session's backend on its own schedule: poll for it.
        deadline = time.monotonic() + 10
        while self.open_connections(backend, outbox) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.open_connections(backend, outbox) == 0

    def open_connections(self, backend: Backend, outbox: Outbox) -> int:
        raise NotImplementedError

    def test_a_closed_outbox_is_a_context_manager_and_refuses_work(
        self, backend: Backend
    ) -> None:
        with backend.make() as outbox:
            assert outbox.enqueue(batch(1), NS) == 1
        with pytest.raises(OutboxError):
            outbox.enqueue(batch(1, start=1), NS)

    # claim

    def test_claim_leases_the_oldest_jobs_first(self, outbox: Outbox) -> None:
        outbox.enqueue(batch(3), NS)
        outbox.enqueue(batch(3, start=3), ("other",))
        outbox.enqueue(batch(2, start=6), NS)
        first = outbox.claim(4, 30)
        assert ids(first) == ["m0", "m1", "m2", "m3"]
        assert [job.id for job in first] == sorted(job.id for job in first)
        assert {job.attempts for job in first} == {1}
        assert len({job.lease for job in first}) == 1 and first[0].lease
        second = outbox.claim(10, 300)
        assert ids(second) == ["m4", "m5", "m6", "m7"]
        # Leases run on the backend's clock, which may differ from ours.
        assert 260 < second[0].lease_expires - first[0].lease_expires < 280
        assert outbox.counts() == {"ready": 0, "claimed": 8, "done": 0, "failed": 0}

    def test_a_held_lease_is_not_claimed_again(self, outbox: Outbox) -> None:
        outbox.enqueue(batch(3), NS)
        assert len(outbox.claim(10, 30)) == 3
        assert outbox.claim(10, 30) == []

    def test_an_expired_lease_is_reclaimed_and_the_old_claim_goes_stale(
        self, outbox: Outbox
    ) -> None:
        outbox.enqueue(batch(2), NS)
        old = outbox.claim(10, 0.2)
        time.sleep(0.3)
        new = outbox.claim(10, 30)
        assert ids(new) == ["m0", "m1"]
        assert [job.attempts for job in new] == [2, 2]
        assert new[0].lease != old[0].lease
        assert outbox.ack(old) == 0
        assert outbox.fail(old[0], "late") is None
        assert outbox.ack(new) == 2

    def test_an_expired_lease_nobody_reclaimed_can_still_be_acked(self, outbox: Outbox) -> None:
        outbox.enqueue(batch(1), NS)
        jobs = outbox.claim(1, 0.1)
        time.sleep(0.2)
        assert outbox.ack(jobs) == 1
        assert outbox.claim(10) == []

    def test_claims_are_exclusive_across_threads(self, backend: Backend) -> None:
        backend.make().enqueue(batch(60), NS)
        claimed: list[list[int]] = []

        def worker() -> None:
            outbox = backend.make()
            got: list[int] = []
            while jobs := outbox.claim(2, 30):
                got += [job.id for job in jobs]
            claimed.append(got)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        every = [job_id for got in claimed for job_id in got]
        assert len(claimed) == 4
        assert len(every) == len(set(every)) == 60

    @pytest.mark.slow
    def test_claims_are_exclusive_across_processes(self, backend: Backend) -> None:
        outbox = backend.make()
        outbox.enqueue(batch(60), NS)
        children = [backend.spawn(CLAIMER) for _ in range(2)]
        try:
            for child in children:
                assert read_line(child) == "ready"
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            claimed = [json.loads(read_line(child)) for child in children]
        finally:
            for child in children:
                child.communicate(timeout=30)
        assert all(claimed), claimed  # both took part
        assert not set(claimed[0]) & set(claimed[1])
        assert len(claimed[0]) + len(claimed[1]) == 60
        assert outbox.counts()["claimed"] == 60

    # ack, fail, dead letters

    def test_ack_marks_done_and_done_keys_stay_deduplicated(self, outbox: Outbox) -> None:
        outbox.enqueue(batch(3), NS)
        jobs = outbox.claim(10)
        assert outbox.ack(jobs[:2]) == 2
        assert outbox.ack(jobs[:2]) == 0
        assert outbox.counts() == {"ready": 0, "claimed": 1, "done": 2, "failed": 0}
        assert outbox.enqueue(batch(3), NS) == 0
        assert outbox.ack([]) == 0

    def test_fail_retries_then_dead_letters(self, backend: Backend) -> None:
        outbox = backend.make(max_attempts=2)
        outbox.enqueue(batch(1), NS)
        assert outbox.fail(outbox.claim()[0], ValueError("store down")) == "ready"
        job = outbox.claim()[0]
        assert job.attempts == 2
        assert outbox.fail(job, "still down") == "failed"
        assert outbox.claim() == []
        assert outbox.counts() == {"ready": 0, "claimed": 0, "done": 0, "failed": 1}
        (dead,) = outbox.dead_letters()
        assert (dead.key, dead.status, dead.attempts) == ("m0", "failed", 2)
        assert dead.last_error == "still down"
        assert dead.message == batch(1)[0]
        # A dead letter still holds its key.
        assert outbox.enqueue(batch(1), NS) == 0
        assert outbox.revive() == 1
        assert outbox.revive([dead]) == 0
        revived = outbox.claim()
        assert ids(revived) == ["m0"] and revived[0].attempts == 1

    def test_fail_records_the_exception_type_and_bounds_its_text(self, backend: Backend) -> None:
        outbox = backend.make(max_attempts=1)
        outbox.enqueue(batch(1), NS)
        assert outbox.fail(outbox.claim()[0], ValueError("x" * 5000)) == "failed"
        (dead,) = outbox.dead_letters()
        assert dead.last_error == "ValueError: " + "x" * (2000 - len("ValueError: "))

    def test_retry_after_delays_the_next_claim(self, outbox: Outbox) -> None:
        outbox.enqueue(batch(1), NS)
        assert outbox.fail(outbox.claim()[0], "later", retry_after=1.0) == "ready"
        assert outbox.claim() == []
        time.sleep(1.1)
        assert ids(outbox.claim()) == ["m0"]

    def test_a_lease_expiring_at_max_attempts_dead_letters(self, backend: Backend) -> None:
        outbox = backend.make(max_attempts=1)
        outbox.enqueue(batch(2), NS)
        outbox.claim(1, 0.1)
        time.sleep(0.2)
        assert ids(outbox.claim(10)) == ["m1"]
        (dead,) = outbox.dead_letters()
        assert dead.key == "m0"
        assert dead.last_error == "lease expired after 1 attempt(s)"

    def test_purge_forgets_done_jobs(self, outbox: Outbox) -> None:
        outbox.enqueue(batch(2), NS)
        outbox.ack(outbox.claim(1))
        assert outbox.purge(3600) == 0
        time.sleep(0.05)
        assert outbox.purge(0) == 1
        assert outbox.counts() == {"ready": 1, "claimed": 0, "done": 0, "failed": 0}
        assert outbox.enqueue(batch(2), NS) == 1  # its key is free again

    # get: the way back to a stored message

    def test_get_finds_a_job_in_every_status_until_it_is_purged(self, outbox: Outbox) -> None:
        outbox.enqueue(batch(4), NS)
        outbox.enqueue(batch(1), ("memories", "bob"))
        first = outbox.get("m0", NS)
        assert first is not None and first.status == "ready" and first.namespace == NS
        assert outbox.get("m9", NS) is None and outbox.get("m1", ("memories", "bob")) is None
        claimed = outbox.claim(3)
        assert outbox.ack(claimed[:1]) == 1
        assert outbox.fail(claimed[1], "boom", dead=True) == "failed"
        found = {k: outbox.get(k, NS) for k in ("m0", "m1", "m2", "m3")}
        assert {k: job.status for k, job in found.items() if job} == {
            "m0": "done", "m1": "failed", "m2": "claimed", "m3": "ready"
        }
        assert [job.message for job in found.values() if job] == batch(4)
        assert found["m1"] is not None and found["m1"].last_error == "boom"
        # A look-up never hands out the lease token of someone else's claim.
        assert found["m2"] is not None and found["m2"].lease == ""
        assert outbox.ack([found["m2"]]) == 0
        assert outbox.counts() == {"ready": 2, "claimed": 1, "done": 1, "failed": 1}
        time.sleep(0.05)
        assert outbox.purge(0) == 1
        assert outbox.get("m0", NS) is None

    def test_get_takes_a_message_id_as_enqueue_keys_it(self, outbox: Outbox) -> None:
        outbox.enqueue([{"role": "user", "content": "one", "id": 1}], NS)
        job = outbox.get(1, NS)
        assert job is not None and job.message["content"] == "one"
        assert outbox.get("1", NS) is None
        with pytest.raises(TypeError, match="ident must be a message id"):
            outbox.get(None, NS)

    def test_an_edited_original_is_read_back_by_its_handle(self, outbox: Outbox) -> None:
        """The way back from the outbox: a placeholder's handle names the stored original
        while its job is pending, and after the relay delivered it, until purge."""
        original = "result 0: " + "lorem ipsum dolor sit amet " * 40
        history: list[Any] = [
            human("openai", "look it up", "h0"),
            ai("openai", "", "a0", ["c0"]),
            {**results("openai", ["c0"], "t0")[0], "content": original},
            ai("openai", "found it", "b0"),
            human("openai", "again", "h1"),
        ]
        config = ReducerConfig(
            max_tokens=120,
            token_counter="approximate",
            context_edits=[ClearToolResults(keep=0)],
            on_prune=[OutboxHook(outbox)],
        )
        result = MessageReducer(config=config).reduce(history, namespace=NS)
        [edit] = result.edited
        assert edit.handle in result.surviving[2]["content"] and not result.pruned
        assert outbox.original(edit.handle, NS) == original
        assert outbox.original(edit.handle, ("memories", "bob")) is None
        assert outbox.original("ctx_0000000000000000", NS) is None
        outbox.enqueue(batch(1), NS)
        assert outbox.original("m0", NS) is None  # stored, but not an edited original
        sink = Sink()
        assert Relay(outbox, sink).run_once().delivered == 2
        assert sink.entries[(NS, edit.handle)]["content"] == original
        assert outbox.original(edit.handle, NS) == original  # done, not purged yet
        with pytest.raises(TypeError, match="handle must be a non-empty string"):
            outbox.original("", NS)

    def test_storage_errors_become_outbox_errors(self, backend: Backend) -> None:
        with pytest.raises(OutboxError) as info:
            self.broken(backend).enqueue(batch(1), NS)
        assert info.value.__cause__ is not None

    def broken(self, backend: Backend) -> Outbox:
        raise NotImplementedError

    # crashes

    @pytest.mark.slow
    def test_two_pruners_killed_after_enqueue_lose_and_duplicate_nothing(
        self, backend: Backend
    ) -> None:
        history = [{"role": "system", "content": "sys", "id": "s"}, *batch(30)]
        children = [backend.spawn(PRUNER, json.dumps(history)) for _ in range(2)]
        try:
            for child in children:
                assert read_line(child) == "ready"
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            pruned = [json.loads(read_line(child)) for child in children]
        finally:
            for child in children:
                kill(child)
        assert [child.returncode for child in children] == [-signal.SIGKILL] * 2
        assert pruned[0] == pruned[1] and len(pruned[0]) == 25
        sink = Sink()
        assert drain(backend.make(), sink) == 25
        assert sorted(ident for _, ident in sink.deliveries) == sorted(pruned[0])
        assert set(sink.deliveries.values()) == {1}
        assert {ns for ns, _ in sink.deliveries} == {NS}

    @pytest.mark.slow
    def test_a_relay_killed_before_ack_is_redelivered_after_the_lease(
        self, backend: Backend
    ) -> None:
        outbox = backend.make()
        outbox.enqueue(batch(4), NS)
        child = backend.spawn(HANGING_RELAY, "1.5")
        try:
            assert json.loads(read_line(child)) == ["m0", "m1", "m2", "m3"]
        finally:
            kill(child)
        assert child.returncode == -signal.SIGKILL
        assert outbox.claim(10, 30) == []  # the dead relay's lease still holds
        time.sleep(1.6)
        sink = Sink()
        jobs = outbox.claim(10, 30)
        assert [job.attempts for job in jobs] == [2, 2, 2, 2]
        sink([job.message for job in jobs], jobs[0].namespace)
        assert outbox.ack(jobs) == 4
        assert sorted(ident for _, ident in sink.entries) == ["m0", "m1", "m2", "m3"]

    # end to end

    def test_every_pruned_message_reaches_the_sink_exactly_once(self, backend: Backend) -> None:
        """A 150-turn agent, a relay draining concurrently, and a restart mid-way."""
        outbox = backend.make()
        sink = Sink()
        relay = Relay(outbox, sink, batch=7, poll_interval=0.01)
        stop = threading.Event()
        thread = threading.Thread(target=relay.run_forever, args=(stop,))
        thread.start()
        config = ReducerConfig(min_messages=12, max_messages=30, on_prune=[OutboxHook(outbox)])
        reducer = MessageReducer(config=config)
        state: list[Any] = [system("langchain", "sys", "sys")]
        pruned: list[Any] = []
        steps: list[tuple[list[Any], list[Any]]] = []
        try:
            for turn in range(150):
                shape = ("openai", "langchain", "anthropic")[turn % 3]
                calls = [f"c{turn}.{k}" for k in range(turn % 3)]
                new = [human(shape, f"question {turn}", f"h{turn}")]
                if calls:
                    new += [ai(shape, "", f"a{turn}c", calls), *results(shape, calls, f"r{turn}")]
                new.append(ai(shape, f"answer {turn}", f"a{turn}"))
                result = reducer.reduce(state, new, namespace=NS)
                pruned += result.pruned
                steps.append((state, new))
                state = result.surviving
                if turn == 100:
                    # A restarted process replays turns whose checkpoint it never saw.
                    reducer = MessageReducer(config=config)
                    for old, again in steps[-30:]:
                        reducer.reduce(old, again, namespace=NS)
        finally:
            stop.set()
            thread.join(30)
        drain(outbox, sink)
        expected = [m["id"] if isinstance(m, dict) else m.id for m in pruned]
        assert len(expected) == len(set(expected)) > 300
        assert sorted(ident for _, ident in sink.entries) == sorted(expected)
        assert set(sink.deliveries.values()) == {1}
        assert outbox.counts() == {"ready": 0, "claimed": 0, "done": len(expected), "failed": 0}
        by_id = {(m["id"] if isinstance(m, dict) else m.id): m for m in pruned}
        assert all(sink.entries[(NS, ident)] == by_id[ident] for ident in expected)


# -- the backends --------------------------------------------------------------------------


class StallingProxy:
    """A TCP proxy on 127.0.0.1 that can stop forwarding, like a server that hangs."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.sockets.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self.flowing.wait()  # a new connection hangs too
        upstream = socket.create_connection(self.target)
        self.sockets.append(upstream)
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self.flowing.wait()  # stalled: the bytes are held, nothing is refused
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def stall(self) -> None:
        self.flowing.clear()

    def resume(self) -> None:
        self.flowing.set()

    def close(self) -> None:
        self.flowing.set()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()


class StallContract:
    """A server that stops answering: every call raises OutboxError within its timeout."""

    def via(self, proxy: StallingProxy) -> dict[str, Any]:
        raise NotImplementedError

    def target(self) -> tuple[str, int]:
        raise NotImplementedError

    @pytest.mark.slow
    def test_a_stalled_server_raises_within_the_timeout(self, backend: Backend) -> None:
        proxy = StallingProxy(self.target())
        try:
            outbox = backend.make(**self.via(proxy), timeout=1, connect_timeout=1)
            reducer = MessageReducer(
                config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[OutboxHook(outbox)])
            )
            assert outbox.enqueue(batch(1), NS) == 1  # through the proxy
            proxy.stall()
            started = time.monotonic()
            with pytest.raises(OutboxError):  # an open connection, then the server hangs
                reducer.reduce(batch(6, start=10), namespace=NS)
            with pytest.raises(OutboxError):  # a new connection to a hung server
                backend.make(**self.via(proxy), timeout=1, connect_timeout=1).counts()
            took = time.monotonic() - started
            assert took < 8, took
            proxy.resume()
            result = reducer.reduce(batch(6, start=10), namespace=NS)  # the retried step
            assert outbox.counts()["ready"] == 1 + len(result.pruned)
        finally:
            proxy.close()


def _readlink(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


class TestSQLiteOutbox(OutboxContract):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> Iterator[Backend]:
        backend = Backend(
            "SQLiteOutbox", {"path": str(tmp_path / "outbox.db"), "table": unique("outbox")}
        )
        yield backend
        backend.close()

    def broken(self, backend: Backend) -> Outbox:
        return backend.make(path=str(Path(backend.kwargs["path"]).parent / "missing" / "x.db"))

    def corrupt(self, backend: Backend, outbox: Outbox, key: str) -> int:
        with sqlite3.connect(backend.kwargs["path"]) as conn:
            table = backend.kwargs["table"]
            (job_id,) = conn.execute(f"SELECT id FROM {table} WHERE msg_key = ?", (key,)).fetchone()
            conn.execute(f"UPDATE {table} SET namespace = '[\"half' WHERE id = ?", (job_id,))
        conn.close()
        return int(job_id)

    def open_connections(self, backend: Backend, outbox: Outbox) -> int:
        path = os.path.realpath(backend.kwargs["path"])
        fds = Path("/proc/self/fd")
        return sum(1 for fd in fds.iterdir() if _readlink(fd) == path)

    def test_the_file_is_private_to_its_owner(self, backend: Backend) -> None:
        outbox = backend.make()
        outbox.enqueue(batch(1), NS)
        for suffix in ("", "-wal", "-shm"):
            mode = os.stat(backend.kwargs["path"] + suffix).st_mode & 0o777
            assert mode == 0o600, (suffix, oct(mode))

    def test_the_database_uses_wal(self, backend: Backend) -> None:
        import sqlite3

        outbox = backend.make()
        with sqlite3.connect(backend.kwargs["path"]) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        conn.close()
        assert isinstance(outbox, SQLiteOutbox) and outbox.synchronous == "NORMAL"

    def test_arguments_are_checked(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="path must name a database file"):
            SQLiteOutbox(":memory:")
        with pytest.raises(ValueError, match="synchronous must be"):
            SQLiteOutbox(tmp_path / "x.db", synchronous="OFF")
        with pytest.raises(ValueError, match="table must be letters"):
            SQLiteOutbox(tmp_path / "x.db", table="jobs; DROP TABLE x")
        with pytest.raises(ValueError, match="max_attempts must be an int >= 1, got 0"):
            SQLiteOutbox(tmp_path / "x.db", max_attempts=0)
        with pytest.raises(ValueError, match="timeout must be a finite number"):
            SQLiteOutbox(tmp_path / "x.db", timeout=-1)

    def test_a_closed_outbox_refuses_work(self, backend: Backend) -> None:
        outbox = backend.make()
        outbox.close()
        with pytest.raises(OutboxError, match="is closed"):
            outbox.enqueue(batch(1), NS)

    @pytest.mark.parametrize("directory", ["writable", "read-only"])
    def test_a_file_this_process_cannot_write_opens_for_reading(self, directory: str) -> None:
        # Not under tmp_path: its parents are private to this user, and as root the
        # child reads as another user (root writes whatever the permissions say).
        home = Path(tempfile.mkdtemp(prefix="agentstate-ro-"))
        try:
            path = home / "outbox.db"
            writer = SQLiteOutbox(path)
            writer.enqueue(batch(2), NS)
            writer.fail(writer.claim(1)[0], "boom", dead=True)
            writer.close()
            other_user = os.geteuid() == 0
            # Readable, not writable; maybe in a directory this process cannot write
            # either, where SQLite cannot create the -shm file WAL reads need.
            os.chmod(path, 0o644 if other_user else 0o444)
            writable = 0o777 if other_user else 0o755
            os.chmod(home, writable if directory == "writable" else 0o555)
            child = subprocess.run(
                [sys.executable, "-c", READ_ONLY_CHILD, str(path), str(other_user)],
                capture_output=True, text=True, timeout=60,
            )
            assert child.returncode == 0, child.stderr
            found = json.loads(child.stdout)
            assert found["counts"] == {"ready": 1, "claimed": 0, "done": 0, "failed": 1}
            assert found["get"] == "message 1" and found["dead"] == ["m0"]
            assert found["read_only"] is True
            assert "is open for reading only: it cannot enqueue" in found["enqueue"]
            assert found["claim"].startswith("OutboxError")
        finally:
            os.chmod(home, 0o755)
            shutil.rmtree(home)

    def test_read_only_is_refused_writes_even_when_the_file_is_writable(
        self, backend: Backend
    ) -> None:
        backend.make().enqueue(batch(1), NS)
        reader = backend.make(read_only=True)
        assert reader.counts()["ready"] == 1 and reader.get("m0", NS) is not None
        with pytest.raises(OutboxError, match="open for reading only: it cannot claim"):
            reader.claim(1)
        assert backend.make().counts()["ready"] == 1
        with pytest.raises(OutboxError, match="no table"):
            backend.make(read_only=True, table="missing")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.Error as exc:
        pytest.skip(
            f"PostgreSQL is not reachable ({exc}); run one on 127.0.0.1:5432 with trust auth "
            "and a database 'test', or set AGENTSTATE_TEST_POSTGRES_URL"
        )
    return POSTGRES_URL


class TestPostgresOutbox(OutboxContract, StallContract):
    @pytest.fixture
    def backend(self, postgres_url: str) -> Iterator[Backend]:
        import psycopg

        table = unique("outbox_test")
        conninfo = f"{postgres_url}?application_name={table}"
        backend = Backend("PostgresOutbox", {"conninfo": conninfo, "table": table})
        yield backend
        backend.close()
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")

    def broken(self, backend: Backend) -> Outbox:
        return backend.make(conninfo="postgresql://postgres@127.0.0.1:1/test?connect_timeout=2")

    def target(self) -> tuple[str, int]:
        url = urlsplit(POSTGRES_URL)
        return (url.hostname or "127.0.0.1", url.port or 5432)

    def via(self, proxy: StallingProxy) -> dict[str, Any]:
        return {"conninfo": f"postgresql://postgres@127.0.0.1:{proxy.port}/test"}

    def corrupt(self, backend: Backend, outbox: Outbox, key: str) -> int:
        import psycopg

        table = backend.kwargs["table"]
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            row = conn.execute(f"SELECT id FROM {table} WHERE msg_key = %s", (key,)).fetchone()
            assert row is not None
            conn.execute(f"UPDATE {table} SET namespace = '[\"half' WHERE id = %s", (row[0],))
        return int(row[0])

    def open_connections(self, backend: Backend, outbox: Outbox) -> int:
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (backend.kwargs["table"],),
            ).fetchone()
        assert row is not None
        return int(row[0])

    def test_an_enqueue_is_one_statement_and_starts_no_thread(
        self, backend: Backend, postgres_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import psycopg

        sent: list[str] = []

        class Recording:
            """A pool handing out one autocommit connection, recording what it sends."""

            def __init__(self) -> None:
                self.conn = psycopg.connect(postgres_url, autocommit=True)
                execute = self.conn.execute

                def record(query: Any, *args: Any, **kwargs: Any) -> Any:
                    sent.append(str(query)[:40])
                    return execute(query, *args, **kwargs)

                transaction = self.conn.transaction

                def begin(*args: Any, **kwargs: Any) -> Any:
                    sent.append("BEGIN")
                    return transaction(*args, **kwargs)

                self.conn.execute = record  # type: ignore[method-assign]
                self.conn.transaction = begin  # type: ignore[method-assign]

            @contextlib.contextmanager
            def connection(self) -> Iterator[Any]:
                yield self.conn

        pool = Recording()
        outbox = backend.make(conninfo=None, pool=pool)
        outbox.enqueue(batch(1), NS)  # the first call may start the watchdog's clock
        started: list[str] = []
        start = threading.Thread.start

        def count(thread: threading.Thread) -> None:
            started.append(thread.name)
            start(thread)

        monkeypatch.setattr(threading.Thread, "start", count)
        sent.clear()
        for i in range(5):
            assert outbox.enqueue(batch(3, start=10 * i + 1), NS) == 3
        monkeypatch.undo()
        # Before: BEGIN, the insert and COMMIT (three round trips), and a timer thread
        # started per call.
        assert len(sent) == 5 and "BEGIN" not in sent
        assert started == []
        assert outbox.counts()["ready"] == 16
        pool.conn.close()

    @pytest.mark.slow
    def test_a_connect_timeout_in_the_url_is_honoured(self, backend: Backend) -> None:
        from agentstate_reducer.outbox import PostgresOutbox

        proxy = StallingProxy(self.target())
        proxy.stall()  # a server that accepts the connection and never answers
        try:
            started = time.monotonic()
            with pytest.raises(OutboxError, match="could not create the table"):
                PostgresOutbox(f"postgresql://postgres@127.0.0.1:{proxy.port}/x?connect_timeout=2")
            took = time.monotonic() - started
            assert 1.5 < took < 6, took  # before: 10 s, whatever the URL said
        finally:
            proxy.close()
        outbox = backend.make(conninfo=backend.kwargs["conninfo"] + "&connect_timeout=3")
        assert isinstance(outbox, PostgresOutbox) and outbox.connect_timeout == 3.0
        given = backend.make(conninfo=outbox.conninfo, connect_timeout=4)
        assert isinstance(given, PostgresOutbox) and given.connect_timeout == 4.0

    def test_the_url_connect_timeout_is_read_as_libpq_reads_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from agentstate_reducer import ConfigError
        from agentstate_reducer.outbox.postgres import _url_connect_timeout

        monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
        assert _url_connect_timeout("postgresql://u@h/db?connect_timeout=3") == 3.0
        assert _url_connect_timeout("host=h connect_timeout=7 dbname=d") == 7.0
        assert _url_connect_timeout("postgresql://u@h/db") == 10.0
        assert _url_connect_timeout("postgresql://u@h/db?connect_timeout=0") == 10.0
        monkeypatch.setenv("PGCONNECT_TIMEOUT", "5")
        assert _url_connect_timeout("postgresql://u@h/db") == 5.0
        with pytest.raises(ConfigError, match="must be a number, got 'soon'"):
            _url_connect_timeout("postgresql://u@h/db?connect_timeout=soon")
        with pytest.raises(ConfigError, match="not a valid libpq") as caught:
            _url_connect_timeout("host=h password='s3cret")
        assert "s3cret" not in str(caught.value)

    def test_the_watchdog_clock_runs_in_a_forked_child_too(self) -> None:
        from agentstate_reducer.outbox.postgres import _Watchdog

        class Conn:
            """What the watchdog touches: a socket to cut, and close()."""

            def __init__(self) -> None:
                self.sock, self.peer = socket.socketpair()
                self.closed = False

            def fileno(self) -> int:
                return self.sock.fileno()

            def close(self) -> None:
                self.closed = True
                self.sock.close()
                self.peer.close()

        def cut_within(seconds: float) -> bool:
            conn = Conn()
            with _Watchdog(conn, seconds) as watchdog:
                conn.sock.settimeout(5)
                data = conn.sock.recv(1)  # blocks until the watchdog shuts the socket
            return watchdog.fired and conn.closed and data == b""

        assert cut_within(0.05)  # starts the clock in this process
        pid = os.fork()
        if pid == 0:  # the child: the parent's clock thread is not here
            os._exit(0 if cut_within(0.05) else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        ended = Conn()
        with _Watchdog(ended, 0.05) as quick:
            pass
        time.sleep(0.2)
        assert not quick.fired and not ended.closed  # a call that ended is never cut
        ended.close()

    def test_a_connection_pool_works_too(self, backend: Backend, postgres_url: str) -> None:
        from psycopg_pool import ConnectionPool

        with ConnectionPool(postgres_url, min_size=1, max_size=2, open=True) as pool:
            outbox = backend.make(conninfo=None, pool=pool)
            assert outbox.enqueue(batch(3), NS) == 3
            jobs = outbox.claim(2)
            assert outbox.ack(jobs) == 2
            assert outbox.counts() == {"ready": 1, "claimed": 0, "done": 2, "failed": 0}

    def test_overlapping_batches_never_deadlock(
        self, backend: Backend, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from agentstate_reducer.outbox import postgres

        # No retry: a deadlock between two enqueues would surface as an OutboxError.
        monkeypatch.setattr(postgres, "_RETRIES", 1)
        outbox = backend.make(max_idle=6)
        threads, rounds = 6, 20
        # Fresh keys each round, shared by every thread, each in its own order.
        plans = [
            [random.Random(seed * 1000 + r).sample(range(10), 7) for r in range(rounds)]
            for seed in range(threads)
        ]
        start = threading.Barrier(threads)
        errors: list[str] = []

        def enqueue(plan: list[list[int]]) -> None:
            for r, keys in enumerate(plan):
                start.wait()
                try:
                    outbox.enqueue(
                        [{"role": "user", "content": "x", "id": f"r{r}-{k}"} for k in keys], NS
                    )
                except OutboxError as exc:
                    errors.append(str(exc).splitlines()[0])

        workers = [threading.Thread(target=enqueue, args=(plan,)) for plan in plans]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert errors == []
        expected = {(r, k) for plan in plans for r, keys in enumerate(plan) for k in keys}
        assert outbox.counts()["ready"] == len(expected)

    def test_ids_follow_the_batch_order_whatever_the_keys(self, outbox: Outbox) -> None:
        keys = ["z", "a", "m", "b"]
        outbox.enqueue([{"role": "user", "content": k, "id": k} for k in keys], NS)
        jobs = outbox.claim(10)
        assert ids(jobs) == keys

    def test_arguments_are_checked(self, postgres_url: str) -> None:
        from agentstate_reducer.outbox import PostgresOutbox

        with pytest.raises(ValueError, match="exactly one of conninfo and pool"):
            PostgresOutbox()
        with pytest.raises(TypeError, match="pool must have a connection"):
            PostgresOutbox(pool=object())


@pytest.fixture(scope="session")
def redis_url() -> str:
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(
            f"Redis is not reachable ({exc}); run one on 127.0.0.1:6379 or set "
            "AGENTSTATE_TEST_REDIS_URL"
        )
    finally:
        client.close()
    return REDIS_URL


class TestRedisOutbox(OutboxContract, StallContract):
    @pytest.fixture
    def backend(self, redis_url: str) -> Iterator[Backend]:
        import redis

        prefix = unique("agentstate-test")
        backend = Backend("RedisOutbox", {"url": redis_url, "prefix": prefix})
        yield backend
        backend.close()
        client = redis.Redis.from_url(redis_url)
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        client.close()

    def broken(self, backend: Backend) -> Outbox:
        return backend.make(url="redis://127.0.0.1:1/0")

    def target(self) -> tuple[str, int]:
        url = urlsplit(REDIS_URL)
        return (url.hostname or "127.0.0.1", url.port or 6379)

    def via(self, proxy: StallingProxy) -> dict[str, Any]:
        return {"url": f"redis://127.0.0.1:{proxy.port}/0"}

    def corrupt(self, backend: Backend, outbox: Outbox, key: str) -> int:
        assert isinstance(outbox, outbox_pkg.RedisOutbox)
        client = outbox.client
        namespace = json.dumps(list(NS), separators=(",", ":"))
        job_id = int(client.hget(outbox.keys[1], f"{namespace}\x00{key}"))
        client.hset(outbox.keys[2], job_id, "{not json")
        return job_id

    def open_connections(self, backend: Backend, outbox: Outbox) -> int:
        pool = outbox.client.connection_pool  # type: ignore[attr-defined]
        every = [*pool._available_connections, *pool._in_use_connections]
        return sum(1 for conn in every if getattr(conn, "_sock", None) is not None)

    def test_a_client_works_too(self, backend: Backend, redis_url: str) -> None:
        import redis

        client = redis.Redis.from_url(redis_url, decode_responses=True)
        outbox = backend.make(url=None, client=client)
        assert outbox.enqueue(batch(2), NS) == 2
        assert outbox.ack(outbox.claim(1)) == 1
        outbox.close()
        assert client.ping()  # a client we were given is left open
        client.close()

    def test_arguments_are_checked(self) -> None:
        from agentstate_reducer.outbox import RedisOutbox

        with pytest.raises(ValueError, match="exactly one of url and client"):
            RedisOutbox()
        with pytest.raises(ValueError, match="prefix must be a non-empty string"):
            RedisOutbox("redis://127.0.0.1:1/0", prefix="")


# -- OutboxHook and the reducer ----------------------------------------------------------------


@pytest.fixture
def sqlite_outbox(tmp_path: Path) -> Iterator[SQLiteOutbox]:
    outbox = SQLiteOutbox(tmp_path / "outbox.db")
    yield outbox
    outbox.close()


class Flaky(SQLiteOutbox):
    """Fails the first ``fails`` enqueues, like a database that is briefly down."""

    fails = 1

    def _insert(self, rows: list[Row]) -> int:
        if self.fails:
            self.fails -= 1
            raise OutboxError("the database is down")
        return super()._insert(rows)


def test_reduce_raises_outbox_errors_so_a_retry_stores_the_messages(tmp_path: Path) -> None:
    outbox = Flaky(tmp_path / "outbox.db")
    seen: list[str] = []
    config = ReducerConfig(
        min_messages=2,
        max_messages=4,
        on_prune=[lambda pruned, ns: seen.extend(m["id"] for m in pruned), OutboxHook(outbox)],
    )
    reducer = MessageReducer(config=config)
    history = batch(6)
    with pytest.raises(OutboxError, match="down"):
        reducer.reduce(history, namespace=NS)
    result = reducer.reduce(history, namespace=NS)  # the caller retries the same step
    assert [m["id"] for m in result.pruned] == ["m1", "m2", "m3"]
    assert ids(outbox.claim(10)) == ["m1", "m2", "m3"]
    assert seen == ["m1", "m2", "m3"] * 2  # hooks before the outbox run again
    outbox.close()


async def test_areduce_raises_outbox_errors_too(tmp_path: Path) -> None:
    outbox = Flaky(tmp_path / "outbox.db")
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[AsyncOutboxHook(outbox)])
    )
    with pytest.raises(OutboxError):
        await reducer.areduce(batch(6), namespace=NS)
    await reducer.areduce(batch(6), namespace=NS)
    assert ids(outbox.claim(10)) == ["m1", "m2", "m3"]
    outbox.close()


def test_an_unstorable_message_fails_the_reduce_and_nothing_is_forgotten(
    sqlite_outbox: SQLiteOutbox, caplog: pytest.LogCaptureFixture
) -> None:
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[OutboxHook(sqlite_outbox)])
    )
    secret = {"role": "user", "content": "my password is hunter2", "when": object(), "id": "b"}
    history = [*batch(3), secret, *batch(3, start=3)]
    with (
        caplog.at_level(logging.DEBUG, logger="agentstate_reducer"),
        pytest.raises(UnstorableError, match=r"index 3 of existing \+ new \(index 2 of the "
                      r"pruned batch\), field \['when'\]") as info,
    ):
        reducer.reduce(history, namespace=NS)
    assert info.value.index == 3  # in the history, not in the batch the hook got
    assert isinstance(info.value, OutboxError) and isinstance(info.value, TypeError)
    assert sqlite_outbox.counts()["ready"] == 0
    assert "hunter2" not in caplog.text
    # The caller's state still holds the batch; once fixed, the retry stores all of it.
    history[3] = {**secret, "when": "2026-01-01"}
    result = reducer.reduce(history, namespace=NS)
    assert ids(sqlite_outbox.claim(10)) == [m["id"] for m in result.pruned]


def test_a_non_json_namespace_part_is_refused_naming_the_part(
    sqlite_outbox: SQLiteOutbox,
) -> None:
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[OutboxHook(sqlite_outbox)])
    )
    with pytest.raises(UnstorableError, match=r"namespace part \[1\] is b'alice' \(bytes\)"):
        reducer.reduce(batch(6), namespace=("memories", b"alice"))
    with pytest.raises(UnstorableError, match=r"namespace part \[0\]\[1\] is \{"):
        reducer.reduce(batch(6), namespace=(("a", {"b": 1}),))
    assert sum(sqlite_outbox.counts().values()) == 0


async def test_async_outbox_hook_serves_areduce_only(sqlite_outbox: SQLiteOutbox) -> None:
    hook = AsyncOutboxHook(sqlite_outbox)
    reducer = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[hook]))
    with pytest.raises(TypeError, match="areduce"):
        reducer.reduce(batch(6))
    result = await reducer.areduce(batch(6), namespace=NS)
    assert ids(sqlite_outbox.claim(10)) == [m["id"] for m in result.pruned]
    assert repr(hook).startswith("AsyncOutboxHook(SQLiteOutbox(")


async def test_sync_outbox_hook_works_under_areduce(sqlite_outbox: SQLiteOutbox) -> None:
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[OutboxHook(sqlite_outbox)])
    )
    await reducer.areduce(batch(6), namespace=NS)
    assert sqlite_outbox.counts()["ready"] == 3


def test_hooks_and_relay_check_their_arguments(sqlite_outbox: SQLiteOutbox) -> None:
    with pytest.raises(TypeError, match=r"outbox must be an agentstate_reducer\.outbox\.Outbox"):
        OutboxHook(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="deliver_fn must be callable"):
        Relay(sqlite_outbox, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch must be an int >= 1, got 0"):
        Relay(sqlite_outbox, print, batch=0)
    with pytest.raises(ValueError, match="lease_seconds must be a finite number"):
        Relay(sqlite_outbox, print, lease_seconds=0)
    with pytest.raises(ValueError, match="limit must be an int >= 1"):
        sqlite_outbox.claim(0)
    with pytest.raises(ValueError, match=r"lease_seconds .* got nan"):
        sqlite_outbox.claim(1, float("nan"))
    with pytest.raises(ValueError, match="retry_after"):
        sqlite_outbox.fail(Job(1, None, "null", "k", "json", "{}", 1), "x", retry_after=-1)
    with pytest.raises(TypeError, match="job must hold Job objects"):
        sqlite_outbox.fail(1, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="jobs must hold Job objects"):
        sqlite_outbox.ack([1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="batch must be a list"):
        sqlite_outbox.enqueue({"role": "user", "content": "x"})  # type: ignore[arg-type]


SECRET = "the user's card number 4111-1111"


def _outbox_junk(outbox: SQLiteOutbox, tmp_path: Path) -> dict[str, Callable[[], Any]]:
    """Every public outbox entry point given junk (the name says which, and how)."""
    job = Job(1, None, "null", "k", "json", "{}", 1)
    corrupt = Job(1, None, "null", "k", "json", '{"__agentstate__": "nope"}', 1)
    junk: dict[str, Callable[[], Any]] = {
        "SQLiteOutbox :memory:": lambda: SQLiteOutbox(":memory:"),
        "SQLiteOutbox path 5": lambda: SQLiteOutbox(5),  # type: ignore[arg-type]
        "SQLiteOutbox synchronous": lambda: SQLiteOutbox(tmp_path / "a.db", synchronous="OFF"),
        "SQLiteOutbox table": lambda: SQLiteOutbox(tmp_path / "a.db", table="x; DROP"),
        "SQLiteOutbox max_attempts": lambda: SQLiteOutbox(tmp_path / "a.db", max_attempts=0),
        "SQLiteOutbox timeout": lambda: SQLiteOutbox(tmp_path / "a.db", timeout=-1),
        "SQLiteOutbox max_idle": lambda: SQLiteOutbox(tmp_path / "a.db", max_idle=True),
        "SQLiteOutbox read_only": lambda: SQLiteOutbox(tmp_path / "a.db", read_only="yes"),  # type: ignore[arg-type]
        "SQLiteOutbox in a file": lambda: SQLiteOutbox(tmp_path / "a.db" / "b.db"),
        "enqueue a dict": lambda: outbox.enqueue({"role": "user", "content": SECRET}),  # type: ignore[arg-type]
        "enqueue None": lambda: outbox.enqueue(None),  # type: ignore[arg-type]
        "enqueue a string": lambda: outbox.enqueue(SECRET),  # type: ignore[arg-type]
        "enqueue an object": lambda: outbox.enqueue([object()]),
        "enqueue a namespace": lambda: outbox.enqueue(batch(1), object()),
        "claim limit": lambda: outbox.claim(0),
        "claim lease": lambda: outbox.claim(1, float("inf")),
        "ack ints": lambda: outbox.ack([1]),  # type: ignore[list-item]
        "ack None": lambda: outbox.ack(None),  # type: ignore[arg-type]
        "fail an int": lambda: outbox.fail(1, "x"),  # type: ignore[arg-type]
        "fail retry_after": lambda: outbox.fail(job, "x", retry_after=-1),
        "renew lease": lambda: outbox.renew([job], 0),
        "revive ints": lambda: outbox.revive([1]),  # type: ignore[list-item]
        "discard ints": lambda: outbox.discard([1]),  # type: ignore[list-item]
        "edit an int": lambda: outbox.edit(1, {}),  # type: ignore[arg-type]
        "edit an object": lambda: outbox.edit(job, object()),
        "get None": lambda: outbox.get(None),
        "original empty": lambda: outbox.original(""),
        "purge negative": lambda: outbox.purge(-1),
        "dead_letters 0": lambda: outbox.dead_letters(0),
        "a corrupted job's message": lambda: corrupt.message,
        "a job of an unknown kind": lambda: Job(1, None, "null", "k", "xml", "{}", 1).message,
        "a job that is no JSON": lambda: Job(1, None, "null", "k", "json", "{half", 1).message,
        "a LangChain job that is no message": lambda: Job(
            1, None, "null", "k", "langchain", '{"role": "user", "content": "hi"}', 1
        ).message,
        "OutboxHook": lambda: OutboxHook(5),  # type: ignore[arg-type]
        "AsyncOutboxHook": lambda: AsyncOutboxHook(None),  # type: ignore[arg-type]
        "Relay outbox": lambda: Relay(5, print),  # type: ignore[arg-type]
        "Relay deliver_fn": lambda: Relay(outbox, 5),  # type: ignore[arg-type]
        "Relay batch": lambda: Relay(outbox, print, batch=0),
        "Relay retry_delay": lambda: Relay(outbox, print, retry_delay=float("nan")),
        "closed": lambda: (outbox.close(), outbox.counts()),
    }
    try:
        from agentstate_reducer.outbox import PostgresOutbox
    except ImportError:  # pragma: no cover - the extra is part of the dev install
        pass
    else:
        junk |= {
            "PostgresOutbox neither": lambda: PostgresOutbox(),
            "PostgresOutbox both": lambda: PostgresOutbox("x", pool=object()),
            "PostgresOutbox conninfo 5": lambda: PostgresOutbox(5),  # type: ignore[arg-type]
            "PostgresOutbox pool": lambda: PostgresOutbox(pool=object()),
            "PostgresOutbox bad conninfo": lambda: PostgresOutbox(f"password='{SECRET}"),
            "PostgresOutbox refused": lambda: PostgresOutbox(
                "postgresql://postgres@127.0.0.1:1/x", connect_timeout=1
            ),
            "PostgresOutbox connect_timeout": lambda: PostgresOutbox(
                "postgresql://postgres@127.0.0.1:1/x?connect_timeout=soon"
            ),
        }
    try:
        from agentstate_reducer.outbox import RedisOutbox
    except ImportError:  # pragma: no cover
        pass
    else:
        junk |= {
            "RedisOutbox neither": lambda: RedisOutbox(),
            "RedisOutbox url 5": lambda: RedisOutbox(5),  # type: ignore[arg-type]
            "RedisOutbox not a URL": lambda: RedisOutbox("ftp://x"),
            "RedisOutbox prefix": lambda: RedisOutbox("redis://127.0.0.1:1/0", prefix=""),
            "RedisOutbox client": lambda: RedisOutbox(client=5),
            "RedisOutbox refused": lambda: RedisOutbox(
                "redis://127.0.0.1:1/0", connect_timeout=1
            ).counts(),
        }
    return junk


def test_every_outbox_error_is_a_reducer_error_and_keeps_its_built_in(tmp_path: Path) -> None:
    from agentstate_reducer import ConfigError, JobDecodeError, ReducerError

    outbox = SQLiteOutbox(tmp_path / "outbox.db")
    wrong: list[str] = []
    for name, call in _outbox_junk(outbox, tmp_path).items():
        try:
            call()
        except ImportError:
            raise
        except Exception as exc:
            if not isinstance(exc, ReducerError) or SECRET in str(exc):
                wrong.append(f"{name}: {type(exc).__name__}: {str(exc)[:80]}")
            # What 0.5.0 code catches keeps catching it.
            if isinstance(exc, ConfigError) and not isinstance(exc, ValueError):
                wrong.append(f"{name}: a ConfigError that is no ValueError")
        else:
            wrong.append(f"{name}: raised nothing")
    assert wrong == []
    with pytest.raises(ValueError):  # a corrupted row was a ValueError, and still is
        _ = Job(1, None, "null", "k", "json", "{half", 1).message
    assert issubclass(JobDecodeError, ValueError) and issubclass(JobDecodeError, OutboxError)


# -- Relay -------------------------------------------------------------------------------------


def test_relay_delivers_each_namespace_in_order(sqlite_outbox: SQLiteOutbox) -> None:
    sqlite_outbox.enqueue(batch(2), NS)
    sqlite_outbox.enqueue(batch(2, start=2), "bob")
    sqlite_outbox.enqueue(batch(2, start=4), NS)
    calls: list[tuple[Any, list[str]]] = []
    relay = Relay(sqlite_outbox, lambda ms, ns: calls.append((ns, [m["id"] for m in ms])))
    assert relay.run_once() == RelayRound(claimed=6, delivered=6, failed=0)
    assert calls == [(NS, ["m0", "m1", "m4", "m5"]), ("bob", ["m2", "m3"])]
    assert relay.run_once() == RelayRound()


def test_relay_logs_ids_and_types_never_content(
    sqlite_outbox: SQLiteOutbox, caplog: pytest.LogCaptureFixture
) -> None:
    sqlite_outbox.enqueue([{"role": "user", "content": "hunter2", "id": "s1"}], NS)

    def leaky(messages: list[Any], namespace: Any) -> None:
        raise ValueError(f"rejected {messages[0]['content']}")

    with caplog.at_level(logging.DEBUG, logger="agentstate_reducer"):
        Relay(sqlite_outbox, leaky).run_once()
    assert "ValueError" in caplog.text and "hunter2" not in caplog.text


def test_relay_retries_with_backoff_then_dead_letters(tmp_path: Path) -> None:
    outbox = SQLiteOutbox(tmp_path / "x.db", max_attempts=2)
    outbox.enqueue(batch(2), NS)

    def down(messages: list[Any], namespace: Any) -> None:
        raise ConnectionError("memory store is down")

    relay = Relay(outbox, down, retry_delay=1.0)
    assert relay.run_once() == RelayRound(claimed=2, delivered=0, failed=2)
    assert relay.run_once() == RelayRound()  # waiting out the backoff
    time.sleep(1.1)
    assert relay.run_once() == RelayRound(claimed=2, delivered=0, failed=2)
    dead = outbox.dead_letters()
    assert [job.last_error for job in dead] == ["ConnectionError: memory store is down"] * 2
    outbox.close()


def test_relay_backoff_doubles_up_to_the_cap(sqlite_outbox: SQLiteOutbox) -> None:
    relay = Relay(sqlite_outbox, print, retry_delay=1, max_retry_delay=5)
    assert [relay.backoff(n) for n in (1, 2, 3, 4, 10)] == [1, 2, 4, 5, 5]


def test_a_row_that_cannot_be_rebuilt_is_dead_lettered_alone(sqlite_outbox: SQLiteOutbox) -> None:
    sqlite_outbox.enqueue(batch(1), "ns")
    sqlite_outbox._insert([Row('"ns"', "bad", "json", "{not json")])
    sqlite_outbox.enqueue(batch(1, start=1), "ns")
    sink = Sink()
    assert Relay(sqlite_outbox, sink).run_once() == RelayRound(claimed=3, delivered=2, failed=1)
    assert sorted(sink.entries) == [("ns", "m0"), ("ns", "m1")]
    (dead,) = sqlite_outbox.dead_letters()
    assert dead.key == "bad" and dead.attempts == 1
    assert dead.last_error is not None and dead.last_error.startswith("JobDecodeError")
    assert "JSONDecodeError" in dead.last_error  # the cause, named


def test_a_delivery_longer_than_the_lease_keeps_it(sqlite_outbox: SQLiteOutbox) -> None:
    """The heartbeat renews the lease: nobody else can claim the jobs meanwhile."""
    sqlite_outbox.enqueue(batch(2), NS)
    seen: list[list[Job]] = []

    def slow(messages: list[Any], namespace: Any) -> None:
        time.sleep(0.5)
        seen.append(sqlite_outbox.claim(10, 30))  # ten lease lengths in: still held

    assert Relay(sqlite_outbox, slow, lease_seconds=0.05).run_once().delivered == 2
    assert seen == [[]]
    assert sqlite_outbox.counts()["done"] == 2


def test_run_forever_drains_and_stops(sqlite_outbox: SQLiteOutbox) -> None:
    sink = Sink()
    relay = Relay(sqlite_outbox, sink, batch=3, poll_interval=0.01)
    stop = threading.Event()
    thread = threading.Thread(target=relay.run_forever, args=(stop,))
    thread.start()
    sqlite_outbox.enqueue(batch(10), NS)
    deadline = time.monotonic() + 10
    while len(sink.entries) < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert len(sink.entries) == 10


def test_run_forever_survives_outbox_errors(
    sqlite_outbox: SQLiteOutbox, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(SQLiteOutbox):
        def _claim(self, limit: int, lease_seconds: float) -> list[Job]:
            stop.set()
            raise OutboxError("disk full")

    broken = Broken(sqlite_outbox.path)
    stop = threading.Event()
    with caplog.at_level(logging.ERROR, logger="agentstate_reducer"):
        Relay(broken, print, poll_interval=0.01).run_forever(stop)
    assert "relay round failed" in caplog.text
    broken.close()


def test_two_relays_with_an_idempotent_sink_have_an_exactly_once_effect(
    sqlite_outbox: SQLiteOutbox,
) -> None:
    sqlite_outbox.enqueue(batch(200), NS)
    sink = Sink()
    stop = threading.Event()
    relays = [Relay(sqlite_outbox, sink, batch=5, poll_interval=0.01) for _ in range(2)]
    threads = [threading.Thread(target=r.run_forever, args=(stop,)) for r in relays]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while sqlite_outbox.counts()["done"] < 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    for thread in threads:
        thread.join(5)
    assert len(sink.entries) == 200
    assert set(sink.deliveries.values()) == {1}


async def test_arun_once_awaits_an_async_deliver_fn_on_this_loop(
    sqlite_outbox: SQLiteOutbox,
) -> None:
    sqlite_outbox.enqueue(batch(3), NS)
    loops: list[asyncio.AbstractEventLoop] = []
    got: list[str] = []

    async def deliver(messages: list[Any], namespace: Any) -> None:
        loops.append(asyncio.get_running_loop())
        got.extend(m["id"] for m in messages)

    relay = Relay(sqlite_outbox, deliver)
    assert await relay.arun_once() == RelayRound(claimed=3, delivered=3)
    assert loops == [asyncio.get_running_loop()] and got == ["m0", "m1", "m2"]


async def test_arun_once_runs_a_sync_deliver_fn_off_the_loop(
    sqlite_outbox: SQLiteOutbox,
) -> None:
    sqlite_outbox.enqueue(batch(2), NS)
    threads: list[str] = []

    def deliver(messages: list[Any], namespace: Any) -> None:
        threads.append(threading.current_thread().name)
        raise RuntimeError("nope")

    relay = Relay(sqlite_outbox, deliver, retry_delay=0)
    assert await relay.arun_once() == RelayRound(claimed=2, failed=2)
    assert threads and threads[0] != threading.current_thread().name


async def test_an_async_delivery_longer_than_the_lease_keeps_it(
    sqlite_outbox: SQLiteOutbox,
) -> None:
    """arun_once's heartbeat (a task on the loop) renews the lease as run_once's thread does."""
    sqlite_outbox.enqueue(batch(2), NS)
    seen: list[list[Job]] = []

    async def slow(messages: list[Any], namespace: Any) -> None:
        await asyncio.sleep(0.5)
        seen.append(await asyncio.to_thread(sqlite_outbox.claim, 10, 30))

    relay = Relay(sqlite_outbox, slow, lease_seconds=0.05)
    assert (await relay.arun_once()).delivered == 2
    assert seen == [[]]


async def test_a_cancelled_arun_once_stops_its_heartbeat(sqlite_outbox: SQLiteOutbox) -> None:
    """Cancelled mid-delivery: the cancellation propagates, no heartbeat task is left
    renewing, and the jobs are claimable once their lease lapses."""
    sqlite_outbox.enqueue(batch(2), NS)
    started = asyncio.Event()

    async def hang(messages: list[Any], namespace: Any) -> None:
        started.set()
        await asyncio.sleep(60)

    round_ = asyncio.create_task(Relay(sqlite_outbox, hang, lease_seconds=0.1).arun_once())
    await started.wait()
    await asyncio.sleep(0.15)  # a renewal or two
    round_.cancel()
    with pytest.raises(asyncio.CancelledError):
        await round_
    assert asyncio.all_tasks() == {asyncio.current_task()}
    await asyncio.sleep(0.3)
    assert len(sqlite_outbox.claim(10, 30)) == 2


async def test_arun_forever_drains_and_stops(sqlite_outbox: SQLiteOutbox) -> None:
    sqlite_outbox.enqueue(batch(7), NS)
    sink = Sink()
    stop = asyncio.Event()

    async def deliver(messages: list[Any], namespace: Any) -> None:
        sink(messages, namespace)
        if len(sink.entries) == 7:
            stop.set()

    relay = Relay(sqlite_outbox, deliver, batch=2, poll_interval=0.01)
    await asyncio.wait_for(relay.arun_forever(stop), 10)
    assert len(sink.entries) == 7


def test_sync_run_once_runs_an_async_deliver_fn(sqlite_outbox: SQLiteOutbox) -> None:
    sqlite_outbox.enqueue(batch(2), NS)
    got: list[str] = []

    async def deliver(messages: list[Any], namespace: Any) -> None:
        got.extend(m["id"] for m in messages)

    assert Relay(sqlite_outbox, deliver).run_once().delivered == 2
    assert got == ["m0", "m1"]


# -- encoding ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)
plain_keys = st.text().filter(lambda k: k not in {"id", "role", "type", "data", "kwargs"})


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.dictionaries(plain_keys, json_values, max_size=4))
# The tag key itself forces the tagged-items form, whose order the key must ignore too.
@example({"": None, "__agentstate__": None})
@example({"a": {1: "x", 2: "y"}})
def test_dicts_round_trip_and_their_key_ignores_field_order(message: dict[str, Any]) -> None:
    kind, text = encode_message(message)
    assert decode_message(kind, text) == message
    shuffled = dict(reversed(list(message.items())))
    assert message_key(shuffled, *encode_message(shuffled)) == message_key(message, kind, text)
    changed = {**message, "id-less change": [message]}
    assert message_key(changed, *encode_message(changed)) != message_key(message, kind, text)


def test_outbox_all_is_sorted_and_resolves() -> None:
    names = outbox_pkg.__all__
    assert list(names) == sorted(names)
    for name in names:
        assert getattr(outbox_pkg, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        outbox_pkg.Nope  # noqa: B018


BLOCKED = ("psycopg", "psycopg_pool", "redis", "langchain_core", "langchain", "langgraph")


def test_the_outbox_needs_only_the_standard_library(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {BLOCKED!r}:
                    raise ImportError("blocked " + name)
                return None

        sys.meta_path.insert(0, Block())
        from agentstate_reducer.outbox import OutboxHook, Relay, SQLiteOutbox
        outbox = SQLiteOutbox({str(tmp_path / "x.db")!r})
        OutboxHook(outbox)([{{"role": "user", "content": "hi", "id": "1"}}], ("m",))
        got = []
        Relay(outbox, lambda ms, ns: got.append((ms, ns))).run_once()
        assert got == [([{{"role": "user", "content": "hi", "id": "1"}}], ("m",))], got
        for name, extra in (("PostgresOutbox", "postgres"), ("RedisOutbox", "redis")):
            try:
                exec(f"from agentstate_reducer.outbox import {{name}}")
            except ImportError as exc:
                assert f'pip install "agentstate-reducer[{{extra}}]"' in str(exc), exc
            else:
                raise AssertionError(name + " imported without its driver")
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r})
        assert not loaded, loaded
        outbox.close()
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_sqlite_waits_for_a_lock_while_switching_a_new_file_to_wal(tmp_path: Path) -> None:
    """Two processes opening one new outbox at once: the WAL switch must wait, not fail."""
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other(x)")
    # Another writer mid-transaction: SQLite fails the WAL switch at once, no busy wait.
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, holder.execute, args=("COMMIT",))
    release.start()
    try:
        outbox = SQLiteOutbox(path, timeout=10)
        assert outbox.enqueue(batch(1), NS) == 1
        outbox.close()
    finally:
        release.join()
        holder.close()
