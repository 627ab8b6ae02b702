"""Repair, the first stage of a reduce: a synthetic result right after each dead call,
before the read, the edit step and the plan see the list. Each reads the records first,
then their structure (:func:`~agentstate_reducer._structure.dangling_calls`); on an append
to a list this reducer returned, only its latest response and the new messages."""

from __future__ import annotations

from typing import Any

from .._structure import dangling_calls, pending_from
from ..errors import MessageFormatError
from ..read import MessageRecord, synthetic_results
from ..read.chat import read_messages
from .memory import _Remembering


def repair(
    reducer: _Remembering, existing: Any, messages: list[Any]
) -> tuple[list[Any], list[Any], list[MessageRecord] | None]:
    """:func:`repair_dangling_calls` of ``messages``, with the records of the list it
    returns when it read them all and found no dead call (the read stage takes them,
    so the list is not read twice), else ``None``. When they extend a list this
    reducer returned (or equal copies of it), whose calls were all answered or repaired
    but the latest response's, only that response and the new messages are read: no
    call before them can have died."""
    chain = reducer._match(existing, messages) if type(existing) is list else None
    size = 0 if chain is None else chain.size
    if 0 < size < len(messages):
        reducer._checked.list = (existing, chain)  # the plan's match, done already
        try:
            views = _pending_tail(reducer, messages, size)
            if not dangling_calls(views):
                return messages, [], None
        except MessageFormatError:
            pass  # the full read raises it, naming the index in the whole list
        reducer._checked.list = None  # the full path follows: no match to hand over
    return _repaired(messages)


def repair_dangling_calls(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """``(repaired, added)``: a new list with a synthetic result right after each dead
    call's ai message (see :func:`~agentstate_reducer.plan.dangling_calls`), and those
    results; ``messages`` itself when there is no dead call."""
    repaired, added, _ = _repaired(messages)
    return repaired, added


def _repaired(messages: list[Any]) -> tuple[list[Any], list[Any], list[MessageRecord] | None]:
    """:func:`repair_dangling_calls` of ``messages``, with their records when no call
    died (``messages`` is then returned as it is), else ``None``."""
    views = read_messages(messages)
    dead = dangling_calls(views)
    if not dead:
        return messages, [], views
    out: list[Any] = []
    added: list[Any] = []
    at = 0
    for index, calls in dead:
        out.extend(messages[at : index + 1])
        results = synthetic_results(messages[index], calls)
        out.extend(results)
        added.extend(results)
        at = index + 1
    out.extend(messages[at:])
    return out, added, None


def _pending_tail(
    reducer: _Remembering, messages: list[Any], size: int
) -> list[MessageRecord]:
    """The records of ``messages`` from where calls that may still be pending begin in
    its first ``size`` (see :func:`~agentstate_reducer._structure.pending_from`), read once,
    as far back as needed."""
    k = 2
    while True:
        low = max(0, size - k)
        views = _read(reducer, messages[low:])
        begin = pending_from(views[: size - low])
        if begin is not None or low == 0:
            return views[begin or 0 :]
        k *= 4


def _read(reducer: _Remembering, messages: list[Any]) -> list[MessageRecord]:
    """The records of ``messages``; in token mode through the token cache: the tail's
    are held, and the new messages' are read once for the plan that follows."""
    cache = reducer._token_counts if reducer.config.token_mode else None
    return read_messages(messages) if cache is None else cache.read(messages)[0]
