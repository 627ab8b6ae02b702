"""The PostgreSQL outbox (psycopg 3): claims with ``FOR UPDATE SKIP LOCKED``.

Claimers never wait for each other: each locks the oldest due rows nobody else holds
and leases them in the same statement. Times (retry delays, leases) use the server's
clock, so workers on several hosts agree on them.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, TypeVar

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
    check_one_of,
    check_positive_int,
    check_seconds,
    make_job,
)

try:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        'PostgresOutbox needs psycopg 3: pip install "agentstate-reducer[postgres]"'
    ) from exc

__all__ = ("PostgresOutbox",)

_T = TypeVar("_T")
_IDLE = psycopg.pq.TransactionStatus.IDLE
# A deadlock between two enqueues of overlapping batches is resolved by aborting one:
# retrying it is safe because the insert skips keys already stored.
_RETRIES = 3
_CONNECT_TIMEOUT = 10.0


def _reusable(conn: Any) -> bool:
    return not conn.closed and not conn.broken and conn.info.transaction_status == _IDLE

_SCHEMA = """
CREATE TABLE IF NOT EXISTS {t} (
    id bigserial PRIMARY KEY,
    namespace text NOT NULL,
    msg_key text NOT NULL,
    kind text NOT NULL,
    payload text NOT NULL,
    status text NOT NULL DEFAULT 'ready'
        CHECK (status IN ('ready', 'claimed', 'done', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    due_at timestamptz NOT NULL DEFAULT now(),
    lease text,
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (namespace, msg_key)
);
CREATE INDEX IF NOT EXISTS {pending} ON {t} (id) WHERE status IN ('ready', 'claimed');
CREATE INDEX IF NOT EXISTS {status} ON {t} (status);
"""

# Ids are drawn in batch order (FIFO), rows inserted in key order: two enqueues of
# overlapping batches then wait for each other's keys in one order, never in a cycle
# (inserted in batch order, 1.5% of such calls ended in "deadlock detected"). A CTE
# with a volatile function is never inlined, so nextval runs before the sort.
_INSERT = """
WITH u AS (
    SELECT nextval(pg_get_serial_sequence(%s, 'id')) AS i, n, k, d, p
    FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[])
        WITH ORDINALITY AS x(n, k, d, p, o)
    ORDER BY o
)
INSERT INTO {t} (id, namespace, msg_key, kind, payload)
SELECT i, n, k, d, p FROM u
ORDER BY n, k
ON CONFLICT (namespace, msg_key) DO NOTHING
"""

_EXPIRE = """
UPDATE {t} SET status = 'failed', lease = NULL, updated_at = now(),
    last_error = 'lease expired after ' || attempts || ' attempt(s)'
WHERE id IN (
    SELECT id FROM {t}
    WHERE status = 'claimed' AND due_at <= now() AND attempts >= %(max)s
    FOR UPDATE SKIP LOCKED
)
"""

_CLAIM = """
WITH due AS (
    SELECT id FROM {t}
    WHERE status IN ('ready', 'claimed') AND due_at <= now()
        AND NOT (status = 'claimed' AND attempts >= %(max)s)
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE {t} AS j SET status = 'claimed', attempts = j.attempts + 1, lease = %(lease)s,
    due_at = now() + make_interval(secs => %(secs)s), updated_at = now()
FROM due WHERE j.id = due.id
RETURNING j.id, j.namespace, j.msg_key, j.kind, j.payload, j.attempts,
    extract(epoch FROM j.due_at)::float8
"""

_ACK = """
UPDATE {t} AS j SET status = 'done', lease = NULL, updated_at = now()
FROM unnest(%s::bigint[], %s::text[]) AS a(id, lease)
WHERE j.id = a.id AND j.lease = a.lease AND j.status = 'claimed'
"""

_FAIL = """
UPDATE {t} SET status = CASE WHEN attempts >= %(max)s THEN 'failed' ELSE 'ready' END,
    lease = NULL, last_error = %(error)s, updated_at = now(),
    due_at = now() + make_interval(secs => %(delay)s)
WHERE id = %(id)s AND lease = %(lease)s AND status = 'claimed'
RETURNING status
"""

_RENEW = """
UPDATE {t} AS j SET due_at = now() + make_interval(secs => %s), updated_at = now()
FROM unnest(%s::bigint[], %s::text[]) AS a(id, lease)
WHERE j.id = a.id AND j.lease = a.lease AND j.status = 'claimed'
"""

_DISCARD = """
UPDATE {t} SET status = 'done', updated_at = now() WHERE status = 'failed' AND id = ANY(%s)
"""

_EDIT = """
UPDATE {t} SET kind = %s, payload = %s, updated_at = now() WHERE status = 'failed' AND id = %s
"""

_DEAD = """
SELECT id, namespace, msg_key, kind, payload, attempts, last_error
FROM {t} WHERE status = 'failed' ORDER BY id LIMIT %s
"""

_GET = """
SELECT id, namespace, msg_key, kind, payload, attempts, status, last_error
FROM {t} WHERE namespace = %s AND msg_key = %s
"""

_REVIVE = """
UPDATE {t} SET status = 'ready', attempts = 0, due_at = now(), updated_at = now()
WHERE status = 'failed' AND (%(all)s OR id = ANY(%(ids)s::bigint[]))
"""

_PURGE = """
DELETE FROM {t} WHERE status = 'done' AND updated_at < now() - make_interval(secs => %s)
"""


# Which table a connection sees under the outbox's name: the server (by its start time),
# the database and the table's oid. Equal on two connections: the same table.
_IDENTITY = (
    "SELECT pg_postmaster_start_time()::text, current_database()::text, "
    "to_regclass(%s)::oid::bigint"
)


def _url_connect_timeout(conninfo: str) -> float:
    """The ``connect_timeout`` a connection string (or ``PGCONNECT_TIMEOUT``) names, else 10."""
    if not conninfo:
        return _CONNECT_TIMEOUT
    try:
        given = conninfo_to_dict(conninfo).get("connect_timeout")
    except psycopg.ProgrammingError as exc:
        # Its text could quote a password: name the problem only.
        raise ConfigError("conninfo is not a valid libpq connection string or URL") from exc
    given = given if given is not None else os.environ.get("PGCONNECT_TIMEOUT")
    if given is None:
        return _CONNECT_TIMEOUT
    try:
        seconds = float(given)
    except ValueError:
        raise ConfigError(
            f"connect_timeout in conninfo must be a number, got {given!r:.40}"
        ) from None
    # libpq's own reading: zero or less waits forever; the outbox never does.
    return seconds if seconds > 0 else _CONNECT_TIMEOUT


class _Watchdog:
    """Cuts a connection whose call outlives ``seconds``.

    libpq has no client-side statement timeout: a server (or a network path) that stops
    answering would block the caller for as long as the outage lasts. Shutting the
    socket down makes the blocked read fail at once; the connection is then closed.
    One clock thread per process serves every watchdog: arming one is a heap push, not
    a thread start (a ``threading.Timer`` per call cost 0.2 ms, and up to 8 ms at p99
    on a busy host).
    """

    def __init__(self, conn: Any, seconds: float) -> None:
        self.conn = conn
        self.seconds = seconds
        #: Whether the call ran out of time and the connection was cut.
        self.fired = False
        self._done = False
        self._lock = threading.Lock()

    def __enter__(self) -> _Watchdog:
        _CLOCK.arm(time.monotonic() + self.seconds, self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:  # after this, the clock can no longer cut the connection
            self._done = True
        if self.fired:
            self.conn.close()

    def expire(self) -> None:
        """Called by the clock at the deadline: cut the connection unless the call ended."""
        with self._lock:
            if self._done:
                return
            self.fired = True
            try:
                sock = socket.socket(fileno=os.dup(self.conn.fileno()))
            except (OSError, psycopg.Error):
                return
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    @property
    def done(self) -> bool:
        return self._done


class _Clock:
    """The thread that expires watchdogs, in deadline order; started on first use."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Watchdog]] = []
        self._count = itertools.count()
        self._pid = -1

    def arm(self, deadline: float, watchdog: _Watchdog) -> None:
        with self._cond:
            if self._pid != os.getpid():
                # A fresh process (first use, or a fork: the parent's thread is not here).
                self._heap, self._pid = [], os.getpid()
                threading.Thread(target=self._run, name="agentstate-outbox-clock",
                                 daemon=True).start()
            first = not self._heap or deadline < self._heap[0][0]
            heapq.heappush(self._heap, (deadline, next(self._count), watchdog))
            if first:
                self._cond.notify()

    def _run(self) -> None:
        pid = os.getpid()
        with self._cond:
            while self._pid == pid:
                heap = self._heap
                while heap and heap[0][2].done:
                    heapq.heappop(heap)
                if not heap:
                    self._cond.wait()
                    continue
                wait = heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(heap)[2].expire()


_CLOCK = _Clock()


class PostgresOutbox(Outbox):
    """An :class:`~agentstate_reducer.outbox.Outbox` in a PostgreSQL table.

    Give either a connection string (the outbox then keeps a small pool of autocommit
    connections shared by all threads: a thread that ends leaves nothing open) or a
    ``psycopg_pool.ConnectionPool`` (anything whose ``connection()`` is a context
    manager yielding a psycopg connection).

    Every call ends within ``timeout`` seconds (connecting: ``connect_timeout``): a
    server that stops answering raises :class:`~agentstate_reducer.OutboxError`
    instead of blocking ``reduce()``, and the connection is dropped.

    Args:
        conninfo: a libpq connection string or URL.
        pool: a connection pool, instead of ``conninfo``.
        table: the table to use, created (with its indexes) if missing.
        max_attempts: claims a job gets before it is dead-lettered.
        timeout: seconds one call (a transaction) may take, client side; also the
            server's ``statement_timeout`` on connections the outbox opens.
        connect_timeout: seconds to open a connection (by default the
            ``connect_timeout`` of ``conninfo``, else 10; libpq counts whole seconds, at
            least 2).
        max_idle: connections kept open between calls.

    Example:
        >>> outbox = PostgresOutbox("postgresql://app@db/app")          # doctest: +SKIP
        >>> reducer = MessageReducer(config=ReducerConfig(on_prune=[OutboxHook(outbox)]))
    """

    def __init__(
        self,
        conninfo: str | None = None,
        *,
        pool: Any = None,
        table: str = "agentstate_outbox",
        max_attempts: int = 5,
        timeout: float = 30.0,
        connect_timeout: float | None = None,
        max_idle: int = 4,
    ) -> None:
        super().__init__(max_attempts=max_attempts)
        check_one_of(conninfo=conninfo, pool=pool)
        if conninfo is not None and not isinstance(conninfo, str):
            raise ConfigTypeError(f"conninfo must be a connection string, got {conninfo!r:.80}")
        if pool is not None and not callable(getattr(pool, "connection", None)):
            raise ConfigTypeError(
                f"pool must have a connection() context manager, got {pool!r:.80}"
            )
        #: The connection string, when no pool is used.
        self.conninfo: str = conninfo or ""
        #: The connection pool, if one was given.
        self.pool = pool
        #: The table holding the jobs.
        self.table = check_identifier("table", table)
        self._t = sql.Identifier(table)
        # The table as pg_get_serial_sequence reads it (a quoted identifier).
        self._quoted = '"' + table + '"'
        #: Seconds one call may take before the connection is cut.
        self.timeout = check_seconds("timeout", timeout, allow_zero=False)
        #: Seconds to open a connection.
        if connect_timeout is None:
            connect_timeout = _url_connect_timeout(self.conninfo)
        self.connect_timeout = check_seconds("connect_timeout", connect_timeout, allow_zero=False)
        #: Idle connections kept for reuse.
        self.max_idle = check_positive_int("max_idle", max_idle)
        self._own = ConnectionPool(self, self._open, _reusable, self.max_idle)

        def create(conn: Any) -> None:
            # Two processes creating the same table at once would collide in the catalog.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"outbox:{table}",))
            conn.execute(
                self._sql(
                    _SCHEMA,
                    pending=sql.Identifier(f"{table}_pending"),
                    status=sql.Identifier(f"{table}_status"),
                )
            )

        self._run("create the table", create, statements=2)

    def __repr__(self) -> str:
        return f"PostgresOutbox(table={self.table!r})"

    def _sql(self, text: str, **names: Any) -> Any:
        return sql.SQL(text).format(t=self._t, **names)

    # -- connections ----------------------------------------------------------------

    def _open(self) -> Any:
        conn = psycopg.connect(
            self.conninfo,
            autocommit=True,
            connect_timeout=max(2, math.ceil(self.connect_timeout)),  # libpq's minimum
        )
        try:
            with _Watchdog(conn, self.timeout):
                conn.execute(f"SET statement_timeout = {int(self.timeout * 1000)}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _connection(self) -> AbstractContextManager[Any]:
        if self.pool is not None:
            return self.pool.connection()  # type: ignore[no-any-return]
        return self._own.connection()

    def _run(self, action: str, fn: Callable[[Any], _T], *, statements: int = 1) -> _T:
        """Run ``fn(conn)`` in one transaction within ``timeout``; psycopg errors, a
        stalled server and a refused connection become :class:`OutboxError`.

        ``fn`` running one statement on an autocommit connection needs no ``BEGIN`` and
        ``COMMIT`` of its own: one round trip instead of three.
        """
        for attempt in range(_RETRIES):
            watchdog: _Watchdog | None = None
            try:
                with self._connection() as conn:
                    watchdog = _Watchdog(conn, self.timeout)
                    with watchdog:
                        if statements == 1 and conn.autocommit:
                            return fn(conn)
                        with conn.transaction():
                            return fn(conn)
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure) as exc:
                if attempt == _RETRIES - 1:
                    raise OutboxError(f"{self!r} could not {action}: {exc}") from exc
            except psycopg.Error as exc:
                if watchdog is not None and watchdog.fired:
                    raise OutboxError(
                        f"{self!r} could not {action}: no answer within timeout={self.timeout}s"
                    ) from exc
                raise OutboxError(f"{self!r} could not {action}: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the idle connections this object opened (a pool is left to its owner);
        connections in use close when their call returns."""
        self._own.close()

    # -- the backend ----------------------------------------------------------------

    def _insert(self, rows: list[Row]) -> int:
        query, params = self._insert_params(rows)
        return self._run("enqueue", lambda conn: int(conn.execute(query, params).rowcount))

    # -- on a caller's connection (ReducingSaver's joint commit) ------------------

    def _insert_params(self, rows: list[Row]) -> tuple[Any, list[Any]]:
        columns = [list(column) for column in zip(*rows, strict=True)]
        return self._sql(_INSERT), [self._quoted, *columns]

    def insert_on(self, conn: Any, rows: list[Row]) -> int:
        """Insert ``rows`` (:func:`~agentstate_reducer.outbox.base.encode_rows`) through
        ``conn``, a psycopg connection, in whatever transaction it has open; the number
        of new jobs. The caller commits, and bounds the call."""
        if not rows:
            return 0
        query, params = self._insert_params(rows)
        return int(conn.execute(query, params).rowcount)

    async def ainsert_on(self, conn: Any, rows: list[Row]) -> int:
        """:meth:`insert_on` through a psycopg ``AsyncConnection``."""
        if not rows:
            return 0
        query, params = self._insert_params(rows)
        cursor = await conn.execute(query, params)
        return int(cursor.rowcount)

    def identity(self) -> tuple[Any, ...]:
        """What :meth:`identity_on` returns for the outbox's own connections."""
        return self._run("read its identity", self.identity_on)

    def identity_on(self, conn: Any) -> tuple[Any, ...]:
        """The server, database and table oid ``conn`` sees under the outbox's table name
        (the oid is ``None`` when it sees none): equal for two connections, one table."""
        row = conn.execute(_IDENTITY, (self._quoted,)).fetchone()
        return tuple(row.values()) if isinstance(row, Mapping) else tuple(row)

    async def aidentity_on(self, conn: Any) -> tuple[Any, ...]:
        """:meth:`identity_on` through a psycopg ``AsyncConnection``."""
        cursor = await conn.execute(_IDENTITY, (self._quoted,))
        row = await cursor.fetchone()
        return tuple(row.values()) if isinstance(row, Mapping) else tuple(row)

    def _claim(self, limit: int, lease_seconds: float) -> list[Job]:
        token = uuid.uuid4().hex
        params = {"max": self.max_attempts, "limit": limit, "lease": token, "secs": lease_seconds}
        expire, claim = self._sql(_EXPIRE), self._sql(_CLAIM)

        def run(conn: Any) -> list[Any]:
            conn.execute(expire, params)
            return conn.execute(claim, params).fetchall()  # type: ignore[no-any-return]

        rows = self._run("claim", run, statements=2)
        return [make_job(*row[:6], lease=token, lease_expires=row[6]) for row in rows]

    def _ack(self, pairs: list[tuple[int, str]]) -> int:
        ids, leases = [list(column) for column in zip(*pairs, strict=True)]
        query = self._sql(_ACK)
        return self._run(
            "acknowledge", lambda conn: int(conn.execute(query, (ids, leases)).rowcount)
        )

    def _fail(
        self, job_id: int, lease: str, error: str, retry_after: float, dead: bool
    ) -> Status | None:
        params = {
            "max": 0 if dead else self.max_attempts,
            "error": error,
            "delay": retry_after,
            "id": job_id,
            "lease": lease,
        }
        query = self._sql(_FAIL)
        row = self._run("record a failure", lambda conn: conn.execute(query, params).fetchone())
        if row is None:
            return None
        return FAILED if row[0] == FAILED else READY

    def _renew(self, pairs: list[tuple[int, str]], lease_seconds: float) -> int:
        ids, leases = [list(column) for column in zip(*pairs, strict=True)]
        query = self._sql(_RENEW)
        return self._run(
            "renew leases",
            lambda conn: int(conn.execute(query, (lease_seconds, ids, leases)).rowcount),
        )

    def _discard(self, ids: list[int]) -> int:
        query = self._sql(_DISCARD)
        return self._run(
            "discard dead letters", lambda conn: int(conn.execute(query, (ids,)).rowcount)
        )

    def _edit(self, job_id: int, kind: str, payload: str) -> bool:
        query = self._sql(_EDIT)
        return self._run(
            "edit a dead letter",
            lambda conn: bool(conn.execute(query, (kind, payload, job_id)).rowcount),
        )

    def _counts(self) -> Mapping[str, int]:
        query = self._sql("SELECT status, count(*) FROM {t} GROUP BY status")
        rows = self._run("count jobs", lambda conn: conn.execute(query).fetchall())
        return {status: n for status, n in rows}

    def _dead_letters(self, limit: int) -> list[Job]:
        query = self._sql(_DEAD)
        rows = self._run("read dead letters", lambda conn: conn.execute(query, (limit,)).fetchall())
        return [make_job(*row[:6], status=FAILED, last_error=row[6]) for row in rows]

    def _get(self, namespace: str, key: str) -> Job | None:
        query = self._sql(_GET)
        row = self._run(
            "look a job up", lambda conn: conn.execute(query, (namespace, key)).fetchone()
        )
        if row is None:
            return None
        return make_job(*row[:6], status=row[6], last_error=row[7])

    def _revive(self, ids: list[int] | None) -> int:
        params = {"all": ids is None, "ids": ids or []}
        query = self._sql(_REVIVE)
        return self._run(
            "revive dead letters", lambda conn: int(conn.execute(query, params).rowcount)
        )

    def _purge(self, older_than: float) -> int:
        query = self._sql(_PURGE)
        return self._run(
            "purge done jobs", lambda conn: int(conn.execute(query, (older_than,)).rowcount)
        )
