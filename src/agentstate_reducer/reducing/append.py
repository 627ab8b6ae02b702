"""The incremental path: a reduce of a list this reducer returned (or of equal copies of
it) plus new messages reads, counts and plans only the new ones (see
:func:`~agentstate_reducer.plan.plan_append`), when the history is settled: planned, it
would be left whole, and editing leaves it as it is. Each stage of
:func:`~.prepare.prepare` does its part of an append with what is here, or raises
:class:`Whole` where only the whole list can tell."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import ReducerConfig
from ..plan import Plan, Settled, plan_append, settle
from ..read import MessageRecord
from .chains import _Appended, _by_dict, _Chain, _kinds, _print, _prints, _rebased
from .memory import _Remembering


class Whole(Exception):
    """A stage of an append found that only the whole list can tell."""


def settled(
    reducer: _Remembering,
    chain: _Chain,
    messages: list[Any],
    views: list[MessageRecord],
    counts: list[int] | None,
    low: int,
    namespace: Any,
) -> tuple[Settled, ReducerConfig]:
    """The counts of an append to ``chain``: the settled state of its history (see
    :func:`~agentstate_reducer.plan.settle`; remembered in the chain, else found from
    ``views`` and ``counts``, of ``messages[low:]``, ``low`` 0 then), the usage a new
    message reports learned, and the budget the plan uses. :class:`Whole` when planning
    could prune the history."""
    config = reducer.config
    cache = reducer._token_counts if config.token_mode else None
    state = chain.settled
    size = chain.size
    if state is None:
        budget = config if cache is None else reducer._budget(namespace)
        history = None if counts is None else counts[:size]
        state = settle(views[:size], chain.snapshot, budget, history)
        if state is None:
            raise Whole
    if cache is None:
        return state, config
    tokens = state.tokens
    new_counts = None if counts is None else counts[size - low :]
    if config.calibrate_from_usage and new_counts is not None and tokens is not None:
        new = messages[size:]
        reducer._learn_new(tokens, size, new, views[size - low :], new_counts, namespace)
    return state, reducer._budget(namespace)


def appended_tokens(
    state: Settled, new_counts: Sequence[int] | None, budget: ReducerConfig
) -> int | None:
    """Tokens of the history and the new messages, as the plan of an append counts them."""
    if budget.max_tokens is None or state.tokens is None or new_counts is None:
        return None
    return state.tokens + sum(new_counts)


def planned(
    reducer: _Remembering,
    chain: _Chain,
    messages: list[Any],
    views: list[MessageRecord],
    counts: list[int] | None,
    low: int,
    state: Settled,
    budget: ReducerConfig,
    pending: tuple[int, int] | None,
) -> Plan:
    """The plan of an append to ``chain`` (:func:`~agentstate_reducer.plan.plan_append`),
    ``messages`` then remembered as the chain that goes on from it (``pending``: where
    the calls that may still be pending begin in the history and in ``messages``, with
    ``repair_dangling_calls``);
    :class:`Whole` when only the full plan can decide."""
    size = chain.size
    new_views = views[size - low :]
    new_counts = None if counts is None else counts[size - low :]
    history = _Appended(chain.snapshot, size, messages)
    got = plan_append(state, history, new_views, budget, new_counts)
    if got is None:
        raise Whole
    plan, after = got
    kept = _remember(
        reducer, chain, messages, new_views, after, None if pending is None else pending[1]
    )
    if kept is not None:
        reducer._planned(kept, state, budget, plan, new_views, new_counts)
    return plan


def _remember(
    reducer: _Remembering,
    chain: _Chain,
    messages: list[Any],
    new_views: list[MessageRecord],
    settled: Settled,
    pending: int | None,
) -> _Chain | None:
    """Remember ``messages``, the list an append to ``chain`` returns, as the chain that
    goes on from it; that chain, unless it goes on with equal copies (an append onto
    them is not planned again, see :meth:`~.memory._Remembering._replayed`)."""
    size, snapshot = chain.size, chain.snapshot
    new = messages[size:]
    prints, kinds, by_dict, classes = chain.prints, chain.kinds, chain.by_dict, chain.classes
    new_kinds = _kinds(new)
    added: list[type] | None = None  # the classes of the new messages, where kinds are kept
    if kinds is not None or new_kinds is not None:
        by_dict = (by_dict or not size) and _by_dict(new)
        added = new_kinds if new_kinds is not None else [dict] * len(new)
    if classes is not None:
        classes = classes.union((dict,) if new_kinds is None else new_kinds)
    last = size - 1
    if size and (messages[last] is not snapshot[last] or messages[0] is not snapshot[0]):
        # Equal copies (a checkpointer's): the chain goes on with them, so the next
        # reduce of the list returned now compares these objects, not copies again.
        # The chains of the originals copied are forgotten: they come back no more.
        if added is not None:
            kinds = [*(kinds[:size] if kinds is not None else [dict] * size), *added]
        with reducer._chains_lock:
            ids, named = _extended_ids(chain, new, new_views)
        rebased = _rebased(settled, snapshot, size, messages)
        # Forgotten first, and their prints dropped: they are freed before the copies'
        # are made, so a turn's worth of new prints does not push the
        # collector's count of new objects past its threshold (a collection in this
        # reduce, for objects it frees a moment later).
        first = snapshot[0]
        del chain, snapshot
        reducer._forget_copied(first)
        prints.clear()  # forgotten: freed now, though the stages' frames hold their chain
        reducer._keep(_Chain(
            id(messages), messages.copy(), len(messages), _prints(messages, kinds, by_dict),
            kinds, by_dict, None, None, rebased, ids, named, classes, pending,
        ))
        return None
    with reducer._chains_lock:
        if len(snapshot) == size and len(prints) == size:
            snapshot.extend(new)
            prints.extend(map(_print, new))
        else:  # another append from the same state extended them first
            snapshot = [*snapshot[:size], *new]
            prints = [*prints[:size], *map(_print, new)]
        if added is not None:  # extended as the snapshot is (a chain reads kinds[:size])
            if kinds is not None and len(kinds) == size:
                kinds.extend(added)
            else:
                kinds = [*(kinds[:size] if kinds is not None else [dict] * size), *added]
        ids, named = _extended_ids(chain, new, new_views)
    kept = _Chain(id(messages), snapshot, len(messages), prints, kinds, by_dict, None, None,
                  settled, ids, named, classes, pending)
    reducer._keep(kept)
    return kept


def _extended_ids(
    chain: _Chain, new: list[Any], views: list[MessageRecord]
) -> tuple[dict[str, tuple[int, Any]] | None, bool]:
    """``chain``'s index of ids with the ``new`` messages after its ``size`` (an id keeps
    its lowest index, see :attr:`~.chains._Chain.ids`), and whether every message has an
    id (under the chains' lock). An index holding more than twice the messages, the ids
    of those pruned long ago, is dropped: built again when asked."""
    ids, size = chain.ids, chain.size
    if ids is None or len(ids) > 2 * (size + len(new)) + 64:
        return None, False
    named = chain.named
    for k, view in enumerate(views):
        ident = view.id
        if ident is None:
            named = False
            continue
        held = ids.get(ident)
        if held is None or held[0] > size + k:
            ids[ident] = (size + k, new[k])
    return ids, named
