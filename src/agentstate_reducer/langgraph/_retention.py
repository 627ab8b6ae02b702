"""Retention for ``ReducingSaver``: keep the last K checkpoints of a thread's namespace.

One strategy per saver family, each deleting through the saver's own connection and
lock, in one transaction: the checkpoints older than the K newest, their writes, and
(where values live apart from checkpoints) the blobs no kept checkpoint can reach; after a
root checkpoint, also the namespaces of subgraph calls that finished before the oldest
kept root checkpoint.
Checkpoint ids are uuid6, ordered by time, which is how LangGraph itself finds the
latest checkpoint; so "the K newest" are the K last written, forks included.

A blob is deleted only when its version is older than every version of its channel that
a kept checkpoint references: a run writing meanwhile stores newer blobs before its
checkpoint, and those are never touched.

``DeltaChannel`` (langgraph >= 1.2.7): a checkpoint stores such a channel's value only
when it snapshots it; the others are rebuilt from the nearest ancestor that holds it plus
the writes in between (``get_delta_channel_history``). :class:`DeltaFloors` finds, for
each kept checkpoint, that ancestor, and nothing from it on is deleted (the ``floor``).
"""

from __future__ import annotations

import abc
import asyncio
import threading
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Protocol, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from .._drivers import _Call, _drive
from ..errors import ConfigError

__all__ = ("NO_FLOOR", "DeltaFloors", "Retention", "SUPPORTED", "retention_for")

#: The savers retention works with, as docs/langgraph.md lists them.
SUPPORTED = (
    "InMemorySaver",
    "SqliteSaver",
    "AsyncSqliteSaver",
    "PostgresSaver",
    "AsyncPostgresSaver",
    "any saver with prune() (keep_checkpoints=1 only)",
)

_T = TypeVar("_T")


def _is_call(checkpoint_ns: str) -> bool:
    # A subgraph call's namespace names its task after a ":" ("node:<task id>"), unlike a
    # subgraph compiled with checkpointer=True, whose state outlives each call.
    return ":" in checkpoint_ns


#: A floor above every checkpoint id (uuid6 hex): no DeltaChannel needs anything kept.
NO_FLOOR = "~"
#: Rebuilt from the thread's start: nothing older may go.
ROOT = ""


def _delta_channels(checkpoint: Any, metadata: Any) -> set[str]:
    """The DeltaChannels a checkpoint shows: those with updates since their snapshot
    (``counters_since_delta_snapshot``) and those it snapshots."""
    counters = (metadata or {}).get("counters_since_delta_snapshot") or {}
    values = checkpoint.get("channel_values") or {}
    return set(counters) | {k for k, v in values.items() if isinstance(v, _DeltaSnapshot)}


def _needs(checkpoint: Any, metadata: Any) -> set[str]:
    """The DeltaChannels a checkpoint's value is rebuilt for from its ancestors: written
    on its branch (a version) but not stored in it."""
    values = checkpoint.get("channel_values") or {}
    versions = checkpoint.get("channel_versions") or {}
    delta = _delta_channels(checkpoint, metadata)
    return {ch for ch in delta if ch in versions and ch not in values}


