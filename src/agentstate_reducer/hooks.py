"""Running on_prune hooks: the in-memory delivery ledger and ``Background``."""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import inspect
import json
import logging
import queue
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any

from .config import RememberFn
from .errors import ConfigError, ConfigTypeError
from .read import message_state, raw_message_id

__all__ = (
    "NOT_DELIVERED",
    "Background",
    "DeliveryLedger",
    "context_keys",
    "delivery_key",
    "is_async_callable",
)

logger = logging.getLogger("agentstate_reducer")


def is_async_callable(fn: object) -> bool:
    """True for ``async def`` functions and objects whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - async callable objects
    return call is not None and inspect.iscoroutinefunction(call)


class _NotDelivered:
    def __repr__(self) -> str:
        return "NOT_DELIVERED"


#: What a hook returns to say it did not take the batch (``Background`` does when it
#: drops one): the reducer releases the batch from its ledger, so a later reduce that
#: prunes the same messages hands them over again.
NOT_DELIVERED: Any = _NotDelivered()


def namespace_key(value: object) -> Hashable:
    """A namespace as a key (of the ledger, of the reducer's calibrations): hashable, lists
    and tuples alike, as the outbox does."""
    if isinstance(value, (list, tuple)):
        return tuple(namespace_key(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return ("unhashable", type(value).__qualname__, repr(value))
    return (type(value).__qualname__, value) if not isinstance(value, str) else value


def _digest(message: object) -> str:
    state = message_state(message)
    try:
        text = json.dumps(state, sort_keys=True, default=repr, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        try:
            text = repr(state)
        except RecursionError:  # too deep to read: this object only
            text = f"object:{id(message)}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def delivery_key(message: object, namespace: object = None) -> Hashable:
    """The ledger's key: ``(namespace, id)``, ids ``1`` and ``"1"`` apart; a message
    without an id is keyed by a digest of its content within its namespace."""
    ident = raw_message_id(message)
    if ident is None:
        return (namespace_key(namespace), "sha256", _digest(message))
    if isinstance(ident, str):
        return (namespace_key(namespace), "id", ident)
    return (namespace_key(namespace), type(ident).__qualname__, repr(ident))


def _id_seed(ident: object) -> bytes:
    """What an id contributes to a context key: its type and value (``1`` and ``"1"`` apart)."""
    kind = "id" if isinstance(ident, str) else type(ident).__qualname__
    text = ident if isinstance(ident, str) else repr(ident)
    return f"{kind}\x00{text}".encode("utf-8", "surrogatepass")


def context_keys(
    conversation: Sequence[Any], positions: Sequence[int], namespace: object = None
) -> list[Hashable]:
    """The ledger's keys of ``conversation[p]`` for each of ``positions`` (ascending).

    A message with an id is keyed as by :func:`delivery_key`. One without is keyed by
    its place: a digest of its content and of each message before it back to the
    nearest message with an id (that id, then every content in order), so a second
    ``"yes"`` later in a conversation is another message, and the same conversation
    reduced again gives the same keys. ``None`` entries (messages the reducer made) are
    passed over.
    """
    frozen = namespace_key(namespace)
    keys: list[Hashable] = []
    chain: Any = None  # the running digest at ``at``; None until the first id-less one
    at = 0
    for p in positions:
        message = conversation[p]
        ident = raw_message_id(message)
        if ident is not None:
            keys.append(delivery_key(message, namespace))
            continue
        # Back to the nearest id, or to where the running digest stands.
        start = p
        while start > at and (
            conversation[start - 1] is None or raw_message_id(conversation[start - 1]) is None
        ):
            start -= 1
        if chain is None or start > at:
            anchor = conversation[start - 1] if start > 0 else None
            chain = hashlib.sha256(
                b"start" if anchor is None else _id_seed(raw_message_id(anchor))
            )
            at = start
        while at <= p:
            step = conversation[at]
            at += 1
            if step is None:
                continue
            step_id = raw_message_id(step)
            if step_id is not None:
                chain = hashlib.sha256(_id_seed(step_id))
            else:
                chain.update(_digest(step).encode("ascii"))
        keys.append((frozen, "ctx", chain.hexdigest()))
    return keys


class DeliveryLedger:
    """Remembers the last ``window`` delivered ``(namespace, message id)`` keys; thread-safe.

    ``claim`` returns the messages not delivered before and marks them in one step, so
    concurrent callers never both deliver the same message; a caller whose delivery
    did not complete releases them. One ledger serves any number of threads and
    namespaces: the same id in two namespaces is two messages.
    """

    def __init__(self, window: int) -> None:
        self.window = window
        self._keys: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()

    def claim(
        self,
        messages: Iterable[Any],
        namespace: Any = None,
        *,
        keys: Sequence[Hashable] | None = None,
    ) -> list[Any]:
        """Return the messages of ``namespace`` not claimed before (repeats once).

        ``keys``, one per message, replaces :func:`delivery_key` (the reducer passes
        :func:`context_keys`, which tell repeated id-less messages apart)."""
        fresh: list[Any] = []
        batch = list(messages)
        if keys is None:
            keys = [delivery_key(m, namespace) for m in batch]
        with self._lock:
            for message, key in zip(batch, keys, strict=True):
                if key in self._keys:
                    continue
                self._keys[key] = None
                fresh.append(message)
            while len(self._keys) > self.window:
                self._keys.popitem(last=False)
        return fresh

    def release(
        self,
        messages: Iterable[Any],
        namespace: Any = None,
        *,
        keys: Sequence[Hashable] | None = None,
    ) -> None:
        """Forget ``messages`` of ``namespace``, so a later ``claim`` hands them out again."""
        if keys is None:
            keys = [delivery_key(m, namespace) for m in messages]
        with self._lock:
            for key in keys:
                self._keys.pop(key, None)

    def delivered(self, message: object, namespace: Any = None) -> bool:
        """Whether ``message`` of ``namespace`` is claimed."""
        key = delivery_key(message, namespace)
        with self._lock:
            return key in self._keys

    def __len__(self) -> int:
        with self._lock:
            return len(self._keys)


class HandoffLedger:
    """Edited originals by ``(namespace, handle)``: pending (handed to the hooks, not yet
    stored) or stored. The reducer applies an edit only once its original is stored,
    and hands over only originals it knows neither way; thread-safe, the oldest of
    ``window`` forgotten first (an original forgotten is handed over once more)."""

    def __init__(self, window: int) -> None:
        self.window = window
        self._state: OrderedDict[Hashable, bool] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, originals: Iterable[Any], namespace: Any) -> list[tuple[Any, Hashable]]:
        """The originals neither pending nor stored, with their keys, now pending."""
        fresh = []
        with self._lock:
            for message in originals:
                key = delivery_key(message, namespace)
                if key not in self._state:
                    self._state[key] = False
                    fresh.append((message, key))
            while len(self._state) > self.window:
                self._state.popitem(last=False)
        return fresh

    def stored(self, claimed: Iterable[tuple[Any, Hashable]]) -> None:
        with self._lock:
            for _, key in claimed:
                if key in self._state:
                    self._state[key] = True

    def forget(self, claimed: Iterable[tuple[Any, Hashable]]) -> None:
        with self._lock:
            for _, key in claimed:
                self._state.pop(key, None)

    def is_stored(self, original: object, namespace: Any) -> bool:
        key = delivery_key(original, namespace)
        with self._lock:
            return self._state.get(key, False)


_STOP = object()


def _close_at_exit(ref: weakref.ReferenceType[Background]) -> None:
    background = ref()
    if background is not None:
        background.close(wait=True, timeout=background.exit_timeout)


class Background:
    """Run a hook on a bounded worker pool instead of inside the caller's ``reduce()``.

    The pruned list is copied on submit. When ``max_pending`` jobs are waiting, or
    after :meth:`close`, new work is dropped, counted in :attr:`dropped` and logged, and
    the call returns :data:`NOT_DELIVERED`, so the reducer's ledger releases the batch
    (a later reduce that prunes those messages hands them over again). Hook exceptions
    are logged and swallowed. Pending work drains at interpreter exit for at most
    ``exit_timeout`` seconds (Ctrl-C gives up at once); what was left is counted in
    :attr:`abandoned` and logged.

    Example:
        >>> with Background(store_hook, workers=2) as hook:      # doctest: +SKIP
        ...     reducer = MessageReducer(config=ReducerConfig(on_prune=[hook]))
    """

    def __init__(
        self,
        fn: RememberFn,
        *,
        workers: int = 2,
        max_pending: int = 1000,
        exit_timeout: float = 10.0,
    ) -> None:
        if not callable(fn):
            raise ConfigTypeError(f"Background needs a callable hook, got {fn!r}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"workers must be an int >= 1, got {workers!r}")
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise ConfigError(f"max_pending must be an int >= 1, got {max_pending!r}")
        if (
            isinstance(exit_timeout, bool)
            or not isinstance(exit_timeout, (int, float))
            or not exit_timeout >= 0
        ):
            raise ConfigError(
                f"exit_timeout must be a number of seconds >= 0, got {exit_timeout!r}"
            )
        self.fn = fn
        #: Seconds the exit hook waits for pending work before abandoning it.
        self.exit_timeout = float(exit_timeout)
        #: Number of submissions dropped (backlog full, or submitted after close).
        self.dropped = 0
        #: Messages in the dropped submissions (released from the reducer's ledger).
        self.dropped_messages = 0
        #: Number of hook calls that raised.
        self.failed = 0
        #: Batches still queued or running when :meth:`close` gave up (timeout, Ctrl-C).
        self.abandoned = 0
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_pending)
        self._closed = False
        self._running = 0
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"agentstate-reducer-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()
        atexit.register(_close_at_exit, weakref.ref(self))

    def __call__(self, pruned: list[Any], namespace: Any = None) -> Any:
        """Queue ``fn(copy_of_pruned, namespace)`` and return a
        :class:`concurrent.futures.Future`, done once ``fn`` returned (or with its error);
        the reducer applies an edit whose original travels in the batch only then. If the
        backlog is full, drop the batch and return :data:`NOT_DELIVERED`."""
        done: Future[None] = Future()
        with self._lock:
            if self._closed:
                return self._drop(pruned, "Background is closed")
            try:
                self._queue.put_nowait((list(pruned), namespace, done))
            except queue.Full:
                return self._drop(pruned, f"backlog is full ({self._queue.maxsize} pending)")
        return done

    def _drop(self, pruned: list[Any], why: str) -> Any:
        self.dropped += 1
        self.dropped_messages += len(pruned)
        logger.warning(
            "agentstate-reducer: dropped an on_prune batch of %d message(s): %s", len(pruned), why
        )
        return NOT_DELIVERED

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                with self._lock:
                    self._running += 1
                pruned, namespace, done = item
                try:
                    result = self.fn(pruned, namespace)
                    if inspect.isawaitable(result):
                        asyncio.run(_await(result))
                    done.set_result(None)
                except Exception as exc:
                    done.set_exception(exc)
                    self.failed += 1
                    # The type only: an error's text may quote message content.
                    logger.error(
                        "agentstate-reducer: background on_prune hook failed on %d message(s): %s",
                        len(pruned),
                        type(exc).__name__,
                    )
                finally:
                    with self._lock:
                        self._running -= 1
            finally:
                self._queue.task_done()

    @property
    def pending(self) -> int:
        """Jobs waiting for a worker."""
        return self._queue.qsize()

    def join(self) -> None:
        """Block until every queued job has run."""
        self._queue.join()

    def close(self, wait: bool = True, *, timeout: float | None = None) -> None:
        """Stop accepting work; with ``wait``, run what is queued and join the workers,
        for at most ``timeout`` seconds (``None``: no limit). On timeout or Ctrl-C the
        work left is abandoned, counted in :attr:`abandoned` and logged."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if not wait:
            for _ in self._threads:
                try:
                    self._queue.put_nowait(_STOP)
                except queue.Full:
                    break
            return
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> float | None:
            return None if deadline is None else max(deadline - time.monotonic(), 0.0)

        try:
            for _ in self._threads:
                self._queue.put(_STOP, timeout=left())
            for thread in self._threads:
                thread.join(left())
            if all(not thread.is_alive() for thread in self._threads):
                return
        except (queue.Full, KeyboardInterrupt):
            pass
        self._abandon()

    def _abandon(self) -> None:
        queued = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                queued += 1
                item[2].set_exception(RuntimeError("abandoned when Background closed"))
            self._queue.task_done()
        with self._lock:
            self.abandoned += queued + self._running
            abandoned = self.abandoned
        if abandoned:
            logger.warning(
                "agentstate-reducer: Background gave up at close; %d batch(es) abandoned", abandoned
            )

    def __enter__(self) -> Background:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close(wait=True)


async def _await(value: Any) -> Any:
    return await value
