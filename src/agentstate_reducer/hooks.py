"""Running on_prune hooks: the in-memory delivery ledger and ``Background``."""

from __future__ import annotations

import asyncio
import atexit
import inspect
import logging
import queue
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from .config import RememberFn
from .messages import message_id

__all__ = ("Background", "DeliveryLedger", "is_async_callable")

logger = logging.getLogger("agentstate_reducer")


def is_async_callable(fn: object) -> bool:
    """True for ``async def`` functions and objects whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - async callable objects
    return call is not None and inspect.iscoroutinefunction(call)


class DeliveryLedger:
    """Remembers the last ``window`` delivered message ids; thread-safe.

    ``claim`` returns the messages not delivered before and marks them delivered in
    one step, so concurrent callers never both deliver the same id.
    """

    def __init__(self, window: int) -> None:
        self.window = window
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, messages: Iterable[Any]) -> list[Any]:
        """Return the messages whose id was not claimed before (id-less ones always)."""
        fresh: list[Any] = []
        with self._lock:
            for message in messages:
                ident = message_id(message)
                if ident is None:
                    fresh.append(message)
                    continue
                if ident in self._ids:
                    continue
                self._ids[ident] = None
                fresh.append(message)
            while len(self._ids) > self.window:
                self._ids.popitem(last=False)
        return fresh

    def release(self, messages: Iterable[Any]) -> None:
        """Forget the ids of ``messages``, so a later ``claim`` hands them out again."""
        with self._lock:
            for message in messages:
                ident = message_id(message)
                if ident is not None:
                    self._ids.pop(ident, None)

    def __contains__(self, ident: object) -> bool:
        with self._lock:
            return ident in self._ids

    def __len__(self) -> int:
        with self._lock:
            return len(self._ids)


_STOP = object()


def _close_at_exit(ref: weakref.ReferenceType[Background]) -> None:
    background = ref()
    if background is not None:
        background.close(wait=True)


class Background:
    """Run a hook on a bounded worker pool instead of inside the caller's ``reduce()``.

    The pruned list is copied on submit. When ``max_pending`` jobs are waiting, or
    after :meth:`close`, new work is dropped, counted in :attr:`dropped` and logged.
    Hook exceptions are logged and swallowed. Pending work drains at interpreter exit.

    Example:
        >>> with Background(store_hook, workers=2) as hook:      # doctest: +SKIP
        ...     reducer = MessageReducer(config=ReducerConfig(on_prune=[hook]))
    """

    def __init__(self, fn: RememberFn, *, workers: int = 2, max_pending: int = 1000) -> None:
        if not callable(fn):
            raise TypeError(f"Background needs a callable hook, got {fn!r}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an int >= 1, got {workers!r}")
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise ValueError(f"max_pending must be an int >= 1, got {max_pending!r}")
        self.fn = fn
        #: Number of submissions dropped (backlog full, or submitted after close).
        self.dropped = 0
        #: Number of hook calls that raised.
        self.failed = 0
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_pending)
        self._closed = False
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"agentstate-reducer-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()
        atexit.register(_close_at_exit, weakref.ref(self))

    def __call__(self, pruned: list[Any], namespace: Any = None) -> None:
        """Queue ``fn(copy_of_pruned, namespace)``; drop it if the backlog is full."""
        with self._lock:
            if self._closed:
                self._drop("Background is closed")
                return
            try:
                self._queue.put_nowait((list(pruned), namespace))
            except queue.Full:
                self._drop(f"backlog is full ({self._queue.maxsize} pending)")

    def _drop(self, why: str) -> None:
        self.dropped += 1
        logger.warning("agentstate-reducer: dropped an on_prune batch: %s", why)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                pruned, namespace = item
                try:
                    result = self.fn(pruned, namespace)
                    if inspect.isawaitable(result):
                        asyncio.run(_await(result))
                except Exception:
                    self.failed += 1
                    logger.exception("agentstate-reducer: background on_prune hook failed")
            finally:
                self._queue.task_done()

    @property
    def pending(self) -> int:
        """Jobs waiting for a worker."""
        return self._queue.qsize()

    def join(self) -> None:
        """Block until every queued job has run."""
        self._queue.join()

    def close(self, wait: bool = True) -> None:
        """Stop accepting work; with ``wait``, run what is queued and join the workers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if wait:
            for _ in self._threads:
                self._queue.put(_STOP)
            for thread in self._threads:
                thread.join()
        else:
            for _ in self._threads:
                try:
                    self._queue.put_nowait(_STOP)
                except queue.Full:
                    break

    def __enter__(self) -> Background:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close(wait=True)


async def _await(value: Any) -> Any:
    return await value