class DeltaFloors:
    """Per checkpoint put through the wrapper: where each DeltaChannel's value is found
    (itself, or the nearest ancestor holding it), so retention keeps what a kept
    checkpoint is rebuilt from.

    Learned from each ``put`` (what the checkpoint stores, its parent's entry); an entry
    missing (another process wrote the parent, or this one restarted) is found by walking
    the parents through the saver's ``get_tuple``, as ``get_delta_channel_history`` does.
    """

    #: Entries kept per thread namespace beyond ``keep``.
    SPARE = 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: ``(thread, ns) -> {checkpoint_id: (floor, {channel: holder_id})}``, in put order.
        self._known: dict[tuple[str, str], dict[str, tuple[str, dict[str, str]]]] = {}

    def _from_parent(
        self, where: tuple[str, str], parent: str | None, channels: set[str]
    ) -> dict[str, str] | None:
        if parent is None:
            return dict.fromkeys(channels, ROOT)
        with self._lock:
            entry = self._known.get(where, {}).get(parent)
        if entry is None or not channels <= entry[1].keys():
            return None
        return {ch: entry[1][ch] for ch in channels}

    def noting(
        self, saver: BaseCheckpointSaver[Any], stored: Any, checkpoint: Any, metadata: Any,
        parent: str | None, keep: int,
    ) -> Generator[_Call, Any, str]:
        """Learn the checkpoint ``put`` just stored (``stored``: the config it returned),
        yielding the read of each ancestor it must walk to (``get_tuple`` or
        ``aget_tuple``); returns the :meth:`floor` of its thread's namespace."""
        where = _where_of(stored)
        channels = _delta_channels(checkpoint, metadata)
        if not channels:
            return self.floor(*where, keep)
        values = checkpoint["channel_values"]
        inherited = self._from_parent(where, parent, channels - set(values))
        if inherited is None:
            inherited = yield from _walking(saver, stored, parent, channels - set(values))
        own = checkpoint["id"]
        holders = {ch: own if ch in values else inherited.get(ch, ROOT) for ch in channels}
        floor = min((holders[ch] for ch in _needs(checkpoint, metadata)), default=NO_FLOOR)
        with self._lock:
            known = self._known.setdefault(where, {})
            known[own] = (floor, holders)
            while len(known) > keep + self.SPARE:
                known.pop(next(iter(known)))
        return self.floor(*where, keep)

    def floor(self, thread_id: str, checkpoint_ns: str, keep: int) -> str:
        """The oldest checkpoint id that must stay so the ``keep`` newest can be rebuilt:
        :data:`NO_FLOOR` when none of them needs an ancestor; :data:`ROOT` (keep all)
        when a DeltaChannel is in play and the newest ``keep`` are not all known yet."""
        with self._lock:
            known = self._known.get((thread_id, checkpoint_ns))
            if not known:
                return NO_FLOOR
            newest = sorted(known, reverse=True)[:keep]
            if len(newest) < keep and len(known) < keep:
                # Older checkpoints this process never saw may need ancestors too.
                return ROOT
            return min(known[i][0] for i in newest)


def _where_of(config: Any) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


def _ancestor(stored: Any, parent: str) -> Any:
    configurable = stored["configurable"]
    return {"configurable": {
        "thread_id": configurable["thread_id"],
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "checkpoint_id": parent,
    }}


def _walking(
    saver: BaseCheckpointSaver[Any], stored: Any, parent: str | None, channels: set[str]
) -> Generator[_Call, Any, dict[str, str]]:
    """Nearest ancestor (from ``parent`` up) holding each channel, ``ROOT`` if none does,
    yielding the read of each ancestor."""
    found: dict[str, str] = {}
    remaining = set(channels)
    cursor = None if parent is None else _ancestor(stored, parent)
    while cursor is not None and remaining:
        tup = yield _Call(saver.get_tuple, saver.aget_tuple, cursor)
        if tup is None:
            break
        values = tup.checkpoint["channel_values"]
        for ch in [ch for ch in remaining if ch in values]:
            found[ch] = tup.checkpoint["id"]
            remaining.discard(ch)
        cursor = tup.parent_config
    return {**dict.fromkeys(remaining, ROOT), **found}


def _walk(
    saver: BaseCheckpointSaver[Any], stored: Any, parent: str | None, channels: set[str]
) -> dict[str, str]:
    """:func:`_walking` through ``saver.get_tuple``."""
    return _drive(_walking(saver, stored, parent, channels))


class Retention(Protocol):
    """Deletes all but the ``keep`` newest checkpoints of one thread's namespace, and
    never one at or after ``floor`` (a checkpoint id; :data:`NO_FLOOR`: no bound)."""

    def keep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None: ...

    async def akeep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None: ...


