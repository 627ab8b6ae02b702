"""Text counts remembered by a digest of the text, so a text read again (a message a
checkpoint deserialised, a history trimmed on every model call) is not counted again."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

__all__ = ("TEXT_MEMO_ENTRIES", "TextMemo")

#: Texts a memo remembers (about 100 bytes each); the oldest quarter goes first.
TEXT_MEMO_ENTRIES = 200_000


class TextMemo:
    """``count(text)``, remembered by the text's hash and length (no reference to it).

    Texts shorter than ``shortest`` are counted each time (as fast as a look-up). A
    hash collision between two texts of one length would give one the other's count:
    the price of holding no text.
    """

    def __init__(
        self, count: Callable[[str], int], *, shortest: int = 0,
        entries: int = TEXT_MEMO_ENTRIES,
    ) -> None:
        self._count = count
        self._shortest = shortest
        self._entries = entries
        #: ``hash(text) -> (len(text), count)``; a loop that counts many texts may look a
        #: text up here itself (a hit whose length matches is what a call would answer).
        self.known: dict[int, tuple[int, int]] = {}
        self._lock = threading.Lock()
        #: Texts counted so far, not answered from memory (for benchmarks and tests).
        self.counted = 0

    def __call__(self, text: str) -> int:
        if not text or len(text) < self._shortest:  # the counter's own answer for ""
            return self._count(text)
        key = hash(text)
        known = self.known.get(key)
        if known is not None and known[0] == len(text):
            return known[1]
        n = self._count(text)
        with self._lock:
            self.counted += 1
            memory = self.known
            memory[key] = (len(text), n)
            if len(memory) > self._entries:
                for old in list(itertools.islice(memory, len(memory) // 4)):
                    del memory[old]
        return n

    def forget(self) -> None:
        """Forget every remembered count (for benchmarks and tests)."""
        with self._lock:
            self.known.clear()
