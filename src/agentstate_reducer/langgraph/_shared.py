"""A SQLite saver and a SQLite store on one connection: one lock for both.

``SqliteSaver`` and ``SqliteStore`` each serialise their own calls with a lock of their
own, but a transaction belongs to the connection: with both on one connection, a store
write's ``BEGIN`` can land inside a checkpoint's open transaction ("cannot start a
transaction within a transaction"), or a checkpoint's commit can end the store's
transaction early. :func:`share_locks` makes every such pair the reducer's hooks reveal
hold one lock, so their transactions never overlap.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

from ..hooks import Background
from ..reducer import MessageReducer
from ._store import StoreHook

__all__ = ("share_locks",)

_RLOCK = type(threading.RLock())


def _stores(reducer: MessageReducer) -> Iterator[Any]:
    """The stores the reducer's ``on_prune`` hooks write to (through ``Background`` too)."""
    for hook in reducer.config.on_prune:
        while isinstance(hook, Background):
            hook = hook.fn
        if isinstance(hook, StoreHook):
            yield hook.store


def _families() -> tuple[tuple[type, type] | None, tuple[type, type] | None]:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.store.sqlite import SqliteStore
    except ImportError:
        sync = None
    else:
        sync = (SqliteSaver, SqliteStore)
    try:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        from langgraph.store.sqlite.aio import AsyncSqliteStore
    except ImportError:
        asynchronous = None
    else:
        asynchronous = (AsyncSqliteSaver, AsyncSqliteStore)
    return sync, asynchronous


def share_locks(inner: Any, reducer: MessageReducer) -> list[Any]:
    """Give ``inner`` and each store on its connection one lock; the stores joined.

    A sync pair shares a reentrant lock (one already shared is reused, so several
    savers and stores on one connection end up holding the same one), so a thread that
    iterates ``list()`` and writes to the store meanwhile does not wait on itself. An
    async pair shares the saver's ``asyncio.Lock``.
    """
    sync, asynchronous = _families()
    joined: list[Any] = []
    for family in (sync, asynchronous):
        if family is None or not isinstance(inner, family[0]):
            continue
        conn = getattr(inner, "conn", None)
        stores = [
            store
            for store in _stores(reducer)
            if isinstance(store, family[1]) and getattr(store, "conn", None) is conn
        ]
        if not stores:
            continue
        group: list[Any] = [inner, *stores]
        if family is sync:
            shared = next(
                (o.lock for o in group if isinstance(getattr(o, "lock", None), _RLOCK)),
                None,
            )
            lock: Any = shared if shared is not None else threading.RLock()
        else:
            held = group[0].lock
            lock = held if isinstance(held, asyncio.Lock) else asyncio.Lock()
        for member in group:
            if member.lock is not lock:
                member.lock = lock
        joined += stores
    return joined