class _InMemory:
    """``InMemorySaver``: its dicts, edited under a lock of ours (it has none)."""

    def __init__(self, saver: InMemorySaver) -> None:
        self.saver = saver
        self.lock = threading.Lock()

    def _versions(self, stored: dict[str, Any], checkpoint_id: str) -> dict[str, Any]:
        versions = self.saver.serde.loads_typed(stored[checkpoint_id][0]).get("channel_versions")
        return dict(versions or {})

    def keep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        saver = self.saver
        with self.lock:
            namespaces = saver.storage.get(thread_id)
            stored = namespaces.get(checkpoint_ns) if namespaces is not None else None
            if not stored or len(stored) <= keep:
                return
            ids = sorted(stored, reverse=True)
            kept = [i for n, i in enumerate(ids) if n < keep or i >= floor]
            gone = ids[len(kept):]
            oldest: dict[str, str] = {}
            for checkpoint_id in kept:
                checkpoint, metadata, parent = stored[checkpoint_id]
                if parent is not None and parent not in kept:
                    stored[checkpoint_id] = (checkpoint, metadata, None)
                for channel, version in self._versions(stored, checkpoint_id).items():
                    if channel not in oldest or str(version) < oldest[channel]:
                        oldest[channel] = str(version)
            for checkpoint_id in gone:
                # The blobs a deleted checkpoint referenced are the only candidates.
                for channel, version in self._versions(stored, checkpoint_id).items():
                    if channel in oldest and str(version) < oldest[channel]:
                        saver.blobs.pop((thread_id, checkpoint_ns, channel, version), None)
                del stored[checkpoint_id]
                saver.writes.pop((thread_id, checkpoint_ns, checkpoint_id), None)
            if checkpoint_ns == "" and namespaces is not None:
                self._drop_finished_calls(thread_id, namespaces, min(stored))

    def _drop_finished_calls(
        self, thread_id: str, namespaces: dict[str, Any], oldest_root: str
    ) -> None:
        for ns in [ns for ns in namespaces if _is_call(ns)]:
            stored = namespaces[ns]
            if stored and max(stored) < oldest_root:
                for checkpoint_id in list(stored):
                    for channel, version in self._versions(stored, checkpoint_id).items():
                        self.saver.blobs.pop((thread_id, ns, channel, version), None)
                    self.saver.writes.pop((thread_id, ns, checkpoint_id), None)
                del namespaces[ns]

    async def akeep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        self.keep_latest(thread_id, checkpoint_ns, keep, floor)


# SQLite: values live inside the checkpoint row; only writes hang off it.
_SQLITE_CUTOFF = (
    "(SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY checkpoint_id DESC LIMIT 1 OFFSET ?)"
)
_SQLITE_WRITES = (
    f"DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id < "
    f"{_SQLITE_CUTOFF} AND checkpoint_id < ?"
)
_SQLITE_CHECKPOINTS = (
    f"DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id < "
    f"{_SQLITE_CUTOFF} AND checkpoint_id < ?"
)
# The oldest kept checkpoint no longer has a parent to point at.
_SQLITE_UNPARENT = (
    "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? AND "
    "checkpoint_ns = ? AND parent_checkpoint_id < (SELECT MIN(checkpoint_id) FROM "
    "checkpoints WHERE thread_id = ? AND checkpoint_ns = ?)"
)


# Namespaces of finished subgraph calls: newest checkpoint older than every kept root one.
_SQLITE_FINISHED_CALLS = (
    "SELECT checkpoint_ns FROM checkpoints WHERE thread_id = ? AND checkpoint_ns LIKE '%:%' "
    "GROUP BY checkpoint_ns HAVING MAX(checkpoint_id) < (SELECT MIN(checkpoint_id) FROM "
    "checkpoints WHERE thread_id = ? AND checkpoint_ns = '')"
)


