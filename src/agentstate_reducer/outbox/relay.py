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
import functools
import inspect
import logging
import threading
from collections.abc import Generator, Iterator
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from .._drivers import _adrive, _blocking, _Call, _drive
from ..config import RememberFn
from ..errors import ConfigTypeError, JobDecodeError
from ..hooks import is_async_callable
from .base import Job, Outbox, Row, check_positive_int, check_seconds, encode_rows

__all__ = ("AsyncOutboxHook", "OutboxHook", "Relay", "RelayRound", "Staged", "staged")

logger = logging.getLogger("agentstate_reducer")


def _check_outbox(outbox: object) -> Outbox:
    if not isinstance(outbox, Outbox):
        raise ConfigTypeError(
            f"outbox must be an agentstate_reducer.outbox.Outbox, got {outbox!r:.80}"
        )
    return outbox


class _StoringHook:
    """What both outbox hooks are: the outbox they store in, checked, and their repr."""

    def __init__(self, outbox: Outbox) -> None:
        #: Where pruned messages are stored.
        self.outbox = _check_outbox(outbox)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.outbox!r})"


class Staged:
    """What the outbox hooks over ``outbox`` were handed while a caller that stores it in
    a transaction of its own holds this open (``ReducingSaver``'s joint commit: the
    checkpoint and its pruned messages in one PostgreSQL transaction).

    Each hook call encodes its batch (a message the outbox cannot store raises there,
    as ``enqueue`` would) and returns a receipt, a :class:`~concurrent.futures.Future`
    the reducer holds the batch on: :meth:`settle` completes every receipt once the
    caller's transaction committed, or fails them, and the reducer then releases the
    batches for a later reduce.
    """

    def __init__(self, outbox: Outbox) -> None:
        #: The outbox whose hooks stage here instead of enqueuing.
        self.outbox = outbox
        self._rows: dict[tuple[str, str], Row] = {}
        self._receipts: list[Future[None]] = []

    @property
    def rows(self) -> list[Row]:
        """The rows to insert, one per ``(namespace, key)``, in the order handed."""
        return list(self._rows.values())

    def add(self, pruned: list[Any], namespace: Any) -> Future[None]:
        """Stage ``pruned`` under ``namespace``; the receipt :meth:`settle` completes."""
        for row in encode_rows(pruned, namespace):
            self._rows.setdefault((row.namespace, row.key), row)
        receipt: Future[None] = Future()
        self._receipts.append(receipt)
        return receipt

    def settle(self, error: BaseException | None = None) -> None:
        """Complete every receipt (the rows are committed), or fail each with ``error``."""
        receipts, self._receipts = self._receipts, []
        for receipt in receipts:
            if error is None:
                receipt.set_result(None)
            else:
                receipt.set_exception(error)


_STAGED: ContextVar[Staged | None] = ContextVar("agentstate_outbox_staged", default=None)


@contextlib.contextmanager
def staged(outbox: Outbox) -> Iterator[Staged]:
    """Within the block, this context's ``OutboxHook(outbox)`` / ``AsyncOutboxHook(outbox)``
    calls stage their batches in the :class:`Staged` yielded instead of enqueuing them.

    The caller inserts :attr:`Staged.rows` in its own transaction and must
    :meth:`~Staged.settle` it, committed or not.
    """
    box = Staged(outbox)
    token = _STAGED.set(box)
    try:
        yield box
    finally:
        _STAGED.reset(token)


def _staging(outbox: Outbox) -> Staged | None:
    box = _STAGED.get()
    return box if box is not None and box.outbox is outbox else None


class OutboxHook(_StoringHook):
    """An ``on_prune`` hook that stores each pruned batch in ``outbox`` before returning.

    ``reduce()`` re-raises the :class:`~agentstate_reducer.OutboxError` it raises when the
    storage fails, so the caller's state keeps the messages and a retry stores them.
    A message or namespace it cannot store losslessly raises
    :class:`~agentstate_reducer.UnstorableError` (an ``OutboxError``) before anything
    is stored, so ``reduce()`` fails rather than forget the batch.

    Example:
        >>> outbox = SQLiteOutbox("outbox.db")                           # doctest: +SKIP
        >>> reducer = MessageReducer(config=ReducerConfig(on_prune=[OutboxHook(outbox)]))
        >>> Relay(outbox, store_hook(store)).run_forever(stop)          # elsewhere
    """

    def __call__(self, pruned: list[Any], namespace: Any = None) -> Future[None] | None:
        """Store ``pruned`` under ``namespace`` (inside :func:`staged`: stage it, and
        return the receipt)."""
        box = _staging(self.outbox)
        if box is not None:
            return box.add(pruned, namespace)
        self.outbox.enqueue(pruned, namespace)
        return None


