"""Repair, then the incremental path or read, edit, plan and the turn note, in this
order: :func:`prepare`, the stages of a reduce before its summary. The repair
(:mod:`.repair`) and the incremental path (:mod:`.append`, a list this reducer returned
plus new messages: only the new ones) are modules of their own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from .._note import note_structure
from .._structure import Structure, structure_of
from ..config import ReducerConfig
from ..edit import ContextEdit, edit_structure
from ..hooks import namespace_key
from ..plan import CURRENT_TURN, Plan
from ..plan.rules import plan_structure
from ..read import MessageRecord
from ..read.chat import read_messages, read_records
from ..tokens.cache import LazyCounts
from .append import append
from .chains import _Memo
from .memory import _Remembering
from .repair import repair

#: Namespaces whose cut (``cache_aware``) is remembered, at most; the oldest forgotten first.
_MAX_ANCHORS = 1024


class Prepared(NamedTuple):
    """What the read, edit and plan stages hand on to the rest of a reduce."""

    #: The list planned: the input with synthetic results for dead calls right after
    #: their calls (``added``) and the copies context editing made in place of originals.
    messages: list[Any]
    plan: Plan
    #: The records and counts the plan read, remembered with the result; ``None`` on the
    #: incremental path (it remembered them already).
    memo: _Memo | None
    edits: tuple[ContextEdit, ...]
    added: list[Any]


def prepare(reducer: _Preparing, existing: Any, messages: list[Any], namespace: Any) -> Prepared:
    """Repair, read, edit and plan ``messages`` (``existing + new``), in this order; an
    append to a list this reducer returned is planned from its new messages alone.

    Editing comes before the plan, so the plan sees the edited counts and prunes only
    what is still over the threshold. Both count lazily: what neither needs is never
    counted."""
    config = reducer.config
    added: list[Any] = []
    records: list[MessageRecord] | None = None
    if config.repair_dangling_calls:
        messages, added, records = repair(reducer, existing, messages)
    if not added:
        fast = append(reducer, existing, messages, namespace)
        if fast is not None:
            return Prepared(messages, fast, None, (), added)
    if records is None:
        views, linking, grouped = read_records(messages)
        structure = structure_of(
            views, preserve_first=config.preserve_first, linking=linking, grouped=grouped
        )
    else:  # the repair's
        views = records
        structure = structure_of(views, preserve_first=config.preserve_first)
    counts: Sequence[int] | None = None
    budget = config
    if config.token_mode:
        counts = LazyCounts.of(reducer._cache(), messages, views)  # read once, not again
        if config.calibrate_from_usage:
            reducer._learn(messages, views, counts, namespace)
        budget = reducer._budget(namespace)  # the edit step fires where the plan prunes
    edits: tuple[ContextEdit, ...] = ()
    editing = bool(config.context_edits) or (config.turn_ladder and config.token_mode)
    if editing:
        outcome = edit_structure(
            messages, structure, counts, budget, reducer._count_one, reducer._part_counter()
        )
        messages, counts, edits = outcome.messages, outcome.counts, outcome.edits
        if config.token_mode and counts is not None:
            if config.calibrate_from_usage:
                reducer._learn(messages, views, counts, namespace)
            budget = reducer._budget(namespace)
    plan = _pinned_plan(messages, structure, counts, budget, [], reducer._reserve())
    plan = reducer._anchored(plan, messages, structure, counts, budget, [],
                             reducer._reserve(), namespace, remember=True)
    if editing:
        note = note_structure(messages, structure, plan.dropped_steps, config)
        if note is not None:  # the turn ladder's last rung: one note for the dropped steps
            plan = reducer._noted(plan, note, counts, namespace)
    return Prepared(messages, plan, (views, counts), edits, added)


def _pinned_plan(
    messages: list[Any],
    structure: Structure,
    counts: Sequence[int] | None,
    config: ReducerConfig,
    keep: list[int],
    reserve: int,
    anchor: int | None = None,
) -> Plan:
    """The plan (:func:`~agentstate_reducer.plan.make_plan`), planned again with the
    pinned messages once it passes the threshold (the ``pin`` predicate is asked only
    then); both plans read the one ``structure``."""
    plan = plan_structure(
        structure, config, counts, pinned=keep, reserve=reserve, anchor=anchor
    )
    if plan.triggered and config.pin is not None:
        pin = config.pin
        if callable(pin):
            pinned = [i for i, m in enumerate(messages) if pin(m)]
        else:
            views = structure.views
            pinned = [i for i, v in enumerate(views) if v.id is not None and v.id in pin]
        if pinned:
            plan = plan_structure(
                structure, config, counts, pinned=[*keep, *pinned], reserve=reserve,
                anchor=anchor,
            )
    return plan


class _Preparing(_Remembering):
    """Read, edit and plan (the pure part)."""

    def _plan(
        self,
        messages: list[Any],
        config: ReducerConfig,
        keep: list[int],
        *,
        reserve: int,
        namespace: Any = None,
        lazy: bool = False,
        read: tuple[list[MessageRecord], Sequence[int] | None] | None = None,
    ) -> tuple[Plan, list[MessageRecord], Sequence[int] | None]:
        """The plan, with the views and counts it used; ``lazy``: in token mode, messages
        that cannot survive are not counted; ``read``: the views and counts to use. With
        ``self.config``, token mode plans against the budget of ``namespace`` (overhead
        and calibration, see :meth:`plan`)."""
        cache = self._token_counts
        counts: Sequence[int] | None
        if read is not None:  # what the edit step read and counted
            views, counts = read
        elif config.token_mode and cache is not None and lazy:
            views = read_messages(messages)
            counts = LazyCounts.of(cache, messages, views)
        elif config.token_mode and cache is not None:
            # Views and counts of messages seen before come from the cache.
            views, counts = cache.read(messages)
        else:
            views, counts = read_messages(messages), None
        if config.token_mode and counts is not None and config is self.config:
            if config.calibrate_from_usage:
                self._learn(messages, views, counts, namespace)
            config = self._budget(namespace)
        structure = structure_of(views, preserve_first=config.preserve_first)
        plan = _pinned_plan(messages, structure, counts, config, keep, reserve)
        plan = self._anchored(
            plan, messages, structure, counts, config, keep, reserve, namespace
        )
        return plan, views, counts

    def _anchored(
        self,
        plan: Plan,
        messages: list[Any],
        structure: Structure,
        counts: Sequence[int] | None,
        config: ReducerConfig,
        keep: list[int],
        reserve: int,
        namespace: Any,
        *,
        remember: bool = False,
    ) -> Plan:
        """``cache_aware``: ``plan`` planned again from where the latest cut of
        ``namespace`` left the history (its anchor), when it prunes; ``remember``: its cut
        is the new anchor (a reduce, not a dry run)."""
        if not (plan.triggered and config.cache_aware and config.token_mode):
            return plan
        views = structure.views
        anchor = self._anchor(messages, views, namespace)
        if anchor is not None:
            plan = _pinned_plan(messages, structure, counts, config, keep, reserve, anchor)
        if remember:
            self._keep_anchor(messages, views, plan, namespace)
        return plan

    def _anchor(
        self, messages: list[Any], views: Sequence[MessageRecord], namespace: Any
    ) -> int | None:
        """Where the latest cut of ``namespace`` left the history: the index of the first
        message it kept (the same object, the same id, or an equal message without one)."""
        found = self._anchors.get(namespace_key(namespace))
        if found is None:
            return None
        ident, kept = found
        for i, message in enumerate(messages):
            if message is kept:
                return i
            if ident is not None:
                if views[i].id == ident:
                    return i
            elif type(message) is type(kept) and message == kept:
                return i
        return None

    def _keep_anchor(
        self, messages: list[Any], views: Sequence[MessageRecord], plan: Plan, namespace: Any
    ) -> None:
        """Remember the first message ``plan`` keeps from its cut on, as the anchor."""
        gone = set(plan.pruned)
        first = next((i for i in range(plan.cut, len(messages)) if i not in gone), None)
        key = namespace_key(namespace)
        self._anchors.pop(key, None)  # the latest at the end: the oldest is forgotten first
        if first is None:
            return
        self._anchors[key] = (views[first].id, messages[first])
        if len(self._anchors) > _MAX_ANCHORS:
            del self._anchors[next(iter(self._anchors))]

    def _noted(
        self,
        plan: Plan,
        note: tuple[int, Any, bool],
        counts: Sequence[int] | None,
        namespace: Any,
    ) -> Plan:
        """``plan`` with the turn note it sized, its figures from the note as written:
        the plan sized it from its entries, and the note replaces what stood there."""
        if plan.kept_tokens is None or counts is None:
            return replace(plan, note=note)
        index, message, replaces = note
        tokens = self._count_one(message)
        kept = plan.kept_tokens - plan.note_tokens + tokens
        if replaces and index not in plan.pruned:
            kept -= counts[index]
        budget = self._budget(namespace)
        assert budget.max_tokens is not None and budget.effective_target_tokens is not None
        over = kept > budget.max_tokens
        above = kept > budget.effective_target_tokens
        because = plan.over_because if above else ()
        if above and not because:
            because = (CURRENT_TURN,)  # the turn alone is over: it dropped steps
        return replace(
            plan, note=note, note_tokens=tokens, kept_tokens=kept,
            over_budget=over, over_target=above, over_because=because,
        )
