"""The reader's one fast path as one function, for the tests that hold it to the general
reader (the reader itself calls its two halves inline)."""

from __future__ import annotations

from agentstate_reducer.read.chat import _read_dict, _read_object
from agentstate_reducer.read.record import MessageRecord


def read_fast(message: object) -> MessageRecord | None:
    """The fast path's record of ``message``, or ``None`` where it leaves it to the
    general reader."""
    if type(message) is dict:
        return _read_dict(message)
    return _read_object(message)