class AsyncOutboxHook(_StoringHook):
    """:class:`OutboxHook` for ``areduce()``: the storage call runs in a worker thread."""

    async def __call__(self, pruned: list[Any], namespace: Any = None) -> Future[None] | None:
        """Store ``pruned`` under ``namespace`` without blocking the event loop (inside
        :func:`staged`: stage it, and return the receipt)."""
        box = _staging(self.outbox)
        if box is not None:
            return box.add(pruned, namespace)
        await asyncio.to_thread(self.outbox.enqueue, list(pruned), namespace)
        return None


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
    each), calls ``deliver_fn`` once per group and acknowledges the group on success.
    A group whose delivery fails is split in halves and retried, down to single
    messages, so one poison message does not fail its batch-mates; a message that
    fails alone is retried after ``retry_delay * 2 ** (attempts - 1)`` seconds (at
    most ``max_retry_delay``) until the outbox dead-letters it with its error.

    Several relays may run at once, in threads or processes: a job is never delivered
    by two of them while its lease holds, and the relay renews the lease while
    ``deliver_fn`` runs (every ``lease_seconds / 3``), so a slow delivery keeps it.

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
            raise ConfigTypeError(f"deliver_fn must be callable, got {deliver_fn!r:.80}")
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

        The lease of the claimed jobs is renewed every third of ``lease_seconds`` while
        ``deliver_fn`` runs. A failed delivery is retried in halves, so only the
        messages that fail alone are recorded as failures; a job that cannot be decoded
        is dead-lettered alone, with the decode error.

        Raises:
            OutboxError: the outbox itself failed (delivery errors are recorded, not raised).
        """
        return _drive(self._round())

    def run_forever(self, stop_event: threading.Event | None = None) -> None:
        """Run rounds until ``stop_event`` is set, sleeping when there is nothing to do.

        Outbox errors are logged and retried after ``poll_interval``.
        """
        _drive(self._rounds(stop_event if stop_event is not None else threading.Event()))

    # -- async -----------------------------------------------------------------------

    async def arun_once(self) -> RelayRound:
        """:meth:`run_once` for an event loop: outbox calls and a sync ``deliver_fn`` run
        in worker threads, an async ``deliver_fn`` is awaited on this loop."""
        return await _adrive(self._round())

    async def arun_forever(self, stop_event: asyncio.Event | None = None) -> None:
        """:meth:`run_forever` for an event loop; stops when ``stop_event`` is set."""
        await _adrive(self._rounds(stop_event if stop_event is not None else asyncio.Event()))

    # -- shared ----------------------------------------------------------------------

    def _round(self) -> Generator[_Call, Any, RelayRound]:
        """What :meth:`run_once` does, yielding each outbox call (the async driver runs
        them in worker threads), the heartbeat's start and stop, and each delivery."""
        jobs = yield _blocking(self.outbox.claim, self.batch, self.lease_seconds)
        if not jobs:
            return RelayRound()
        tally = [0, 0]
        beat = _Heartbeat(self.outbox, jobs, self.lease_seconds)
        yield _Call(beat.start, beat.astart)
        try:
            prepared = yield _blocking(self._prepare, jobs, tally)
            for namespace, group, messages in prepared:
                yield from self._delivering(group, messages, namespace, tally)
        finally:
            yield _Call(beat.stop, beat.astop)
        return RelayRound(len(jobs), tally[0], tally[1])

    def _rounds(self, stop: threading.Event | asyncio.Event) -> Generator[_Call, Any, None]:
        """Rounds until ``stop`` is set, pausing up to ``poll_interval`` when a round
        claimed less than a batch; a round that fails is logged. Yields each round and
        each pause."""
        while not stop.is_set():
            try:
                claimed = (yield _Call(self.run_once, self.arun_once)).claimed
            except Exception:
                logger.exception("agentstate-reducer: relay round failed; retrying")
                claimed = 0
            if claimed < self.batch:
                yield _Call(stop.wait, functools.partial(_until, stop), self.poll_interval)

    def _delivering(
        self, group: list[Job], messages: list[Any], namespace: Any, tally: list[int]
    ) -> Generator[_Call, Any, None]:
        """Deliver ``group`` (its ``messages``) and acknowledge it; on failure, the two
        halves in turn, down to single jobs, whose failure is recorded. Yields each
        delivery and each outbox call (the async driver runs those in worker threads)."""
        try:
            yield _Call(self._send, self._asend, messages, namespace)
        except Exception as exc:
            if len(group) == 1:
                tally[1] += yield _blocking(self._fail, group, exc)
                return
            half = len(group) // 2
            yield from self._delivering(group[:half], messages[:half], namespace, tally)
            yield from self._delivering(group[half:], messages[half:], namespace, tally)
            return
        tally[0] += yield _blocking(self._ack, group)

    def _send(self, messages: list[Any], namespace: Any) -> None:
        result = self.deliver_fn(messages, namespace)
        if inspect.isawaitable(result):
            asyncio.run(_await(result))

    async def _asend(self, messages: list[Any], namespace: Any) -> None:
        if self._async:
            await self.deliver_fn(messages, namespace)
        else:
            result = await asyncio.to_thread(self.deliver_fn, messages, namespace)
            if inspect.isawaitable(result):
                await result

    def _prepare(
        self, jobs: list[Job], tally: list[int]
    ) -> list[tuple[Any, list[Job], list[Any]]]:
        """Group ``jobs`` by namespace (FIFO within each) with their decoded messages.

        A job that cannot be decoded can never be delivered: it is dead-lettered at
        once, alone, with the decode error, and its namespace-mates go on.
        """
        groups: dict[str, tuple[Any, list[Job], list[Any]]] = {}
        for job in jobs:
            try:
                if job.decode_error is not None:
                    raise JobDecodeError(job.decode_error)
                message = job.message
            except Exception as exc:
                logger.warning(
                    "agentstate-reducer: job %d cannot be decoded; dead-lettered: %s",
                    job.id,
                    type(exc).__name__,
                )
                self.outbox.fail(job, exc, dead=True)
                tally[1] += 1
                continue
            entry = groups.setdefault(job.namespace_key, (job.namespace, [], []))
            entry[1].append(job)
            entry[2].append(message)
        return list(groups.values())

    def _fail(self, group: list[Job], exc: Exception) -> int:
        # The error's type only: its text may quote message content.
        logger.warning(
            "agentstate-reducer: delivering job(s) %s failed (%s); retrying later",
            [job.id for job in group],
            type(exc).__name__,
        )
        for job in group:
            self.outbox.fail(job, exc, retry_after=self.backoff(job.attempts))
        return len(group)

    def _ack(self, group: list[Job]) -> int:
        done = self.outbox.ack(group)
        if done < len(group):
            logger.warning(
                "agentstate-reducer: %d of %d delivered job(s) were reclaimed by another "
                "relay after their lease expired; they may be delivered again",
                len(group) - done,
                len(group),
            )
        return done


class _Heartbeat:
    """Renews the lease of ``jobs`` every third of ``lease_seconds``: in a thread
    (:meth:`start`, :meth:`stop`), or in a task on the running loop (:meth:`astart`,
    :meth:`astop`) whose renewals run in worker threads."""

    def __init__(self, outbox: Outbox, jobs: list[Job], lease_seconds: float) -> None:
        self.outbox = outbox
        self.jobs = jobs
        self.lease_seconds = lease_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._beat, name="agentstate-reducer-heartbeat", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        assert self._thread is not None
        self._stop.set()
        self._thread.join()

    async def astart(self) -> None:
        self._task = asyncio.create_task(self._abeat())

    async def astop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            self._renew()

    async def _abeat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            await asyncio.to_thread(self._renew)

    def _renew(self) -> None:
        try:
            self.outbox.renew(self.jobs, self.lease_seconds)
        except Exception:
            logger.exception("agentstate-reducer: renewing leases failed; retrying")


async def _await(value: Any) -> Any:
    return await value


async def _until(event: Any, seconds: float) -> None:
    """Wait ``seconds``, or less if ``event`` (an ``asyncio.Event``) is set."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
