"""Read, edit and plan: the messages of a reduce read once, edited, planned; on the
incremental path (a list this reducer returned, plus new messages) only the new ones.
The one place of the reduce that reads messages (``read_messages``, ``message_id``)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from .._links import dangling_calls, pending_from
from .._note import turn_note
from ..config import ReducerConfig, ReducerResult
from ..edit import ContextEdit, edit_messages
from ..errors import MessageFormatError
from ..hooks import namespace_key
from ..plan import CURRENT_TURN, Plan, Settled, make_plan, plan_append, settle
from ..read import MessageRecord, is_merge_update, message_id, synthetic_results
from ..read.chat import read_messages
from ..tokens.cache import LazyCounts
from .chains import (
    _CHAINS,
    _Appended,
    _by_dict,
    _Chain,
    _kinds,
    _last_unchanged,
    _Memo,
    _print,
    _prints,
    _rebased,
    _unchanged,
)
from .counts import _Counting
from .lists import _survivors

#: Namespaces whose cut (``cache_aware``) is remembered, at most; the oldest forgotten first.
_MAX_ANCHORS = 1024


def _needs_add_messages(reducer: _Preparing, left: list[Any], right: list[Any]) -> bool:
    if any(map(is_merge_update, right)):
        return True
    new_ids = set(map(message_id, right))
    new_ids.discard(None)
    return bool(new_ids) and reducer._holds_an_id(left, new_ids)


def repair_dangling_calls(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """``(repaired, added)``: a new list with a synthetic result right after each dead
    call's ai message (see :func:`~agentstate_reducer.plan.dangling_calls`), and those
    results; ``messages`` itself when there is no dead call."""
    views = read_messages(messages)
    dead = dangling_calls(views)
    if not dead:
        return messages, []
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
    return out, added


def _pending_start(messages: list[Any], read: Callable[[list[Any]], Sequence[Any]]) -> int:
    """The index in ``messages`` where calls that may still be pending begin (see
    :func:`~agentstate_reducer._links.pending_from`), reading a tail as long as needed."""
    n, k = len(messages), 2
    while True:
        low = max(0, n - k)
        begin = pending_from(read(messages[low:]))
        if begin is not None or low == 0:
            return low + (begin or 0)
        k *= 4


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
    if config.repair_dangling_calls:
        messages, added = reducer._repair(existing, messages)
    if not added:
        fast = reducer._append(existing, messages, namespace)
        if fast is not None:
            return Prepared(messages, fast, None, (), added)
    views = read_messages(messages)
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
        outcome = edit_messages(
            messages, views, counts, budget, reducer._count_one, reducer._part_counter()
        )
        messages, counts, edits = outcome.messages, outcome.counts, outcome.edits
        if config.token_mode and counts is not None:
            if config.calibrate_from_usage:
                reducer._learn(messages, views, counts, namespace)
            budget = reducer._budget(namespace)
    plan = _pinned_plan(messages, views, counts, budget, [], reducer._reserve())
    plan = reducer._anchored(plan, messages, views, counts, budget, [], reducer._reserve(),
                             namespace, remember=True)
    if editing:
        note = turn_note(messages, views, plan.turn, plan.dropped_steps, config)
        if note is not None:  # the turn ladder's last rung: one note for the dropped steps
            plan = reducer._noted(plan, note, counts, namespace)
    return Prepared(messages, plan, (views, counts), edits, added)


def _pinned_plan(
    messages: list[Any],
    views: list[MessageRecord],
    counts: Sequence[int] | None,
    config: ReducerConfig,
    keep: list[int],
    reserve: int,
    anchor: int | None = None,
) -> Plan:
    """:func:`make_plan`, planned again with the pinned messages once it passes the
    threshold (the ``pin`` predicate is asked only then)."""
    plan = make_plan(views, config, counts, pinned=keep, reserve=reserve, anchor=anchor)
    if plan.triggered and config.pin is not None:
        pin = config.pin
        if callable(pin):
            pinned = [i for i, m in enumerate(messages) if pin(m)]
        else:
            pinned = [i for i, v in enumerate(views) if v.id is not None and v.id in pin]
        if pinned:
            plan = make_plan(
                views, config, counts, pinned=[*keep, *pinned], reserve=reserve, anchor=anchor
            )
    return plan


class _Preparing(_Counting):
    """Read, edit and plan (the pure part), and the memory of returned lists."""

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
        plan = _pinned_plan(messages, views, counts, config, keep, reserve)
        plan = self._anchored(plan, messages, views, counts, config, keep, reserve, namespace)
        return plan, views, counts

    def _anchored(
        self,
        plan: Plan,
        messages: list[Any],
        views: list[MessageRecord],
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
        anchor = self._anchor(messages, views, namespace)
        if anchor is not None:
            plan = _pinned_plan(messages, views, counts, config, keep, reserve, anchor)
        if remember:
            self._keep_anchor(messages, views, plan, namespace)
        return plan

    def _anchor(
        self, messages: list[Any], views: list[MessageRecord], namespace: Any
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
        self, messages: list[Any], views: list[MessageRecord], plan: Plan, namespace: Any
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

    # -- the incremental path: a reduce of the list the last one returned -------------

    def _note(
        self, messages: list[Any], plan: Plan, memo: _Memo | None, result: ReducerResult[Any]
    ) -> None:
        """Remember the list a reduce returns, with the views and counts the plan read."""
        if memo is None:
            return  # the incremental path remembered it already
        views, counts = memo
        surviving = result.surviving
        if surviving is messages:
            if not plan.triggered:  # else over the threshold: the next reduce plans anyway
                self._remember(messages, views, None if counts is None else list(counts))
            return
        chosen = plan.pruned
        if (
            len(result.pruned) == len(chosen)
            and len(surviving) == len(messages) - len(chosen)  # no summary block went in
            and all(map(operator.is_, result.pruned, map(messages.__getitem__, chosen)))
        ):
            self._remember(
                surviving,
                _survivors(views, chosen),
                None if counts is None else _survivors(counts, chosen),
            )
            return
        self._remember(surviving, None, None)  # read again when next needed

    def _repair(self, existing: Any, messages: list[Any]) -> tuple[list[Any], list[Any]]:
        """:func:`repair_dangling_calls` of ``messages``; when they extend a list this
        reducer returned (or equal copies of it), whose calls were all answered or repaired
        but the latest response's, only that response and the new messages are read: no
        call before them can have died."""
        chain = self._match(existing, messages) if type(existing) is list else None
        size = 0 if chain is None else chain.size
        if 0 < size < len(messages):
            self._checked.list = (existing, chain)  # the plan's match, done already
            cache = self._token_counts if self.config.token_mode else None
            # Token mode reads through the cache: the tail's views are held, the new
            # messages' are read once for the plan that follows.
            read = read_messages if cache is None else (lambda ms: cache.read(ms)[0])
            try:
                start = _pending_start(messages[:size], read)
                if not dangling_calls(read(messages[start:])):
                    return messages, []
            except MessageFormatError:
                pass  # the full read raises it, naming the index in the whole list
            self._checked.list = None  # the full path follows: no match to hand over
        return repair_dangling_calls(messages)

    def _append(self, existing: Any, messages: list[Any], namespace: Any = None) -> Plan | None:
        """The plan of ``messages`` when they extend a list this reducer returned (or equal
        copies of it), else ``None``.

        The list must hold the same messages in the same order, each with the same or
        equal top-level fields (see :func:`_unchanged`), followed by the new ones. Then
        only the new messages are read and counted (see :func:`plan.plan_append`); usage
        one of them reports is learned here, and the plan uses the budget it leaves.
        """
        chain = self._match(existing, messages)
        if chain is None:
            return None
        config = self.config
        size, snapshot = chain.size, chain.snapshot
        cache = self._token_counts if config.token_mode else None
        budget = self._budget(namespace) if cache is not None else config
        settled = chain.settled
        if settled is None:
            settled = self._settle(chain, budget)
            if settled is None:
                return None
        new = messages[size:]
        try:
            # (count mode may have a cache too, for what editing counts: not used here)
            if cache is not None:
                new_views, new_counts = cache.read(new)
            else:
                new_views, new_counts = read_messages(new), None
        except MessageFormatError:
            return None  # the full path raises it, naming the index in the whole list
        if cache is not None:
            tokens = settled.tokens
            if config.calibrate_from_usage and new_counts is not None and tokens is not None:
                self._learn_new(tokens, size, new, new_views, new_counts, namespace)
            budget = self._budget(namespace)
            if budget is not config and self._edits_append is not None:
                return None  # the edit step's rule knows only the config's budget
        history = _Appended(snapshot, size, messages)
        got = plan_append(settled, history, new_views, budget, new_counts)
        if got is None:
            return None
        plan, settled = got
        rule = self._edits_append
        if rule is not None and not rule(
            settled.size, settled.tokens, new, new_counts, self._count_one, new_views
        ):
            return None
        ids = chain.ids
        prints, kinds, by_dict = chain.prints, chain.kinds, chain.by_dict
        new_kinds = _kinds(new)
        if kinds is not None or new_kinds is not None:
            by_dict = (by_dict or not size) and _by_dict(new)
            kinds = [*(kinds[:size] if kinds is not None else [dict] * size),
                     *(new_kinds if new_kinds is not None else [dict] * len(new))]
        last = size - 1
        if size and (messages[last] is not snapshot[last] or messages[0] is not snapshot[0]):
            # Equal copies (a checkpointer's): the chain goes on with them, so the next
            # reduce of the list returned now compares these objects, not copies again.
            self._keep(_Chain(
                id(messages), messages.copy(), len(messages), _prints(messages, kinds, by_dict),
                kinds, by_dict, None, None, _rebased(settled, snapshot, size, messages), None,
            ))
            return plan
        with self._chains_lock:
            if len(snapshot) == size and len(prints) == size:
                snapshot.extend(new)
                prints.extend(map(_print, new))
            else:  # another append from the same state extended them first
                snapshot = [*snapshot[:size], *new]
                prints = [*prints[:size], *map(_print, new)]
            if ids is not None:
                for k, view in enumerate(new_views):
                    if view.id is not None:
                        ids[view.id] = (size + k, new[k])
        self._keep(
            _Chain(id(messages), snapshot, len(messages), prints, kinds, by_dict, None, None,
                   settled, ids)
        )
        return plan

    def _match(self, existing: Any, messages: list[Any]) -> _Chain | None:
        """The remembered chain whose messages ``messages`` starts with, or ``None``.

        ``existing`` is looked up by identity first; else (a copy) each chain is tried,
        the latest first, those whose last message matches compared in full.
        """
        chains = self._chains
        if not chains:
            return None
        checked: tuple[list[Any], _Chain] | None = getattr(self._checked, "list", None)
        if checked is not None:
            self._checked.list = None
            seen, matched = checked
            if seen is existing and matched.size <= min(len(existing), len(messages)):
                return matched  # compared a moment ago, in this thread's same call
        with self._chains_lock:
            found = chains.get(id(existing))
            candidates = list(reversed(chains.values()))
        if found is not None:  # (or a list that took the id of one since freed)
            candidates.remove(found)
            candidates.insert(0, found)
        n = len(messages)
        whole = len(existing) if type(existing) is list else -1
        if whole >= 0:  # a chain holding all of existing first, then prefixes
            candidates.sort(key=lambda chain: chain.size != whole)
        fallback = None
        for chain in candidates:
            size = chain.size
            if n < size or (fallback is not None and size != whole):
                continue
            # existing itself in the common case: no copy
            seen = existing if size == whole else messages if n == size else messages[:size]
            if chain is not found and size and not _last_unchanged(seen, chain):
                continue
            if _unchanged(seen, chain):
                if size == whole or whole < 0:
                    return chain
                fallback = chain  # a prefix: a chain holding all of existing may follow
        return fallback

    def _holds_an_id(self, existing: list[Any], ids: set[Any]) -> bool:
        """Whether a message of ``existing`` has one of ``ids``: O(len(ids)) on a list this
        reducer returned (or a copy of it), through an index of its ids kept along its
        appends."""
        chain = self._match(existing, existing)
        if chain is None or chain.size != len(existing):
            return any(message_id(m) in ids for m in existing)
        index = chain.ids
        snapshot = chain.snapshot
        if index is None:
            index = {}
            for i in range(chain.size):
                ident = message_id(snapshot[i])
                if ident is not None:
                    index[ident] = (i, snapshot[i])
            chain = chain._replace(ids=index)
            self._keep(chain)
        # The reduce that follows in the same call need not compare the list again.
        self._checked.list = (existing, chain)
        for ident in ids:
            found = index.get(ident)
            if found is not None:
                at, message = found
                if at < chain.size and snapshot[at] is message:
                    return True
                # Overwritten by another branch from a shared state: ask the list itself.
                return any(message_id(m) in ids for m in existing)
        return False

    def _settle(self, chain: _Chain, budget: ReducerConfig) -> Settled | None:
        views, counts = chain.views, chain.counts
        token_mode = self.config.token_mode and self._token_counts is not None
        if views is None or (token_mode and counts is None):
            history = chain.snapshot[: chain.size]
            if token_mode and self._token_counts is not None:
                views, counts = self._token_counts.read(history)
            else:
                views = read_messages(history)
        settled = settle(views, chain.snapshot, budget, counts)
        rule = self._edits_append
        if settled is not None and rule is not None:
            # The append rule holds only for a history that editing leaves as it is.
            history = chain.snapshot[: chain.size]
            if not rule(settled.size, settled.tokens) or edit_messages(
                history, views, counts, self.config, self._count_one, self._part_counter()
            ).edits:
                return None
        if settled is not None:
            self._keep(chain._replace(views=None, counts=None, settled=settled))
        return settled

    def _remember(
        self, returned: list[Any], views: list[MessageRecord] | None, counts: list[int] | None
    ) -> None:
        kinds = _kinds(returned)
        self._keep(
            _Chain(
                id(returned),
                returned.copy(),
                len(returned),
                list(map(_print, returned)),
                kinds,
                kinds is not None and _by_dict(returned),
                views,
                counts,
                None,
            )
        )

    def _keep(self, chain: _Chain) -> None:
        key = chain.returned
        with self._chains_lock:
            chains = self._chains
            chains[key] = chain
            chains.move_to_end(key)
            while len(chains) > _CHAINS:
                chains.popitem(last=False)
