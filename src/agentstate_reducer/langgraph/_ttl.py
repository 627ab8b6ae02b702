"""Time-based retention for ``ReducingSaver``: threads idle or old past a limit are swept.

LangGraph Platform's checkpointer TTL offers two strategies on a thread whose TTL ran out:
``"delete"`` (the whole thread) and ``"keep_latest"`` (all but its newest checkpoint).
:class:`ThreadTTL` gives both, measured per thread two ways: ``idle`` (since the thread's
newest checkpoint) and ``age`` (since the thread's first checkpoint written through the
wrapper, stamped in each checkpoint's metadata as :data:`STARTED`).

A sweep reads the threads' newest checkpoint ids (one query on the SQL savers, the dicts
of ``InMemorySaver``, ``list(None)`` on others; a checkpoint id is a uuid6 and carries
its time) and acts on one thread at a time, through the saver's own connection and short
transactions; it holds no lock a run takes, so a run never waits for a sweep, except a
run writing the very thread being deleted in this process, which waits for that one
deletion and then writes on. Runs in other processes are not seen: a sweep measures what
storage shows.
"""

from __future__ import annotations

import asyncio
import builtins
import math
import threading
import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from .._drivers import _adrive, _blocking, _Call, _drive
from ..errors import ConfigError, ConfigTypeError
from ._retention import ROOT, Retention, _needs, _walk, retention_for

__all__ = ("STARTED", "Sweeper", "ThreadTTL", "checkpoint_time")

#: Metadata key of the thread's start (unix seconds), written only when ``age`` is set.
STARTED = "agentstate_thread_started"
#: A checkpoint not read yet (``None`` is one that is gone).
_UNREAD: Any = object()
_STRATEGIES = ("delete", "keep_latest")
_UUID_EPOCH = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01


