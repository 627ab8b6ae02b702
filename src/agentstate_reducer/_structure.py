"""The structure of a history, read from its records: its turns and steps (the current
turn), the model responses spanning several messages, the latest compaction item, dead
calls, and :func:`link_calls`, the one linker of results to their calls that the plan,
``trim`` and ``validate`` share. The edit step, the plan and the turn note ask it.

A *turn* starts at a plain human message (one that answers no tool call) that follows
the agent's final answer (an ai message issuing no tool call), and runs up to the next
such message: a human message typed while the agent is still working joins the turn.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import add, attrgetter
from typing import Protocol

from .read import (
    AI,
    GROUP_BOUNDARY,
    GROUP_OUTPUT,
    GROUP_REASONING,
    HUMAN,
    MessageRecord,
    record_group,
)

__all__ = (
    "Parents",
    "Results",
    "Structure",
    "Turn",
    "Views",
    "current_turn",
    "dangling_calls",
    "link_calls",
    "pending_from",
    "response_start",
    "response_units",
    "structure_of",
)


@dataclass(frozen=True)
class Turn:
    """The current (last) turn of a history: where it starts and its steps."""

    #: Index of the plain human message opening it, or ``None`` when there is none.
    opener: int | None
    #: First index of the turn: the opener, or the plan's ``start`` when there is none.
    begin: int
    #: The steps, oldest first: each the index of an ai message issuing tool calls,
    #: then the indices of the messages of the turn answering those calls.
    steps: tuple[tuple[int, ...], ...] = ()

    @property
    def active(self) -> bool:
        """Whether the turn has tool activity (a step), so the turn rule protects it."""
        return bool(self.steps)

    @property
    def body(self) -> int:
        """First index after the opener (``begin`` when there is no opener)."""
        return self.begin + 1 if self.opener is not None else self.begin


def _plain_human(view: MessageRecord) -> bool:
    return view.role == HUMAN and not view.answers


def current_turn(views: Sequence[MessageRecord], start: int = 0) -> Turn:
    """The current turn of ``views``: the plain human message that opened it and what follows.

    A plain human message opens a turn only after the agent's final answer (the latest
    ai message before it issues no tool call); one typed while the agent is still
    working (the latest ai message before it calls tools, or none came since the last
    human message) joins the turn, which keeps its first question as opener.
    ``start`` is the first index the plan may touch (1 with ``preserve_first``); a
    history without a plain human message opening a turn is one turn from ``start``.
    """
    n = len(views)
    opener = _opener(views)
    begin = opener if opener is not None else min(start, n)
    body = begin + 1 if opener is not None else begin
    issuer: dict[str, int] = {}  # call id -> its latest issuer inside the turn
    steps: dict[int, list[int]] = {}
    for j in range(body, n):
        view = views[j]
        if view.answers:
            owners = [issuer.get(a) for a in view.answers]
            known = [o for o in owners if o is not None]
            if known and len(known) == len(owners):
                steps[max(known)].append(j)
        if view.role == AI and view.calls:
            steps[j] = [j]
            for call in view.calls:
                issuer[call] = j
    return Turn(opener, begin, tuple(tuple(s) for s in steps.values()))


def _opener(views: Sequence[MessageRecord]) -> int | None:
    """Index of the plain human message opening the current turn, or ``None``.

    Walks back from the latest plain human message: while the message it meets first
    (an ai message, or another plain human one) says the agent had not given its final
    answer, the turn started earlier.
    """
    i = len(views) - 1
    while i >= 0 and not _plain_human(views[i]):
        i -= 1
    if i < 0:
        return None
    found = i
    while True:
        j = found - 1
        while j >= 0:
            view = views[j]
            if view.role == AI or _plain_human(view):
                break
            j -= 1
        if j < 0 or (views[j].role == AI and not views[j].calls):
            return found  # the start, or a final answer before it: it opens the turn
        while j >= 0 and not _plain_human(views[j]):
            j -= 1  # the agent was still working: the turn began at an earlier question
        if j < 0:
            return found  # no earlier question to join: this one opens the turn
        found = j


# -- tool exchanges and model responses -----------------------------------------------

_group = record_group
_role = attrgetter("role")
_calls, _answers = attrgetter("calls"), attrgetter("answers")
#: Groups of an item that continues the ai item before it (see :func:`_joins`).
_CONTINUING = (GROUP_OUTPUT, GROUP_REASONING)


def _joins(before: MessageRecord, after: MessageRecord) -> bool:
    """Whether ``after`` continues the model response ``before`` is part of."""
    if after.role != AI or before.role != AI:
        return False
    return before.group == GROUP_REASONING or after.group in (GROUP_OUTPUT, GROUP_REASONING)


def response_units(views: Sequence[MessageRecord]) -> tuple[tuple[int, int], ...]:
    """The model responses spanning several messages, as ``(begin, end)`` index ranges.

    A run of consecutive ai items with a Responses output item among them (a
    ``reasoning`` item and the ``message`` / ``function_call`` items after it, parallel
    calls) is one response: the reducer prunes or keeps it whole. Chat shapes, where
    one message is one response, have none (checked without a Python-level loop).
    """
    return _units(views) if any(map(_group, views)) else ()


def response_start(views: Sequence[MessageRecord], i: int, floor: int = 0) -> int:
    """First index of the model response ``views[i]`` is part of (its reasoning item, say),
    not before ``floor``: a step kept or dropped keeps or drops its reasoning with it."""
    while i > floor and _joins(views[i - 1], views[i]):
        i -= 1
    return i


def _units(views: Sequence[MessageRecord]) -> tuple[tuple[int, int], ...]:
    # _joins() of each neighbouring pair, on the roles and groups read at C level.
    roles = list(map(_role, views))
    groups = list(map(_group, views))
    out = []
    begin = -1  # the first item of the response being read, or -1
    for j in range(1, len(groups)):
        if roles[j] == AI and roles[j - 1] == AI and (
            groups[j - 1] == GROUP_REASONING or groups[j] in _CONTINUING
        ):
            if begin < 0:
                begin = j - 1
        elif begin >= 0:
            out.append((begin, j))
            begin = -1
    if begin >= 0:
        out.append((begin, len(groups)))
    return tuple(out)


def _boundary(views: Sequence[MessageRecord]) -> int | None:
    """Index of the latest compaction item, or ``None``."""
    return _latest_boundary(views) if any(map(_group, views)) else None


def _latest_boundary(views: Sequence[MessageRecord]) -> int | None:
    groups = list(map(_group, views))
    if GROUP_BOUNDARY not in groups:
        return None
    return len(groups) - 1 - groups[::-1].index(GROUP_BOUNDARY)


def dangling_calls(views: Sequence[MessageRecord]) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """Dead tool calls: ``(ai index, call ids)`` with no result, followed by a later message.

    A call is dead when no message answers it and a plain human or an ai message comes
    after its issuer. Calls of the latest ai message followed by nothing or only by
    results are pending (the tools may still run, or an interrupt may be resumed) and
    are never listed.
    """
    last_turn = max(
        (i for i, v in enumerate(views) if v.role == AI or _plain_human(v)), default=-1
    )
    for begin, end in response_units(views):
        if begin <= last_turn < end:  # parallel calls of the latest response are pending
            last_turn = begin
    answered: set[tuple[int, str]] = set()
    issuer: dict[str, int] = {}
    for j, view in enumerate(views):
        for answer in view.answers:
            owner = issuer.get(answer)
            if owner is not None:
                answered.add((owner, answer))
        for call in view.calls:
            issuer[call] = j
    dead = []
    for k in range(min(last_turn, len(views))):
        view = views[k]
        if view.role == AI and view.calls:
            missing = tuple(c for c in view.calls if (k, c) not in answered and issuer[c] == k)
            if missing:
                dead.append((k, missing))
    return tuple(dead)


def pending_from(views: Sequence[MessageRecord]) -> int | None:
    """Where the calls that may still be pending begin in ``views``, the end of a history
    whose earlier calls are all answered or repaired (a list the reducer returned with
    ``repair_dangling_calls``): the first message of the latest model response or plain
    human message (see :func:`dangling_calls`). ``None`` when ``views`` may not reach back
    to that response's first message (it starts there and may continue an earlier
    one, or holds no such message)."""
    last = next(
        (i for i in range(len(views) - 1, -1, -1) if views[i].role == AI or _plain_human(views[i])),
        None,
    )
    if last is None:
        return None
    begin = last
    while begin > 0 and _joins(views[begin - 1], views[begin]):
        begin -= 1
    if begin == 0 and views[0].role == AI:
        return None  # it may continue a response before it (a message after its reasoning)
    return begin


class Views(Protocol):
    """What :func:`link_calls` reads: a list of views, or an object reading them lazily."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int, /) -> MessageRecord: ...