def _sqlite(
    thread_id: str, checkpoint_ns: str, keep: int, floor: str
) -> list[tuple[str, tuple[Any, ...]]]:
    cut = (thread_id, checkpoint_ns, thread_id, checkpoint_ns, keep - 1, floor)
    statements: list[tuple[str, tuple[Any, ...]]] = [
        (_SQLITE_WRITES, cut),
        (_SQLITE_CHECKPOINTS, cut),
        (_SQLITE_UNPARENT, (thread_id, checkpoint_ns, thread_id, checkpoint_ns)),
    ]
    if checkpoint_ns == "":
        calls = (thread_id, thread_id, thread_id)
        for table in ("writes", "checkpoints"):
            statements.append((
                f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns IN "
                f"({_SQLITE_FINISHED_CALLS})",
                calls,
            ))
    return statements


class _Threaded(abc.ABC):
    """A sync saver's retention: ``akeep_latest`` runs ``keep_latest`` in a worker thread."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    @abc.abstractmethod
    def keep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        """Delete through the saver's own connection, in one transaction."""

    async def akeep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        await asyncio.to_thread(self.keep_latest, thread_id, checkpoint_ns, keep, floor)


class _OnLoop(abc.ABC):
    """An async saver's retention: ``keep_latest`` runs ``akeep_latest`` on the saver's loop."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def keep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        _on_loop(self.saver, self.akeep_latest(thread_id, checkpoint_ns, keep, floor))

    @abc.abstractmethod
    async def akeep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        """Delete through the saver's own async connection, in one transaction."""


class _Sqlite(_Threaded):
    """``SqliteSaver``: its connection, under its lock, committed once."""

    def keep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        with self.saver.cursor() as cur:  # its lock; commits on exit
            if self.saver.conn.isolation_level is None and not self.saver.conn.in_transaction:
                # An autocommit connection (how SqliteStore opens one): still one transaction.
                cur.execute("BEGIN")
            for sql, params in _sqlite(thread_id, checkpoint_ns, keep, floor):
                cur.execute(sql, params)


class _AsyncSqlite(_OnLoop):
    """``AsyncSqliteSaver``: its aiosqlite connection, under its lock, on its loop."""

    async def akeep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        saver = self.saver
        async with saver.lock, saver.conn.cursor() as cur:
            for sql, params in _sqlite(thread_id, checkpoint_ns, keep, floor):
                await cur.execute(sql, params)
            await saver.conn.commit()


# PostgreSQL: channel values live in checkpoint_blobs, keyed by (channel, version).
_PG_CUTOFF = (
    "(SELECT checkpoint_id FROM checkpoints WHERE thread_id = %(t)s AND checkpoint_ns = %(ns)s "
    "ORDER BY checkpoint_id DESC LIMIT 1 OFFSET %(offset)s)"
)
_POSTGRES_NAMESPACE = (
    "DELETE FROM checkpoint_writes WHERE thread_id = %(t)s AND checkpoint_ns = %(ns)s "
    f"AND checkpoint_id < {_PG_CUTOFF} AND checkpoint_id < %(floor)s",
    "DELETE FROM checkpoints WHERE thread_id = %(t)s AND checkpoint_ns = %(ns)s "
    f"AND checkpoint_id < {_PG_CUTOFF} AND checkpoint_id < %(floor)s",
    "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = %(t)s "
    "AND checkpoint_ns = %(ns)s AND parent_checkpoint_id < (SELECT MIN(checkpoint_id) "
    "FROM checkpoints WHERE thread_id = %(t)s AND checkpoint_ns = %(ns)s)",
    # Older than every version of its channel a kept checkpoint references.
    "DELETE FROM checkpoint_blobs b USING (SELECT v.key AS channel, MIN(v.value) AS oldest "
    "FROM checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') v "
    "WHERE c.thread_id = %(t)s AND c.checkpoint_ns = %(ns)s GROUP BY v.key) k "
    "WHERE b.thread_id = %(t)s AND b.checkpoint_ns = %(ns)s AND b.channel = k.channel "
    "AND b.version < k.oldest",
)


