"""Both ends of the outbox: ``OutboxHook`` writes pruned messages, ``Relay`` delivers them.

``OutboxHook`` is the ``on_prune`` hook: it stores the pruned batch durably before
``reduce()`` returns. ``Relay`` runs elsewhere (a thread, a worker process, a cron job):
it claims jobs, calls the real hook ``deliver_fn(messages, namespace)`` once per
namespace, acknowledges on success and records the failure otherwise.

Delivery is at-least-once (a relay can die after delivering, before acknowledging);
with an idempotent ``deliver_fn``, such as a store keyed by message id, the effect is
exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..config import RememberFn
from ..hooks import is_async_callable
from .base import Job, Outbox, check_positive_int, check_seconds

__all__ = ("AsyncOutboxHook", "OutboxHook", "Relay", "RelayRound")

logger = logging.getLogger("agentstate_reducer")


def _check_outbox(outbox: object) -> Outbox:
    if not isinstance(outbox, Outbox):
        raise TypeError(f"outbox must be an agentstate_reducer.outbox.Outbox, got {outbox!r}")
    return outbox



class OutboxHook:
    """An ``on_prune`` hook that stores each pruned batch in ``outbox`` before returning.

    ``reduce()`` re-raises the :class:`~agentstate_reducer.OutboxError` it raises when the
    storage fails, so the caller's state keeps the messages and a retry stores them.
    A message that cannot be stored as JSON raises ``MessageFormatError`` (logged and
    skipped by the reducer, like any other hook error); nothing of that batch is stored.

    Example:
        >>> outbox = SQLiteOutbox("outbox.db")                           # doctest: +SKIP
        >>> reducer = MessageReducer(config=ReducerConfig(on_prune=[OutboxHook(outbox)]))
        >>> Relay(outbox, store_hook(store)).run_forever(stop)          # elsewhere
    """

    def __init__(self, outbox: Outbox) -> None:
        #: Where pruned messages are stored.
        self.outbox = _check_outbox(outbox)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.outbox!r})"

    def __call__(self, pruned: list[Any], namespace: Any = None) -> None:
        """Store ``pruned`` under ``namespace``."""
        self.outbox.enqueue(pruned, namespace)


class AsyncOutboxHook:
    """:class:`OutboxHook` for ``areduce()``: the storage call runs in a worker thread."""

    def __init__(self, outbox: Outbox) -> None:
        #: Where pruned messages are stored.
        self.outbox = _check_outbox(outbox)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.outbox!r})"

    async def __call__(self, pruned: list[Any], namespace: Any = None) -> None:
        """Store ``pruned`` under ``namespace`` without blocking the event loop."""
        await asyncio.to_thread(self.outbox.enqueue, list(pruned), namespace)


@dataclass(frozen=True)
class RelayRound:
    """What one :meth:`Relay.run_once` did."""

    #: Jobs claimed.
    claimed: int = 0
    #: Jobs delivered and acknowledged.
    delivered: int = 0
    #: Jobs whose delivery failed (retried later, or dead-lettered).
    failed: int = 0


class Relay:
    """Move jobs from ``outbox`` into ``deliver_fn(messages, namespace)``.

    Each round claims up to ``batch`` jobs, groups them by namespace (FIFO within
    each), calls ``deliver_fn`` once per group, acknowledges the group on success and
    fails it otherwise: a failed job is retried after ``retry_delay * 2 ** (attempts - 1)``
    seconds (at most ``max_retry_delay``) until the outbox dead-letters it.

    Several relays may run at once, in threads or processes: a job is never delivered
    by two of them while its lease holds. Keep ``lease_seconds`` well above the time one
    delivery takes.

    Args:
        outbox: the outbox to drain.
        deliver_fn: the real ``on_prune`` hook (sync or async).
        batch: jobs claimed per round.
        lease_seconds: how long a claim is exclusive.
        retry_delay: seconds before the first retry of a failed delivery.
        max_retry_delay: the cap on the retry delay.
        poll_interval: seconds :meth:`run_forever` sleeps when the outbox is drained.

    Example:
        >>> relay = Relay(outbox, store_hook(store), batch=100)          # doctest: +SKIP
        >>> stop = threading.Event()
        >>> threading.Thread(target=relay.run_forever, args=(stop,), daemon=True).start()
    """

    def __init__(
        self,
        outbox: Outbox,
        deliver_fn: RememberFn,
        *,
        batch: int = 100,
        lease_seconds: float = 30.0,
        retry_delay: float = 1.0,
        max_retry_delay: float = 300.0,
        poll_interval: float = 1.0,
    ) -> None:
        self.outbox = _check_outbox(outbox)
        if not callable(deliver_fn):
            raise TypeError(f"deliver_fn must be callable, got {deliver_fn!r}")
        self.deliver_fn = deliver_fn
        self.batch = check_positive_int("batch", batch)
        self.lease_seconds = check_seconds("lease_seconds", lease_seconds, allow_zero=False)
        self.retry_delay = check_seconds("retry_delay", retry_delay, allow_zero=True)
        self.max_retry_delay = check_seconds("max_retry_delay", max_retry_delay, allow_zero=True)
        self.poll_interval = check_seconds("poll_interval", poll_interval, allow_zero=False)
        self._async = is_async_callable(deliver_fn)

    def __repr__(self) -> str:
        return f"Relay({self.outbox!r}, {self.deliver_fn!r}, batch={self.batch})"

    def backoff(self, attempts: int) -> float:
        """Seconds to wait before retrying a job that failed on claim number ``attempts``."""
        return min(self.retry_delay * 2.0 ** max(attempts - 1, 0), self.max_retry_delay)

    # -- sync ------------------------------------------------------------------------

    def run_once(self) -> RelayRound:
        """Claim one batch and deliver it; returns what happened.

        Raises:
            OutboxError: the outbox itself failed (delivery errors are recorded, not raised).
        """
        jobs = self.outbox.claim(self.batch, self.lease_seconds)
        delivered = failed = 0
        for namespace, group in self._groups(jobs):
            messages = self._decode(group)
            if messages is None:
                failed += len(group)
                continue
            started = time.monotonic()
            try:
                result = self.deliver_fn(messages, namespace)
                if inspect.isawaitable(result):
                    asyncio.run(_await(result))
            except Exception as exc:
                failed += self._fail(group, exc)
                continue
            self._check_time(started)
            delivered += self.outbox.ack(group)
        return RelayRound(len(jobs), delivered, failed)

    def run_forever(self, stop_event: threading.Event | None = None) -> None:
        """Run rounds until ``stop_event`` is set, sleeping when there is nothing to do.

        Outbox errors are logged and retried after ``poll_interval``.
        """
        stop = stop_event if stop_event is not None else threading.Event()
        while not stop.is_set():
            try:
                claimed = self.run_once().claimed
            except Exception:
                logger.exception("agentstate-reducer: relay round failed; retrying")
                claimed = 0
            if claimed < self.batch:
                stop.wait(self.poll_interval)

    # -- async -----------------------------------------------------------------------

    async def arun_once(self) -> RelayRound:
        """:meth:`run_once` for an event loop: outbox calls and a sync ``deliver_fn`` run
        in worker threads, an async ``deliver_fn`` is awaited on this loop."""
        jobs = await asyncio.to_thread(self.outbox.claim, self.batch, self.lease_seconds)
        delivered = failed = 0
        for namespace, group in self._groups(jobs):
            messages = self._decode(group)
            if messages is None:
                failed += len(group)
                continue
            started = time.monotonic()
            try:
                if self._async:
                    await self.deliver_fn(messages, namespace)
                else:
                    result = await asyncio.to_thread(self.deliver_fn, messages, namespace)
                    if inspect.isawaitable(result):
                        await result
            except Exception as exc:
                failed += await asyncio.to_thread(self._fail, group, exc)
                continue
            self._check_time(started)
            delivered += await asyncio.to_thread(self.outbox.ack, group)
        return RelayRound(len(jobs), delivered, failed)

    async def arun_forever(self, stop_event: asyncio.Event | None = None) -> None:
        """:meth:`run_forever` for an event loop; stops when ``stop_event`` is set."""
        stop = stop_event if stop_event is not None else asyncio.Event()
        while not stop.is_set():
            try:
                claimed = (await self.arun_once()).claimed
            except Exception:
                logger.exception("agentstate-reducer: relay round failed; retrying")
                claimed = 0
            if claimed < self.batch:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.poll_interval)

    # -- shared ----------------------------------------------------------------------

    @staticmethod
    def _groups(jobs: list[Job]) -> list[tuple[Any, list[Job]]]:
        groups: dict[str, tuple[Any, list[Job]]] = {}
        for job in jobs:
            groups.setdefault(job.namespace_key, (job.namespace, []))[1].append(job)
        return list(groups.values())

    def _decode(self, group: list[Job]) -> list[Any] | None:
        # A row that cannot be rebuilt fails its whole group: delivering the rest would
        # break FIFO, and the retries end in the dead letters where it can be inspected.
        try:
            return [job.message for job in group]
        except Exception as exc:
            self._fail(group, exc)
            return None

    def _fail(self, group: list[Job], exc: Exception) -> int:
        logger.warning(
            "agentstate-reducer: delivering %d pruned message(s) failed: %r", len(group), exc
        )
        for job in group:
            self.outbox.fail(job, exc, retry_after=self.backoff(job.attempts))
        return len(group)

    def _check_time(self, started: float) -> None:
        took = time.monotonic() - started
        if took > self.lease_seconds:
            logger.warning(
                "agentstate-reducer: a delivery took %.2fs, longer than the %gs lease; "
                "another relay may deliver the same messages again",
                took,
                self.lease_seconds,
            )


async def _await(value: Any) -> Any:
    return await value