#: Per message, the index of the latest earlier issuer of each call it answers
#: (``None`` for a call never issued before it), or ``None`` when it answers none.
Parents = list[tuple[int | None, ...] | None]
#: Per issuer, ``(answering index, call id)`` of the results of its calls.
Results = dict[int, list[tuple[int, str]]]


def link_calls(
    views: Views, start: int = 0, stop: int | None = None, *, results: bool = False,
    linking: Sequence[int] | None = None,
) -> tuple[Parents, Results]:
    """Link tool results to their calls: the one linker the plan and ``trim`` share.

    Reads the run ``[start, stop)`` (default: every message). ``parents[j]`` is set for
    each ``j`` in the run that answers calls: the latest issuer before ``j`` of each of
    its ``answers``, looked up before ``start`` too. With ``results``, ``results[i]``
    lists ``(j, id)`` answering calls of each issuer ``i`` in the run, scanning on past
    ``stop`` until each call is answered or issued again; else it is empty. Only the
    run and what those scans reach is read, so ``views`` may read lazily. ``linking``,
    when the caller knows it: the indices in the run of every message issuing or
    answering calls, ascending (only those are read in the run).
    """
    n = len(views)
    stop = n if stop is None else stop
    issued: dict[str, int] = {}
    parents: Parents = [None] * n
    found: Results = {}
    unresolved: dict[str, list[int]] = {}
    if not start and not results and linking is None:  # the plan's case: one pass
        for j in range(stop):
            view = views[j]
            if view.answers:
                parents[j] = tuple(map(issued.get, view.answers))
            for call in view.calls:
                issued[call] = j
        return parents, found
    get = issued.get
    run = range(start, stop)
    if linking is None:
        viewed = list(map(views.__getitem__, run))
        # Only the messages issuing or answering calls, picked at C level (``calls +
        # answers`` is a tuple made only when both are non-empty).
        linked = map(add, map(_calls, viewed), map(_answers, viewed))
        picked: Iterable[tuple[int, MessageRecord]] = compress(
            zip(run, viewed, strict=True), linked
        )
    else:
        picked = zip(linking, map(views.__getitem__, linking), strict=True)
    for j, view in picked:
        answers = view.answers
        if len(answers) == 1:  # a tool message: as below, for one answer
            call = answers[0]
            p = get(call)
            parents[j] = (p,)
            if p is None:
                unresolved.setdefault(call, []).append(j)
            elif results:
                found.setdefault(p, []).append((j, call))
        elif answers:
            links = parents[j] = tuple(map(get, answers))
            for call, p in zip(answers, links, strict=True):
                if p is None:
                    unresolved.setdefault(call, []).append(j)
                elif results:
                    found.setdefault(p, []).append((j, call))
        for call in view.calls:
            issued[call] = j
    i = start - 1
    while unresolved and i >= 0:
        for call in views[i].calls:
            for j in unresolved.pop(call, ()):
                view = views[j]
                parents[j] = tuple(
                    i if a == call else p
                    for a, p in zip(view.answers, parents[j] or (), strict=True)
                )
        i -= 1
    if results and stop < n:  # a run ending before the history does: scan on past it
        pending = {  # calls issued in the run and not answered in it
            call: p
            for call, p in issued.items()
            if not any(c == call for _, c in found.get(p, ()))
        }
        j = stop
        while pending and j < n:
            view = views[j]
            for call in view.answers:
                p = pending.pop(call, None)
                if p is not None:
                    found.setdefault(p, []).append((j, call))
            for call in view.calls:
                pending.pop(call, None)
            j += 1
    return parents, found


