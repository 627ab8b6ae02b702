"""The stages of a reduce before its summary, in order (:func:`prepare`): read, repair,
structure, counts, edit, plan, the turn note. An append to a list this reducer returned
goes through the same stages with its new messages alone, each doing its part of it with
:mod:`.append`; where one of them finds that only the whole list can tell, they run again
on the whole list. The repair is :mod:`.repair`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from .._note import note_structure
from .._structure import Structure, structure_of
from ..config import ReducerConfig
from ..edit import ContextEdit, edit_structure
from ..errors import MessageFormatError
from ..hooks import namespace_key
from ..plan import CURRENT_TURN, Plan, Settled
from ..plan.rules import plan_structure
from ..read import MessageRecord
from ..read.chat import read_messages, read_records
from ..tokens.cache import LazyCounts
from .append import Whole, appended_tokens, planned, settled
from .chains import _Chain, _Memo
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
    """Read, repair, edit and plan ``messages`` (``existing + new``), in this order.

    When they extend a list this reducer returned (or equal copies of it), the stages
    run on the new messages alone (see :mod:`.append`); where one of them finds that only
    the whole list can tell, they run again on the whole list. Editing comes before the
    plan, so the plan sees the edited counts and prunes only what is still over the
    threshold. Both count lazily: what neither needs is never counted."""
    chain = reducer._match(existing, messages)
    if chain is not None:
        again = reducer._replayed(chain, messages, namespace)
        if again is not None:  # the same append once more
            return Prepared(messages, again, None, (), [])
        try:
            return _prepare(reducer, messages, namespace, chain)
        except Whole:
            pass  # the same stages, on the whole list
    return _prepare(reducer, messages, namespace, None)


def _prepare(
    reducer: _Preparing, messages: list[Any], namespace: Any, chain: _Chain | None
) -> Prepared:
    """The stages of :func:`prepare` on the whole list, or on an append to ``chain``
    (raising :class:`~.append.Whole` where only the whole list can tell)."""
    config = reducer.config
    read: list[int] | None = None  # the counts an append read
    low, linking, grouped = 0, None, None
    if chain is not None:
        views, read, low = _read(reducer, messages, chain)
    else:  # with what the read notes for the structure
        views, linking, grouped = read_records(messages)
    counts: Sequence[int] | None = read
    messages, added, repaired, pending = repair(reducer, messages, views, low, chain)
    if repaired is not None:  # with the results' records; what the read noted holds no more
        views, linking, grouped = repaired, None, None
    # The structure of the list, or of the history an append settles (its records read
    # from its start): what the edit step and the plan ask of it is found once.
    structure = None
    if chain is None or chain.settled is None:
        history = views if chain is None else views[: chain.size]
        structure = structure_of(
            history, preserve_first=config.preserve_first, linking=linking, grouped=grouped
        )
    state: Settled | None = None
    budget = config
    if chain is not None:  # the history's settled state; the new messages' usage learned
        state, budget = settled(reducer, chain, messages, views, read, low, namespace)
    elif config.token_mode:
        counts = LazyCounts.of(reducer._cache(), messages, views)  # read once, not again
        if config.calibrate_from_usage:
            reducer._learn(messages, views, counts, namespace)
        budget = reducer._budget(namespace)  # the edit step fires where the plan prunes
    editing = bool(config.context_edits) or (config.turn_ladder and config.token_mode)
    messages, counts, edits, budget = _edit(
        reducer, messages, structure, counts, budget, editing, chain, state, views, low,
        pending, namespace,
    )
    if chain is not None:
        assert state is not None
        plan = planned(reducer, chain, messages, views, read, low, state, budget, pending)
        return Prepared(messages, plan, None, (), added)
    assert structure is not None
    plan = _pinned_plan(messages, structure, counts, budget, [], reducer._reserve())
    plan = reducer._anchored(plan, messages, structure, counts, budget, [],
                             reducer._reserve(), namespace, remember=True)
    if editing:
        note = note_structure(messages, structure, plan.dropped_steps, config)
        if note is not None:  # the turn ladder's last rung: one note for the dropped steps
            plan = reducer._noted(plan, note, counts, namespace)
    return Prepared(messages, plan, (views, counts), edits, added)


def _read(
    reducer: _Preparing, messages: list[Any], chain: _Chain
) -> tuple[list[MessageRecord], list[int] | None, int]:
    """``(views, counts, low)`` of an append to ``chain``: the records of
    ``messages[low:]``, each message read once, and in token mode their counts (through
    the token cache). Its new messages; from where calls that may still be pending begin
    with ``repair_dangling_calls`` (see :mod:`.repair`); from the start when its history
    is not settled yet (the records the chain holds are not read again).
    :class:`~.append.Whole` when a message cannot be read: the whole list's read names
    its index."""
    config = reducer.config
    cache = reducer._token_counts if config.token_mode else None
    size, n = chain.size, len(messages)
    held, counted = chain.views, chain.counts
    low = size
    if chain.settled is not None or held is None or (cache is not None and counted is None):
        held = counted = None
        if chain.settled is None:
            low = 0  # the history is settled from its records
        elif config.repair_dangling_calls:
            pending = chain.pending
            low = pending if pending is not None and 0 < size < n else 0
    try:
        tail = messages[low:] if low else messages
        if cache is not None:
            views, counts = cache.read(tail)
        else:
            views, counts = read_messages(tail), None
    except MessageFormatError:
        raise Whole from None  # the whole list's read names the index
    if held is None:
        return views, counts, low
    counts = None if counted is None or counts is None else [*counted, *counts]
    return [*held, *views], counts, 0


def _edit(
    reducer: _Preparing,
    messages: list[Any],
    structure: Structure | None,
    counts: Sequence[int] | None,
    budget: ReducerConfig,
    editing: bool,
    chain: _Chain | None,
    state: Settled | None,
    views: list[MessageRecord],
    low: int,
    pending: tuple[int, int] | None,
    namespace: Any,
) -> tuple[list[Any], Sequence[int] | None, tuple[ContextEdit, ...], ReducerConfig]:
    """The edit step: ``messages`` with edited copies, their counts, the edits, and the
    budget the plan uses (calibrated again on the edited counts). On an append to
    ``chain`` nothing is edited: editing must leave the history it settles as it is
    (asked once: its settled state is then remembered) and surely change nothing in the
    new messages (:class:`~agentstate_reducer.edit.AppendRule`), else
    :class:`~.append.Whole`."""
    config = reducer.config
    rule = reducer._edits_append
    edited: list[Any] | None = None  # what is edited: the list, or the history settled
    given, rules = counts, budget
    if chain is None:
        if editing:
            edited = messages
    elif chain.settled is None and rule is not None:
        assert state is not None
        if not rule(state.size, state.tokens):
            raise Whole  # the clear trigger could fire
        edited, rules = chain.snapshot[: chain.size], config
        given = None if counts is None else counts[: chain.size]
    if edited is not None:
        assert structure is not None
        outcome = edit_structure(
            edited, structure, given, rules, reducer._count_one, reducer._part_counter()
        )
        if chain is None:
            messages, counts = outcome.messages, outcome.counts
            if config.token_mode and counts is not None:
                if config.calibrate_from_usage:
                    reducer._learn(messages, views, counts, namespace)
                budget = reducer._budget(namespace)
            return messages, counts, outcome.edits, budget
        if outcome.edits:
            raise Whole  # editing would change the history
    if chain is None:
        return messages, counts, (), budget
    assert state is not None
    if chain.settled is None:  # settled and left as it is by editing: remembered so
        begin = None if pending is None else pending[0]
        reducer._keep(chain._replace(views=None, counts=None, settled=state, pending=begin))
    if rule is None:
        return messages, counts, (), budget
    if budget is not config:
        raise Whole  # the rule knows only the config's budget
    size = chain.size
    new_counts = None if counts is None else counts[size - low :]
    if not rule(
        len(messages), appended_tokens(state, new_counts, budget), messages[size:],
        new_counts, reducer._count_one, views[size - low :],
    ):
        raise Whole
    return messages, counts, (), budget


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
