"""Repair, the stage after the read: a synthetic result right after each dead call (see
:func:`~agentstate_reducer._structure.dangling_calls`), before the edit step and the plan
see the list. On an append to a list this reducer returned, whose calls were all answered
or repaired but its latest response's, only the calls from that response on can have
died: the records read from there (see :func:`~agentstate_reducer._structure.pending_from`)."""

from __future__ import annotations

from typing import Any

from .._structure import dangling_calls, pending_from
from ..read import MessageRecord, read_messages, with_results
from .append import Whole
from .chains import _Chain
from .memory import _Remembering


def repair(
    reducer: _Remembering,
    messages: list[Any],
    views: list[MessageRecord],
    low: int,
    chain: _Chain | None,
) -> tuple[list[Any], list[Any], list[MessageRecord] | None, tuple[int, int] | None]:
    """``(messages, added, records, pending)``: :func:`repair_dangling_calls` of
    ``messages`` (``views`` the records of ``messages[low:]``), with the records of the
    list it returns when it wrote results (else ``None``: ``views`` hold), and on an
    append to ``chain``, where the calls that may still be pending begin in its history
    and in ``messages``;
    :class:`~.append.Whole` when a call of an append died (the whole list is repaired, as
    a reduce of a list this reducer does not remember is). As it is without
    ``repair_dangling_calls``."""
    if not reducer.config.repair_dangling_calls:
        return messages, [], None, None
    if chain is None:
        dead = dangling_calls(views)
        if not dead:
            return messages, [], None, None
        messages, added, repaired = with_results(messages, views, dead)
        return messages, added, repaired, None
    size = chain.size
    begin = 0
    if 0 < size < len(messages):
        begin = low or pending_from(views[:size]) or 0  # low: the chain's, when it knows
    tail = views[begin - low :]
    if dangling_calls(tail):
        raise Whole
    return messages, [], None, (begin, begin + (pending_from(tail) or 0))


def repair_dangling_calls(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """``(repaired, added)``: a new list with a synthetic result right after each dead
    call's ai message (see :func:`~agentstate_reducer.plan.dangling_calls`), and those
    results; ``messages`` itself when there is no dead call."""
    views = read_messages(messages)
    dead = dangling_calls(views)
    if not dead:
        return messages, []
    repaired, added, _ = with_results(messages, views, dead)
    return repaired, added