def structure_of(
    views: Sequence[MessageRecord],
    *,
    preserve_first: bool,
    linking: list[int] | None = None,
    grouped: bool | None = None,
) -> Structure:
    """The :class:`Structure` of ``views`` for a plan that preserves the first message or
    not: it may touch them from index 1 with ``preserve_first`` (and a message), else 0.
    ``linking`` and ``grouped``, when the read found them (:func:`~.read.chat.read_records`):
    the indices of the messages issuing or answering calls, and whether any groups."""
    structure = Structure(views, 1 if preserve_first and len(views) else 0)
    structure._linking = linking
    structure._grouped = grouped
    return structure


def _link_at(views: Sequence[MessageRecord], linking: list[int]) -> Parents:
    """``link_calls(views)[0]`` read from ``linking`` alone: every index of a message
    issuing or answering calls, ascending (no other message links anything)."""
    issued: dict[str, int] = {}
    get = issued.get
    parents: Parents = [None] * len(views)
    for j in linking:
        view = views[j]
        answers = view.answers
        if answers:
            parents[j] = (get(answers[0]),) if len(answers) == 1 else tuple(map(get, answers))
        for call in view.calls:
            issued[call] = j
    return parents


class Structure:
    """The structure of one history, read from its records: what the plan asks of it,
    found once and held, so that a plan planned again (with pins, from a cache anchor)
    finds nothing twice. Each fact is found when first asked: a plan that prunes nothing
    links no call."""

    __slots__ = ("_answering", "_boundary", "_grouped", "_heads", "_linking", "_parents",
                 "_turn", "_units", "start", "views")

    def __init__(self, views: Sequence[MessageRecord], start: int = 0) -> None:
        #: One record per message, in order.
        self.views = views
        #: The first index a plan may touch; the current turn begins there when no plain
        #: human message opens it.
        self.start = start
        self._turn: Turn | None = None
        self._grouped: bool | None = None
        self._units: tuple[tuple[int, int], ...] | None = None
        self._boundary: tuple[int | None] | None = None
        self._parents: Parents | None = None
        self._answering: list[int] | None = None
        self._heads: list[int] | None = None
        #: The indices of the messages issuing or answering calls, when the read found them.
        self._linking: list[int] | None = None

    @property
    def turn(self) -> Turn:
        """The current turn (:func:`current_turn` from :attr:`start`)."""
        if self._turn is None:
            self._turn = current_turn(self.views, self.start)
        return self._turn

    @property
    def grouped(self) -> bool:
        """Whether any message is an item of a multi-item response or a compaction
        (Responses items; checked at C level, so chat shapes pay about nothing)."""
        if self._grouped is None:
            self._grouped = any(map(_group, self.views))
        return self._grouped

    @property
    def units(self) -> tuple[tuple[int, int], ...]:
        """The model responses spanning several messages (:func:`response_units`)."""
        if self._units is None:
            self._units = _units(self.views) if self.grouped else ()
        return self._units

    @property
    def boundary(self) -> int | None:
        """Index of the latest compaction item, or ``None``."""
        if self._boundary is None:
            self._boundary = (_latest_boundary(self.views) if self.grouped else None,)
        return self._boundary[0]

    @property
    def parents(self) -> Parents:
        """Per message, the issuers of the calls it answers (:func:`link_calls`)."""
        if self._parents is None:
            linking = self._linking
            if linking is None:
                self._parents = link_calls(self.views)[0]
            else:
                self._parents = _link_at(self.views, linking)
        return self._parents

    @property
    def answering(self) -> list[int]:
        """The indices of the messages answering calls, ascending."""
        if self._answering is None:
            parents, linking = self.parents, self._linking
            if linking is None:
                self._answering = list(compress(range(len(self.views)), parents))
            else:
                self._answering = list(compress(linking, map(parents.__getitem__, linking)))
        return self._answering

    @property
    def heads(self) -> list[int]:
        """Per step of the current turn, the first index of the model response issuing
        it, not before the turn's body (see :meth:`response_start`)."""
        if self._heads is None:
            turn = self.turn
            self._heads = [self.response_start(s[0], turn.body) for s in turn.steps]
        return self._heads

    def response_start(self, i: int, floor: int = 0) -> int:
        """:func:`response_start` of message ``i``, from the responses found once."""
        units = self.units
        if i <= floor or not units:
            return i
        k = bisect_right(units, (i, len(self.views))) - 1
        if k >= 0 and units[k][1] > i:
            return max(units[k][0], floor)
        return i