_PG_FINISHED_CALLS = (
    "SELECT checkpoint_ns FROM checkpoints WHERE thread_id = %(t)s AND checkpoint_ns LIKE "
    "'%%:%%' GROUP BY checkpoint_ns HAVING MAX(checkpoint_id) < (SELECT MIN(checkpoint_id) "
    "FROM checkpoints WHERE thread_id = %(t)s AND checkpoint_ns = '')"
)
# Blobs and writes first: the namespaces are found through their checkpoints.
_POSTGRES_ROOT = _POSTGRES_NAMESPACE + tuple(
    f"DELETE FROM {table} WHERE thread_id = %(t)s AND checkpoint_ns IN ({_PG_FINISHED_CALLS})"
    for table in ("checkpoint_blobs", "checkpoint_writes", "checkpoints")
)


def _postgres(checkpoint_ns: str) -> tuple[str, ...]:
    return _POSTGRES_ROOT if checkpoint_ns == "" else _POSTGRES_NAMESPACE


class _Postgres(_Threaded):
    """``PostgresSaver``: its connection (or pool) and lock, in one transaction."""

    def keep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        params = {"t": thread_id, "ns": checkpoint_ns, "offset": keep - 1, "floor": floor}
        with self.saver._cursor() as cur, cur.connection.transaction():
            for sql in _postgres(checkpoint_ns):
                cur.execute(sql, params)


class _AsyncPostgres(_OnLoop):
    """``AsyncPostgresSaver``: the same statements through its async connection."""

    async def akeep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        params = {"t": thread_id, "ns": checkpoint_ns, "offset": keep - 1, "floor": floor}
        async with self.saver._cursor() as cur, cur.connection.transaction():
            for sql in _postgres(checkpoint_ns):
                await cur.execute(sql, params)


class _Prune:
    """Any other saver with ``prune``: its own ``keep_latest`` strategy (one checkpoint).

    Whether that keeps a DeltaChannel's snapshot chain is the saver's own contract
    (LangGraph asks ``prune`` implementations to); the wrapper cannot see its storage.
    """

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.saver = saver

    def keep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        self.saver.prune([thread_id], strategy="keep_latest")

    async def akeep_latest(
        self, thread_id: str, checkpoint_ns: str, keep: int, floor: str = NO_FLOOR
    ) -> None:
        await self.saver.aprune([thread_id], strategy="keep_latest")


def _on_loop(saver: Any, work: Coroutine[Any, Any, _T]) -> _T:
    """Run ``work`` on an async saver's loop from another thread, as its sync methods do."""
    return asyncio.run_coroutine_threadsafe(work, saver.loop).result()


def _families() -> list[tuple[type, Callable[[Any], Retention]]]:
    found: list[tuple[type, Callable[[Any], Retention]]] = [(InMemorySaver, _InMemory)]
    # Each family is an optional package: only the installed ones can be the inner saver.
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        pass
    else:
        found.append((SqliteSaver, _Sqlite))
    try:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError:
        pass
    else:
        found.append((AsyncSqliteSaver, _AsyncSqlite))
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        pass
    else:
        found += [(PostgresSaver, _Postgres), (AsyncPostgresSaver, _AsyncPostgres)]
    return found


def retention_for(inner: BaseCheckpointSaver[Any], keep: int) -> Retention:
    """The strategy that keeps ``keep`` checkpoints per namespace in ``inner``.

    Raises:
        ConfigError: ``inner`` is a saver retention cannot delete from (the message lists
            the supported ones), or only supports ``keep == 1`` through its ``prune``.
    """
    for family, strategy in _families():
        if isinstance(inner, family):
            return strategy(inner)
    if type(inner).prune is not BaseCheckpointSaver.prune:
        if keep == 1:
            return _Prune(inner)
        raise ConfigError(
            f"keep_checkpoints={keep!r} is not supported for {type(inner).__name__}: its "
            "prune() keeps only the latest checkpoint; use keep_checkpoints=1"
        )
    raise ConfigError(
        f"keep_checkpoints is not supported for {type(inner).__name__}, which has no way to "
        f"delete single checkpoints; supported: {', '.join(SUPPORTED)}"
    )
