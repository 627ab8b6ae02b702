"""The SQLite outbox: one file, stdlib ``sqlite3``, safe across threads and processes.

WAL journal with ``synchronous=NORMAL``: a committed job survives the process being
killed; after a power cut or OS crash the last commits may be lost (pass
``synchronous="FULL"`` to fsync every commit). Claims take the write lock up front
(``BEGIN IMMEDIATE``), so concurrent claimers queue instead of racing.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TypeVar

from ..errors import ConfigError, ConfigTypeError, OutboxError
from .base import (
    FAILED,
    READY,
    ConnectionPool,
    Job,
    Outbox,
    Row,
    Status,
    check_identifier,
    check_positive_int,
    check_seconds,
    make_job,
)

__all__ = ("SQLiteOutbox",)

# What SQLite says when the file, its directory or its mount cannot be written.
_READ_ONLY = ("readonly database", "unable to open database file", "read-only file system")


def _unwritable(cause: BaseException | None, path: Path) -> bool:
    """Whether ``cause`` failed a write to an existing file this process cannot write."""
    text = str(cause).lower()
    return path.is_file() and any(words in text for words in _READ_ONLY)

_T = TypeVar("_T")
_SYNCHRONOUS = ("NORMAL", "FULL")


class SQLiteOutbox(Outbox):
    """An :class:`~agentstate_reducer.outbox.Outbox` in a SQLite file.

    Connections come from a small pool shared by the threads of a process, so a thread
    that ends leaves nothing open; a new file is created readable by its owner only
    (``0600``), as it holds conversation content.

    Args:
        path: the database file, created if missing (``":memory:"`` is refused: it
            would be private to one connection).
        table: the table to use, created if missing.
        max_attempts: claims a job gets before it is dead-lettered.
        synchronous: ``"NORMAL"`` (default, survives process crashes) or ``"FULL"``
            (also survives power loss, slower commits).
        timeout: seconds to wait for another writer's lock.
        max_idle: connections kept open between calls, shared by all threads (a thread
            never holds one after its call returns).
        read_only: open the file for reading only: ``counts``, ``get``, ``original`` and
            ``dead_letters`` work, every other call raises ``OutboxError``. By default
            (``None``) an existing file this process cannot write (its permissions, a
            read-only mount) is opened that way instead of failing.

    Example:
        >>> outbox = SQLiteOutbox("memory-outbox.db")                    # doctest: +SKIP
        >>> reducer = MessageReducer(config=ReducerConfig(on_prune=[OutboxHook(outbox)]))
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = "agentstate_outbox",
        max_attempts: int = 5,
        synchronous: str = "NORMAL",
        timeout: float = 30.0,
        max_idle: int = 4,
        read_only: bool | None = None,
    ) -> None:
        super().__init__(max_attempts=max_attempts)
        if not isinstance(path, (str, os.PathLike)) or str(path) in ("", ":memory:"):
            raise ConfigError(
                f"path must name a database file shared by every worker, got {path!r:.80}"
            )
        if synchronous not in _SYNCHRONOUS:
            raise ConfigError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r:.80}")
        #: The database file.
        self.path = Path(path)
        #: The table holding the jobs.
        self.table = check_identifier("table", table)
        self.synchronous = synchronous
        self.timeout = check_seconds("timeout", timeout, allow_zero=True)
        #: Idle connections kept for reuse; more are opened while threads need them.
        self.max_idle = check_positive_int("max_idle", max_idle)
        if read_only not in (None, True, False):
            raise ConfigTypeError(f"read_only must be None, True or False, got {read_only!r:.80}")
        #: Whether the file is open for reading only.
        self.read_only = bool(read_only)
        if read_only is None and self.path.is_file() and not os.access(self.path, os.W_OK):
            self.read_only = True  # SQLite would open it read-only and fail each write
        self._pool = ConnectionPool(
            self, self._open, lambda conn: not conn.in_transaction, self.max_idle
        )
        if not self.read_only:
            try:
                self._create()
            except OutboxError as exc:
                if read_only is not None or not _unwritable(exc.__cause__, self.path):
                    raise
                self._pool.close()
                self.read_only = True
                self._pool = ConnectionPool(self, self._open, lambda conn: True, self.max_idle)
        if self.read_only:
            self._read("open the table", self._check_table)

    def _check_table(self, conn: sqlite3.Connection) -> None:
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self.table,)
        ).fetchone()
        if found is None:
            raise sqlite3.OperationalError(f"no table {self.table} in a read-only file")

    def _create(self) -> None:
        t = self.table
        with self._write("create the table") as conn:
            # executescript() would commit first: run the statements one by one instead.
            conn.execute(
                f"""
                CREATE TABLE IF NOT EXISTS {t} (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    namespace TEXT NOT NULL,
                    msg_key TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    payload TEXT NOT NULL,
                    status TEXT NOT NULL DEFAULT 'ready',
                    attempts INTEGER NOT NULL DEFAULT 0,
                    due_at REAL NOT NULL,
                    lease TEXT,
                    last_error TEXT,
                    created_at REAL NOT NULL,
                    updated_at REAL NOT NULL,
                    UNIQUE (namespace, msg_key)
                )
                """
            )
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS {t}_pending ON {t} (id) "
                "WHERE status IN ('ready', 'claimed')"
            )
            conn.execute(f"CREATE INDEX IF NOT EXISTS {t}_status ON {t} (status)")

    def __repr__(self) -> str:
        return f"SQLiteOutbox({str(self.path)!r}, table={self.table!r})"

    # -- connections ----------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self.read_only:
            return self._open_read_only()
        if not self.path.exists():
            # Conversation content: private to the owner (SQLite gives -wal/-shm the same mode).
            with contextlib.suppress(FileExistsError):
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        conn = sqlite3.connect(
            self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        try:
            self._enable_wal(conn)
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_read_only(self) -> sqlite3.Connection:
        uri = self.path.absolute().as_uri() + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=self.timeout, check_same_thread=False)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            # A WAL file whose -shm cannot be created (a read-only directory or mount):
            # SQLite reads it only as immutable, a snapshot nobody can be writing to.
            conn.close()
            conn = sqlite3.connect(
                uri + "&immutable=1", uri=True, timeout=self.timeout, check_same_thread=False
            )
        return conn

    def _connection(self) -> AbstractContextManager[sqlite3.Connection]:
        """A pooled connection: idle ones are shared by every thread, at most ``max_idle`` kept."""
        return self._pool.connection()

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL takes an exclusive lock that SQLite does not wait
        # for (the busy timeout does not apply), so processes opening it together retry.
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    @contextmanager
    def _write(self, action: str) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction; sqlite errors become :class:`OutboxError`."""
        if self.read_only:
            raise OutboxError(f"{self!r} is open for reading only: it cannot {action}")
        try:
            with self._connection() as conn:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    yield conn
                    conn.execute("COMMIT")
                finally:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
        except (sqlite3.Error, OSError) as exc:
            raise OutboxError(f"{self!r} could not {action}: {exc}") from exc

    def _read(self, action: str, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        try:
            with self._connection() as conn:
                return fn(conn)
        except (sqlite3.Error, OSError) as exc:
            raise OutboxError(f"{self!r} could not {action}: {exc}") from exc

    def close(self) -> None:
        """Close every idle connection; connections in use close when returned."""
        self._pool.close()

    # -- the backend ----------------------------------------------------------------

    def _insert(self, rows: list[Row]) -> int:
        now = time.time()
        with self._write("enqueue") as conn:
            cursor = conn.executemany(
                f"INSERT OR IGNORE INTO {self.table} "
                "(namespace, msg_key, kind, payload, due_at, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(*row, now, now, now) for row in rows],
            )
            return cursor.rowcount

    def _claim(self, limit: int, lease_seconds: float) -> list[Job]:
        token = uuid.uuid4().hex
        t = self.table
        with self._write("claim") as conn:
            now = time.time()
            conn.execute(
                f"UPDATE {t} SET status = 'failed', lease = NULL, updated_at = ?, "
                "last_error = 'lease expired after ' || attempts || ' attempt(s)' "
                "WHERE status = 'claimed' AND due_at <= ? AND attempts >= ?",
                (now, now, self.max_attempts),
            )
            ids = [
                row[0]
                for row in conn.execute(
                    f"SELECT id FROM {t} WHERE status IN ('ready', 'claimed') AND due_at <= ? "
                    "ORDER BY id LIMIT ?",
                    (now, limit),
                )
            ]
            if not ids:
                return []
            expires = now + lease_seconds
            marks = ",".join("?" * len(ids))
            conn.execute(
                f"UPDATE {t} SET status = 'claimed', attempts = attempts + 1, lease = ?, "
                f"due_at = ?, updated_at = ? WHERE id IN ({marks})",
                (token, expires, now, *ids),
            )
            found = conn.execute(
                f"SELECT id, namespace, msg_key, kind, payload, attempts FROM {t} "
                f"WHERE id IN ({marks}) ORDER BY id",
                ids,
            ).fetchall()
        return [make_job(*row, lease=token, lease_expires=expires) for row in found]

    def _ack(self, pairs: list[tuple[int, str]]) -> int:
        now = time.time()
        with self._write("acknowledge") as conn:
            cursor = conn.executemany(
                f"UPDATE {self.table} SET status = 'done', lease = NULL, updated_at = ? "
                "WHERE id = ? AND lease = ? AND status = 'claimed'",
                [(now, job_id, lease) for job_id, lease in pairs],
            )
            return cursor.rowcount

    def _fail(
        self, job_id: int, lease: str, error: str, retry_after: float, dead: bool
    ) -> Status | None:
        now = time.time()
        with self._write("record a failure") as conn:
            cursor = conn.execute(
                f"UPDATE {self.table} SET "
                "status = CASE WHEN attempts >= ? THEN 'failed' ELSE 'ready' END, "
                "lease = NULL, last_error = ?, due_at = ?, updated_at = ? "
                "WHERE id = ? AND lease = ? AND status = 'claimed'",
                (0 if dead else self.max_attempts, error, now + retry_after, now, job_id, lease),
            )
            if cursor.rowcount == 0:
                return None
            row = conn.execute(
                f"SELECT status FROM {self.table} WHERE id = ?", (job_id,)
            ).fetchone()
        return FAILED if row[0] == FAILED else READY

    def _renew(self, pairs: list[tuple[int, str]], lease_seconds: float) -> int:
        now = time.time()
        with self._write("renew leases") as conn:
            return conn.executemany(
                f"UPDATE {self.table} SET due_at = ?, updated_at = ? "
                "WHERE id = ? AND lease = ? AND status = 'claimed'",
                [(now + lease_seconds, now, job_id, lease) for job_id, lease in pairs],
            ).rowcount

    def _discard(self, ids: list[int]) -> int:
        now = time.time()
        with self._write("discard dead letters") as conn:
            return conn.executemany(
                f"UPDATE {self.table} SET status = 'done', updated_at = ? "
                "WHERE id = ? AND status = 'failed'",
                [(now, job_id) for job_id in ids],
            ).rowcount

    def _edit(self, job_id: int, kind: str, payload: str) -> bool:
        with self._write("edit a dead letter") as conn:
            return bool(
                conn.execute(
                    f"UPDATE {self.table} SET kind = ?, payload = ?, updated_at = ? "
                    "WHERE id = ? AND status = 'failed'",
                    (kind, payload, time.time(), job_id),
                ).rowcount
            )

    def _counts(self) -> Mapping[str, int]:
        def count(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(f"SELECT status, COUNT(*) FROM {self.table} GROUP BY status")
            return {status: n for status, n in rows}

        return self._read("count jobs", count)

    def _dead_letters(self, limit: int) -> list[Job]:
        def read(conn: sqlite3.Connection) -> list[Job]:
            rows = conn.execute(
                f"SELECT id, namespace, msg_key, kind, payload, attempts, last_error "
                f"FROM {self.table} WHERE status = 'failed' ORDER BY id LIMIT ?",
                (limit,),
            ).fetchall()
            return [make_job(*row[:6], status=FAILED, last_error=row[6]) for row in rows]

        return self._read("read dead letters", read)

    def _get(self, namespace: str, key: str) -> Job | None:
        def read(conn: sqlite3.Connection) -> Job | None:
            row = conn.execute(
                f"SELECT id, namespace, msg_key, kind, payload, attempts, status, last_error "
                f"FROM {self.table} WHERE namespace = ? AND msg_key = ?",
                (namespace, key),
            ).fetchone()
            if row is None:
                return None
            return make_job(*row[:6], status=row[6], last_error=row[7])

        return self._read("look a job up", read)

    def _revive(self, ids: list[int] | None) -> int:
        now = time.time()
        query = (
            f"UPDATE {self.table} SET status = 'ready', attempts = 0, due_at = ?, "
            "updated_at = ? WHERE status = 'failed'"
        )
        with self._write("revive dead letters") as conn:
            if ids is None:
                return conn.execute(query, (now, now)).rowcount
            return conn.executemany(
                query + " AND id = ?", [(now, now, job_id) for job_id in ids]
            ).rowcount

    def _purge(self, older_than: float) -> int:
        with self._write("purge done jobs") as conn:
            return conn.execute(
                f"DELETE FROM {self.table} WHERE status = 'done' AND updated_at < ?",
                (time.time() - older_than,),
            ).rowcount
