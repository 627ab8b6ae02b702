"""Turns and steps of a history, read from its records (the plan and the edit step share it).

A *turn* starts at a plain human message (one that answers no tool call) that follows
the agent's final answer (an ai message issuing no tool call), and runs up to the next
such message: a human message typed while the agent is still working joins the turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .read import AI, HUMAN, MessageRecord

__all__ = ("Turn", "current_turn")


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
