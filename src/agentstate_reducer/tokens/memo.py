"""Text counts remembered by the text, so a text read again (a message a checkpoint
deserialised, a history trimmed on every model call) is not counted again."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ("TEXT_MEMO_CHARS", "TEXT_MEMO_ENTRIES", "TextMemo")

#: Texts a memo remembers; the oldest quarter goes first.
TEXT_MEMO_ENTRIES = 200_000
#: Characters the texts a memo remembers may hold in all (about 32 MB of ASCII text,
#: kept alive by the memo only once no history holds them); past it the oldest go first.
TEXT_MEMO_CHARS = 32_000_000


class TextMemo:
    """``count(text)``, remembered by the text (a reference to it).

    A text equal to one remembered is answered from memory, identical or not (an
    identical one is found without comparing characters). Texts shorter than
    ``shortest``, texts longer than a quarter of ``chars`` and instances of a ``str``
    subclass are counted each time. Memory is bounded: past ``entries`` texts, or once
    the texts remembered hold more than ``chars`` characters, the oldest are forgotten.
    """

    def __init__(
        self, count: Callable[[str], int], *, shortest: int = 0,
        entries: int = TEXT_MEMO_ENTRIES, chars: int = TEXT_MEMO_CHARS,
    ) -> None:
        self._count = count
        self._shortest = shortest
        self._entries = entries
        self._chars = chars
        #: ``text -> count``; a loop that counts many texts may look a text up here
        #: itself (a hit is what a call would answer).
        self.known: dict[str, int] = {}
        #: Characters of the texts in :attr:`known`.
        self._held = 0
        self._lock = threading.Lock()
        #: Texts counted so far, not answered from memory (for benchmarks and tests).
        self.counted = 0

    def __call__(self, text: str) -> int:
        if not text or len(text) < self._shortest:  # the counter's own answer for ""
            return self._count(text)
        known = self.known.get(text)
        if known is not None:
            return known
        n = self._count(text)
        with self._lock:
            self.counted += 1
            # A subclass may hash and compare as it likes: only a str is remembered.
            if type(text) is str and len(text) <= self._chars // 4 and text not in self.known:
                self.known[text] = n
                self._held += len(text)
                if len(self.known) > self._entries or self._held > self._chars:
                    self._shrink()
        return n

    def _shrink(self) -> None:
        """Forget the oldest quarter of the texts, and more until they hold at most three
        quarters of the characters allowed (under the lock)."""
        memory, held = self.known, self._held
        least, most = len(memory) // 4, self._chars * 3 // 4
        old: list[str] = []
        for text in memory:
            if len(old) >= least and held <= most:
                break
            old.append(text)
            held -= len(text)
        for text in old:
            del memory[text]
        self._held = held

    def forget(self) -> None:
        """Forget every remembered count (for benchmarks and tests)."""
        with self._lock:
            self.known.clear()
            self._held = 0
