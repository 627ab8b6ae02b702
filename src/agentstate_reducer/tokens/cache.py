"""Per-message counts remembered across calls (:class:`TokenCountCache`), and the lazy
counts of one history that the plan and the edit step read (:class:`LazyCounts`).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast, overload

from ..errors import MessageFormatError
from ..read import (
    MessageRecord,
    copy_state,
    message_state,
    read_message,
    too_deep_among,
)
from .count import TokenCounter, _count_record, _text_counter, approximate_token_count
from .models import _EstimateCounter

__all__ = (
    "TokenCountCache",
)


class TokenCountCache:
    """Per-message token counts (and adapter views) remembered across calls, for one counter.

    Each message seen is remembered by its identity, with a reference to it (so the
    identity cannot be reused), its :class:`MessageRecord`, its count, and what tells
    whether it changed since:

    * a :func:`copy_state` of it. A lookup compares the copy with the live message:
      one C-level ``==`` that shares every string, so an unchanged message costs no
      copy, no read and no tokenization, while a message edited in place (however
      deep) or replaced by another object under the same id is read and counted again;
    * or nothing yet, for a message counted by the heuristic: its first sight takes no
      copy, which keeps a fresh reducer reading a long history cheap. The next lookup
      reads and counts it again (cheap without a tokenizer); if its record and count
      are unchanged they stand, and the copy is taken then, to be compared from then on.

    A built-in counter (the heuristic, exact counts) reads a message once for both its
    record and its count.

    Memory is bounded: past ``max(max_entries, 2 * len(messages))`` messages, or once
    the messages remembered hold more than ``max(max_held_tokens, 2 * the call's new
    tokens)`` tokens (a proxy for their size in bytes: 2,000,000 tokens is roughly 8 MB
    of text), the oldest are forgotten (a message still in use is then counted once
    more), so messages dropped from every history are not kept alive by the cache. Thread-safe; the
    counter runs outside the lock, at most once per distinct message per call.

    The counter must depend only on a message's content.
    """

    def __init__(
        self, counter: TokenCounter, *, max_entries: int = 10_000, max_held_tokens: int = 2_000_000
    ) -> None:
        self.counter = counter
        self.max_entries = max_entries
        #: Tokens the remembered messages may hold in all, beyond the current call's.
        self.max_held_tokens = max_held_tokens
        self._held = 0
        self._lock = threading.Lock()
        #: ``id(message) -> slot`` in the four lists below, oldest first. Slots rather
        #: than a tuple per message: a long history adds no object to track but its view.
        self._slots: dict[int, int] = {}
        self._messages: list[Any] = []
        #: A copy of each message's state, or ``None`` until its second sight.
        self._saved: list[object] = []
        self._views: list[MessageRecord | None] = []
        self._counts: list[int] = []
        #: Messages read and counted so far (for benchmarks and tests).
        self.misses = 0
        #: The counter's text counter when it is a built-in one (counts follow from parts).
        self._text_tokens = _text_counter(counter)
        #: Whether a message of a common shape is first remembered without a copy: when
        #: counting it again to confirm it is cheap (the heuristic, not a tokenizer).
        self._defer_copies = counter is approximate_token_count or isinstance(
            counter, _EstimateCounter
        )

    def __len__(self) -> int:
        return len(self._slots)

    def counts(
        self, messages: Sequence[Any], views: Sequence[MessageRecord] | None = None
    ) -> list[int]:
        """Token counts of ``messages``, in order, counting only what is not remembered.

        ``views``: the messages' views when the caller read them already (``read_message``
        of each), so that a new message is not read again for its view.
        """
        return self.read(messages, views)[1]

    def read(
        self, messages: Sequence[Any], views: Sequence[MessageRecord] | None = None
    ) -> tuple[list[MessageRecord], list[int]]:
        """Views and token counts of ``messages``; only new or changed messages are read.

        Raises:
            MessageFormatError: a message cannot be read; the error names its index.
        """
        n = len(messages)
        given = views
        out: list[Any] = [None] * n  # MessageRecord, every slot filled below
        counts: list[int] = [0] * n
        missing: Sequence[int]
        with self._lock:
            if self._slots:
                missing = []
                get = self._slots.get
                held, copies = self._messages, self._saved
                known, numbers = self._views, self._counts
                for i, message in enumerate(messages):
                    slot = get(id(message))
                    if slot is not None and held[slot] is message:
                        saved = copies[slot]
                        if saved is None:
                            same = self._confirm(message, slot)
                        else:
                            state = message if type(message) is dict else message_state(message)
                            try:
                                same = bool(saved == state)
                            except Exception:  # an object whose == raises (an array, say)
                                same = False
                        if same:
                            out[i] = known[slot]
                            counts[i] = numbers[slot]
                            continue
                    missing.append(i)
            else:
                missing = range(n)  # nothing remembered: every message is new
        if missing:
            self._read_new(messages, missing, out, counts, given)
        return out, counts

    def _confirm(self, message: Any, slot: int) -> bool:
        """Whether a message seen once, without a copy, still reads and counts the same.

        If so, its copy is taken now (before it is read again, so that an edit made
        meanwhile shows next time).
        """
        saved = copy_state(message_state(message))
        try:
            record = read_message(message)
        except MessageFormatError:
            return False
        if record != self._views[slot]:
            return False
        assert self._text_tokens is not None
        if _count_record(record, self._text_tokens) != self._counts[slot]:
            return False
        self._saved[slot] = saved
        return True

    def _read_new(
        self,
        messages: Sequence[Any],
        missing: Sequence[int],
        views: list[MessageRecord],
        counts: list[int],
        given: Sequence[MessageRecord] | None = None,
    ) -> None:
        """Read and count ``messages[i]`` for each ``i`` in ``missing``, and remember them
        (``given``: the views of ``messages``, read by the caller)."""
        every = len(missing) == len(messages)
        batch = list(messages) if every else [messages[i] for i in missing]
        m = len(batch)
        new_views: list[Any] = [None] * m
        new_counts = [0] * m
        new_saved: list[object] = [None] * m
        text_tokens = self._text_tokens
        defer = self._defer_copies
        counter = self.counter
        first: dict[int, int] = {}  # the counter runs once per distinct message
        k = 0
        try:
            for k, message in enumerate(batch):
                i = missing[k]
                if defer:  # remembered without a copy until its second sight
                    record = read_message(message, i) if given is None else given[i]
                    new_views[k] = record
                    new_counts[k] = _count_record(record, text_tokens)  # type: ignore[arg-type]
                    continue
                j = first.setdefault(id(message), k)
                if j != k:  # the same object earlier in this call
                    new_views[k], new_counts[k] = new_views[j], new_counts[j]
                    new_saved[k] = new_saved[j]
                    continue
                # The copy is taken first: an edit made while this call reads and counts
                # shows as a difference next time.
                new_saved[k] = copy_state(message_state(message))
                record = read_message(message, i) if given is None else given[i]
                new_views[k] = record
                if text_tokens is not None:  # a built-in counter: the count from the record
                    new_counts[k] = _count_record(record, text_tokens)
                else:
                    new_counts[k] = int(counter(message))
        except RecursionError:
            # Read, but too deep to count (arguments' JSON) or to copy.
            error = too_deep_among([batch[k]], missing[k])
            if error is None:
                raise
            raise error from None
        except MessageFormatError:
            raise
        except Exception:
            # message_state() read an attribute of a foreign object that raised, before
            # the read: read_message names the field. Any other error (the counter's own)
            # stays as it is.
            read_message(batch[k], missing[k])
            raise
        if every:
            views[:] = new_views
            counts[:] = new_counts
        else:
            for k, i in enumerate(missing):
                views[i] = new_views[k]
                counts[i] = new_counts[k]
        self._remember(batch, new_saved, new_views, new_counts, len(messages))

    def _remember(
        self,
        batch: list[Any],
        saved: list[object],
        views: list[MessageRecord],
        counts: list[int],
        size: int,
    ) -> None:
        keys = list(map(id, batch))
        with self._lock:
            slots = self._slots
            if slots:
                for key in slots.keys() & keys:
                    # Remembered anew, as the newest.
                    self._held -= self._counts[slots.pop(key)]
            before = len(slots)
            base = len(self._messages)
            self._messages += batch
            self._saved += saved
            self._views += views
            self._counts += counts
            slots.update(zip(keys, range(base, base + len(batch)), strict=True))
            self.misses += len(slots) - before  # distinct messages read
            added = sum(dict(zip(keys, counts, strict=True)).values())
            self._held += added
            excess = len(slots) - max(self.max_entries, 2 * size)
            if excess > 0:
                for key in list(itertools.islice(slots, excess)):
                    self._forget(slots.pop(key))
            bound = max(self.max_held_tokens, 2 * added)
            if self._held > bound:
                for key in list(slots):
                    if self._held <= bound:
                        break
                    self._forget(slots.pop(key))
            if len(self._messages) > 2 * len(slots) + 1024:
                self._compact()

    def _forget(self, slot: int) -> None:
        self._held -= self._counts[slot]
        self._messages[slot] = self._saved[slot] = self._views[slot] = None

    def _compact(self) -> None:
        """Drop the slots no message uses any more (keeps the lists within 2x the live)."""
        order = list(self._slots.values())
        self._messages = [self._messages[s] for s in order]
        self._saved = [self._saved[s] for s in order]
        self._views = [self._views[s] for s in order]
        self._counts = [self._counts[s] for s in order]
        self._slots = dict(zip(self._slots, range(len(order)), strict=True))

    def clear(self) -> None:
        """Forget everything remembered."""
        with self._lock:
            self._slots.clear()
            self._messages.clear()
            self._saved.clear()
            self._views.clear()
            self._counts.clear()
            self._held = 0


#: Counts one lazy fill asks for at most: the plan walks from the end, so a missing count
#: is filled with those of up to this many earlier messages in one cache call.
_BLOCK = 64


class LazyCounts(Sequence[int]):
    """The token counts of one history, each filled when first asked, a block at a time.

    ``fill(low, high)`` gives the counts of messages ``low`` to ``high``; ``known`` holds
    counts that stand instead of filled ones (an edited copy's own). Built :meth:`of` a
    cache (the reducer's counts) or :meth:`over` other counts (the edit step's, whose
    copies count anew), so what no rule asks for is never counted.
    """

    def __init__(
        self,
        size: int,
        fill: Callable[[int, int], Sequence[int]],
        known: Mapping[int, int] | None = None,
    ) -> None:
        self._source = fill
        self._counts: list[int | None] = [None] * size
        self._known = known or {}
        for i, count in self._known.items():
            self._counts[i] = count

    @classmethod
    def of(
        cls, cache: TokenCountCache, messages: list[Any], views: list[MessageRecord] | None = None
    ) -> LazyCounts:
        """The counts of ``messages`` from ``cache`` (``views``: their records, read
        already, so the cache need not read them again)."""

        def fill(low: int, high: int) -> list[int]:
            return cache.counts(messages[low:high], None if views is None else views[low:high])

        return cls(len(messages), fill)

    @classmethod
    def over(cls, base: Sequence[int], own: Mapping[int, int]) -> LazyCounts:
        """``base``, with the counts ``own`` holds in place of its own."""
        return cls(len(base), lambda low, high: base[low:high], own)

    def __len__(self) -> int:
        return len(self._counts)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._counts)))]
        count = self._counts[index]
        if count is None:
            if index < 0:
                index += len(self._counts)
            low = max(0, index - _BLOCK + 1)
            while self._counts[low] is not None:
                low += 1
            self._fill(low, index + 1)
            count = self._counts[index]
            assert count is not None
        return count

    def _fill(self, low: int, high: int) -> None:
        self._counts[low:high] = self._source(low, high)
        for i, count in self._known.items():
            if low <= i < high:
                self._counts[i] = count

    def total_within(self, limit: int) -> int | None:
        """:func:`plan._total`: the sum, or ``None`` once the sum from the end passes
        ``limit``; counted from the end a block at a time, summed in C."""
        counts = self._counts
        total, high = 0, len(counts)
        while high > 0:
            low = max(0, high - _BLOCK)
            if None in counts[low:high]:
                self._fill(low, high)
            block = cast("list[int]", counts[low:high])
            if min(block) >= 0:
                part = sum(block)
                if total + part > limit:
                    return None
                total += part
            else:  # a counter that is not a count: as the plan's walk would meet it
                for count in reversed(block):
                    if count < 0:
                        return sum(self)
                    total += count
                    if total > limit:
                        return None
            high = low
        return total

    def __iter__(self) -> Iterator[int]:
        if None in self._counts:
            self[len(self._counts) - 1 :: -1]  # count the rest, towards the start
        return iter(self._counts)  # type: ignore[arg-type]

    @property
    def counted(self) -> int:
        """How many messages were counted so far."""
        return len(self._counts) - self._counts.count(None)
