"""Checkpoint and hand-off in one commit: a ``PostgresSaver`` and a ``PostgresOutbox`` in
one database.

``ReducingSaver`` reduces a checkpoint before writing it, and the reducer hands what it
pruned to its ``OutboxHook``. Two commits (the outbox's, then the saver's) leave a window:
a crash between them keeps the pruned messages in the durable state while the outbox
already holds them, and a step that re-runs after the crash creates its messages again
under new ids (LangGraph gives an id-less message a fresh uuid), so a message that step
created and pruned at once is handed over twice. Here the hook stages its rows
(:func:`~agentstate_reducer.outbox.relay.staged`) and the wrapper inserts them, then
writes the checkpoint through a ``PostgresSaver`` bound to the same connection, in one
transaction: both are stored, or neither is.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..outbox.relay import AsyncOutboxHook, OutboxHook, Staged
from ..reducer import MessageReducer

__all__ = ("Joint", "joint_for")


def _classes() -> tuple[type, type] | None:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        return None
    return PostgresSaver, AsyncPostgresSaver


def _postgres_outbox(reducer: MessageReducer) -> Any:
    """The first PostgreSQL outbox an outbox hook of ``reducer`` writes to, if any."""
    try:
        from ..outbox.postgres import PostgresOutbox
    except ImportError:
        return None
    for hook in reducer.config.on_prune:
        if isinstance(hook, (OutboxHook, AsyncOutboxHook)) and isinstance(
            hook.outbox, PostgresOutbox
        ):
            return hook.outbox
    return None


class Joint:
    """One transaction for a checkpoint and the rows its reduce staged.

    Whether the saver's connection sees the outbox's own table (same server, database
    and table oid) is asked on the first write and kept: when it does not, the wrapper
    falls back to two commits, the outbox's first.
    """

    def __init__(self, inner: Any, outbox: Any, *, is_async: bool) -> None:
        self.inner = inner
        self.outbox = outbox
        self.is_async = is_async
        #: ``None`` until the first write asked; then whether the commit is joint.
        self.known: bool | None = None
        self._lock = threading.Lock()

    # -- the saver's connection, as its own methods take it -------------------------

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        import psycopg

        conn = self.inner.conn
        if isinstance(conn, psycopg.Connection):
            with self.inner.lock:  # the saver's: no call of its own can interleave
                yield conn
        else:
            with conn.connection() as pooled:
                yield pooled

    @asynccontextmanager
    async def _aconnection(self) -> AsyncIterator[Any]:
        import psycopg

        conn = self.inner.conn
        if isinstance(conn, psycopg.AsyncConnection):
            async with self.inner.lock:
                yield conn
        else:
            async with conn.connection() as pooled:
                yield pooled

    # -- is it one database? ----------------------------------------------------------

    def decided(self) -> bool:
        """Whether writes are joint, asked once (sync savers)."""
        if self.known is None:
            with self._lock:
                if self.known is None:
                    with self._connection() as conn:
                        theirs = self.outbox.identity_on(conn)
                    self.known = theirs[-1] is not None and theirs == self.outbox.identity()
        return self.known

    async def adecided(self) -> bool:
        """:meth:`decided` for async savers."""
        if self.known is None:
            async with self._aconnection() as conn:
                theirs = await self.outbox.aidentity_on(conn)
            ours = await asyncio.to_thread(self.outbox.identity)
            self.known = theirs[-1] is not None and theirs == ours
        return self.known

    # -- the write ------------------------------------------------------------------

    def put(self, box: Staged, *args: Any) -> RunnableConfig:
        """Insert ``box``'s rows and write the checkpoint (``put(*args)``) in one
        transaction on the saver's connection."""
        from langgraph.checkpoint.postgres import PostgresSaver

        with self._connection() as conn, conn.transaction():
            self.outbox.insert_on(conn, box.rows)
            return PostgresSaver(conn, serde=self.inner.serde).put(*args)

    async def aput(self, box: Staged, *args: Any) -> RunnableConfig:
        """:meth:`put` through the async saver's connection."""
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with self._aconnection() as conn, conn.transaction():
            await self.outbox.ainsert_on(conn, box.rows)
            return await AsyncPostgresSaver(conn, serde=self.inner.serde).aput(*args)


def joint_for(inner: Any, reducer: MessageReducer) -> Joint | None:
    """A :class:`Joint` when ``inner`` is a ``PostgresSaver`` or ``AsyncPostgresSaver``
    (not a subclass, not in pipeline mode) and an ``OutboxHook`` / ``AsyncOutboxHook`` of
    ``reducer`` writes to a ``PostgresOutbox``; else ``None``."""
    classes = _classes()
    if classes is None or type(inner) not in classes or getattr(inner, "pipe", None) is not None:
        return None
    outbox = _postgres_outbox(reducer)
    if outbox is None:
        return None
    return Joint(inner, outbox, is_async=type(inner) is classes[1])