def _seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigTypeError(f"{name} must be a timedelta or seconds, got {value!r:.80}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be positive and finite, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ThreadTTL:
    """When a thread expires, and what a sweep does to it then.

    Args:
        idle: expire a thread this long after its newest checkpoint (a ``timedelta`` or
            seconds; ``None``: never for idleness).
        age: expire a thread this long after its first checkpoint (``None``: never for
            age). Threads stored before the wrapper stamped them count from their
            newest checkpoint's parent, or the newest checkpoint itself.
        strategy: ``"delete"`` the whole thread (every namespace), or ``"keep_latest"``
            checkpoint of each namespace (with what a ``DeltaChannel`` needs).
        sweep_every: seconds between background sweeps in a daemon thread, started at
            the first write (``None``: only when :meth:`ReducingSaver.sweep` is called).

    Raises:
        ConfigError: neither limit is set, a limit or ``sweep_every`` is not positive, or
            ``strategy`` is unknown. ``ConfigTypeError`` for a value of the wrong type.
    """

    idle: timedelta | float | None = None
    age: timedelta | float | None = None
    strategy: str = "delete"
    sweep_every: float | None = None

    def __post_init__(self) -> None:
        idle, age = _seconds("idle", self.idle), _seconds("age", self.age)
        if idle is None and age is None:
            raise ConfigError("ThreadTTL needs idle= or age= (or both)")
        if self.strategy not in _STRATEGIES:
            raise ConfigError(
                f"strategy must be 'delete' or 'keep_latest', got {self.strategy!r:.80}"
            )
        _seconds("sweep_every", self.sweep_every)

    @property
    def idle_seconds(self) -> float | None:
        return _seconds("idle", self.idle)

    @property
    def age_seconds(self) -> float | None:
        return _seconds("age", self.age)


def checkpoint_time(checkpoint_id: str) -> float | None:
    """Unix time a uuid6 checkpoint id was made at (``None`` for another kind of id)."""
    try:
        value = uuid.UUID(checkpoint_id)
    except (ValueError, TypeError, AttributeError):
        return None
    if value.version != 6:
        return None
    ticks = ((value.int >> 80) << 12) | ((value.int >> 64) & 0x0FFF)
    return (ticks - _UUID_EPOCH) / 1e7


def _ts_time(checkpoint: Any) -> float | None:
    try:
        return datetime.fromisoformat(checkpoint["ts"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return None


# -- the threads' newest checkpoints -----------------------------------------------------

_HEADS = (
    "SELECT thread_id, MAX(checkpoint_id) FROM checkpoints WHERE checkpoint_ns = '' "
    "GROUP BY thread_id"
)


def _sql_family(inner: BaseCheckpointSaver[Any]) -> str | None:
    name = type(inner).__mro__
    for cls in name:
        if cls.__module__.startswith("langgraph.checkpoint.sqlite") and cls.__name__ in (
            "SqliteSaver", "AsyncSqliteSaver"
        ):
            return cls.__name__
        if cls.__module__.startswith("langgraph.checkpoint.postgres") and cls.__name__ in (
            "PostgresSaver", "AsyncPostgresSaver"
        ):
            return cls.__name__
    return None


def _rows(rows: Any) -> dict[str, str]:
    heads: dict[str, str] = {}
    for row in rows:
        thread, head = (row["thread_id"], row["max"]) if isinstance(row, dict) else row
        if head is not None:
            heads[str(thread)] = str(head)
    return heads


def _heads(inner: BaseCheckpointSaver[Any]) -> dict[str, str]:
    """``thread_id -> newest root checkpoint id`` for every stored thread."""
    family = _sql_family(inner)
    if isinstance(inner, InMemorySaver):
        return {
            str(t): max(list(spaces[""]))
            for t, spaces in list(inner.storage.items())
            if spaces.get("")
        }
    if family == "SqliteSaver":
        with inner.cursor(transaction=False) as cur:  # type: ignore[attr-defined]
            return _rows(cur.execute(_HEADS).fetchall())
    if family == "PostgresSaver":
        with inner._cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(_HEADS)
            return _rows(cur.fetchall())
    if family in ("AsyncSqliteSaver", "AsyncPostgresSaver"):
        work = _aheads(inner)
        return asyncio.run_coroutine_threadsafe(work, inner.loop).result()  # type: ignore[attr-defined]
    heads: dict[str, str] = {}
    for tup in inner.list(None):
        _note_head(heads, tup)
    return heads


async def _aheads(inner: BaseCheckpointSaver[Any]) -> dict[str, str]:
    family = _sql_family(inner)
    if family == "AsyncSqliteSaver":
        async with inner.lock, inner.conn.execute(_HEADS) as cur:  # type: ignore[attr-defined]
            return _rows(await cur.fetchall())
    if family == "AsyncPostgresSaver":
        async with inner._cursor() as cur:  # type: ignore[attr-defined]
            await cur.execute(_HEADS)
            return _rows(await cur.fetchall())
    if family is not None or isinstance(inner, InMemorySaver):
        return await asyncio.to_thread(_heads, inner)
    heads: dict[str, str] = {}
    async for tup in inner.alist(None):
        _note_head(heads, tup)
    return heads


def _note_head(heads: dict[str, str], tup: Any) -> None:
    """Keep in ``heads`` the newest root checkpoint of ``tup``'s thread."""
    configurable = tup.config["configurable"]
    if configurable.get("checkpoint_ns", "") == "":
        thread, head = str(configurable["thread_id"]), tup.checkpoint["id"]
        heads[thread] = max(heads.get(thread, head), head)


def _namespaces(inner: BaseCheckpointSaver[Any], thread_id: str) -> builtins.list[str]:
    if isinstance(inner, InMemorySaver):
        return builtins.list(inner.storage.get(thread_id, {}))
    found = {
        str(t.config["configurable"].get("checkpoint_ns", ""))
        for t in inner.list({"configurable": {"thread_id": thread_id}})
    }
    return sorted(found)


# -- the sweeper ---------------------------------------------------------------------------


class Sweeper:
    """The time-based retention of one ``ReducingSaver``: stamps, sweeps, background loop."""

    def __init__(self, inner: BaseCheckpointSaver[Any], ttl: ThreadTTL) -> None:
        self.inner = inner
        self.ttl = ttl
        self._idle = ttl.idle_seconds
        self._age = ttl.age_seconds
        self._retention: Retention | None = (
            retention_for(inner, 1) if ttl.strategy == "keep_latest" else None
        )
        self._lock = threading.Lock()
        #: thread -> start (unix seconds), learned from writes and stamps.
        self._started: dict[str, float] = {}
        #: threads being deleted now: a write to one waits for that deletion.
        self._deleting: dict[str, threading.Event] = {}
        self._background: threading.Thread | None = None
        self._stop = threading.Event()

    # -- on the write path ---------------------------------------------------------

    def _wait_for(self, thread_id: str) -> threading.Event | None:
        with self._lock:
            return self._deleting.get(thread_id)

    def before_put(self, config: Any, metadata: Any) -> Any:
        """Wait if this thread is being deleted, stamp its start; returns the metadata."""
        return _drive(self._stamping(config, metadata))

    async def abefore_put(self, config: Any, metadata: Any) -> Any:
        """Async :meth:`before_put`: the wait is in a thread, the parent is read through
        ``aget_tuple``."""
        return await _adrive(self._stamping(config, metadata))

    def _stamping(self, config: Any, metadata: Any) -> Generator[_Call, Any, Any]:
        """What :meth:`before_put` does, yielding the wait and the read of the parent."""
        self.start_background()
        thread_id, checkpoint_ns, parent_id = _parts(config)
        busy = self._wait_for(thread_id)
        if busy is not None:
            yield _blocking(busy.wait)
        if self._age is None or checkpoint_ns:
            return metadata
        # Read once: a sweep deleting this thread may pop it from _started at any moment.
        started = self._started.get(thread_id)
        if started is None:
            parent = None
            if parent_id:
                parent = yield _Call(self.inner.get_tuple, self.inner.aget_tuple, config)
            started = self._learn_start(thread_id, parent)
        return {**metadata, STARTED: started}

    def _learn_start(self, thread_id: str, parent: Any) -> float:
        started = None
        if parent is not None:
            started = (parent.metadata or {}).get(STARTED)
            if not isinstance(started, (int, float)):
                started = checkpoint_time(parent.checkpoint["id"]) or _ts_time(parent.checkpoint)
        with self._lock:
            return self._started.setdefault(
                thread_id, float(time.time() if started is None else started)
            )

    # -- the sweep -------------------------------------------------------------------

    def _expired(self, thread_id: str, head: str, now: float) -> Generator[_Call, Any, bool]:
        """Whether the thread whose newest checkpoint is ``head`` expired, yielding the read
        of that checkpoint when its id does not tell (at most one read)."""
        made = checkpoint_time(head)
        tup: Any = _UNREAD
        if made is None:
            tup = yield self._reading(thread_id, head)
            made = _ts_time(tup.checkpoint) if tup is not None else None
        if self._idle is not None and made is not None and now - made >= self._idle:
            return True
        if self._age is None:
            return False
        if tup is _UNREAD:
            tup = yield self._reading(thread_id, head)
        if tup is None:
            return False
        started = (tup.metadata or {}).get(STARTED)
        if not isinstance(started, (int, float)):
            parent = tup.parent_config
            started = (
                checkpoint_time(parent["configurable"]["checkpoint_id"]) if parent else None
            ) or made
        return started is not None and now - started >= self._age

    def _reading(self, thread_id: str, checkpoint_id: str) -> _Call:
        return _Call(self.inner.get_tuple, self.inner.aget_tuple, _config(thread_id, checkpoint_id))

    def sweep(self, now: float | None = None) -> builtins.list[str]:
        """Act on every expired thread; returns their ids. ``now``: unix seconds."""
        return _drive(self._sweeping(now))

    async def asweep(self, now: float | None = None) -> builtins.list[str]:
        """Async :meth:`sweep`, through the saver's async methods."""
        return await _adrive(self._sweeping(now))

    def _sweeping(self, now: float | None) -> Generator[_Call, Any, builtins.list[str]]:
        """What :meth:`sweep` does, yielding each read and deletion."""
        now = time.time() if now is None else now
        swept = []
        heads = yield _Call(_heads, _aheads, self.inner)
        for thread_id, head in sorted(heads.items()):
            if not (yield from self._expired(thread_id, head, now)):
                continue
            with self._deletion(thread_id):
                if self._retention is None:
                    yield _Call(self.inner.delete_thread, self.inner.adelete_thread, thread_id)
                else:
                    yield _blocking(self._keep_all_latest, thread_id)
            swept.append(thread_id)
        return swept

    def _keep_all_latest(self, thread_id: str) -> None:
        for ns in _namespaces(self.inner, thread_id):
            self._keep_latest(thread_id, ns)

    def _keep_latest(self, thread_id: str, checkpoint_ns: str) -> None:
        assert self._retention is not None
        newest = self.inner.get_tuple(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}}
        )
        if newest is None:
            return
        needs = _needs(newest.checkpoint, newest.metadata)
        floor = "~"
        if needs:
            parent = newest.parent_config
            holders = _walk(
                self.inner, newest.config,
                parent["configurable"]["checkpoint_id"] if parent else None, needs,
            )
            floor = min(holders.values(), default=ROOT)
        self._retention.keep_latest(thread_id, checkpoint_ns, 1, floor)

    def _deletion(self, thread_id: str) -> _Deleting:
        return _Deleting(self, thread_id)

    # -- in the background -------------------------------------------------------------

    def start_background(self) -> None:
        """Start the daemon sweeping every ``sweep_every`` seconds, once."""
        every = self.ttl.sweep_every
        if every is None or self._background is not None:
            return
        with self._lock:
            if self._background is not None:
                return
            self._background = threading.Thread(
                target=self._loop, args=(float(every),), name="agentstate-ttl-sweep",
                daemon=True,
            )
        self._background.start()

    def _loop(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self.sweep()
            except Exception:  # the next round tries again; a run is never affected
                _log_sweep_failure()

    def stop(self) -> None:
        """Stop the background sweeps (the daemon ends within one interval)."""
        self._stop.set()


class _Deleting:
    def __init__(self, sweeper: Sweeper, thread_id: str) -> None:
        self.sweeper, self.thread_id = sweeper, thread_id
        self.event = threading.Event()

    def __enter__(self) -> None:
        with self.sweeper._lock:
            self.sweeper._deleting[self.thread_id] = self.event
            self.sweeper._started.pop(self.thread_id, None)

    def __exit__(self, *exc: object) -> None:
        with self.sweeper._lock:
            self.sweeper._deleting.pop(self.thread_id, None)
        self.event.set()


def _parts(config: Any) -> tuple[str, str, Any]:
    configurable = config.get("configurable") or {}
    return (
        str(configurable.get("thread_id")),
        str(configurable.get("checkpoint_ns", "")),
        configurable.get("checkpoint_id"),
    )


def _config(thread_id: str, checkpoint_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                             "checkpoint_id": checkpoint_id}}


def _log_sweep_failure() -> None:
    import logging

    logging.getLogger("agentstate_reducer").warning(
        "ReducingSaver: a background TTL sweep failed; the next one retries", exc_info=True
    )

