"""A one-line status on standard error while a large input is read, planned and written.

Shown only when standard error is a terminal and the input is large (at least
:data:`LARGE_BYTES` of file or :data:`LARGE_MESSAGES` messages), so pipes, files and
tests see nothing; the line is rewritten in place and cleared before anything is
printed to standard output.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

#: An input file at least this large shows the status from its first read.
LARGE_BYTES = 5_000_000
#: A transcript of at least this many messages shows the status once read.
LARGE_MESSAGES = 10_000
#: Seconds between two updates of a running count.
_EVERY = 0.2


def is_terminal(stream: object) -> bool:
    """Whether ``stream`` is a terminal (a closed or odd stream is not)."""
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


class Status:
    """The status line of one command run."""

    def __init__(self, prog: str, stream: TextIO | None = None) -> None:
        self._prog = prog
        self._stream = stream
        self._on = False
        self._shown = False
        self._last = 0.0

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    def consider(self, *, size: int = 0, messages: int = 0) -> bool:
        """Turn the status on when the input is large and standard error a terminal."""
        if not self._on and (size >= LARGE_BYTES or messages >= LARGE_MESSAGES):
            self._on = is_terminal(self.stream)
        return self._on

    def say(self, text: str) -> None:
        """Show ``text`` in place of the last status."""
        if self._on:
            self.stream.write(f"\r{self._prog}: {text}\x1b[K")
            self.stream.flush()
            self._shown = True
            self._last = time.monotonic()

    def tick(self, done: int, total: int, what: str) -> None:
        """Show ``done of total`` at most every few tenths of a second."""
        if self._on and (done == total or time.monotonic() - self._last >= _EVERY):
            self.say(f"{what} {done:,} of {total:,} messages")

    def clear(self) -> None:
        """Erase the status line (before standard output is written, and at the end)."""
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False
