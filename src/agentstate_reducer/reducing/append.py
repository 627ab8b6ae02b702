"""The incremental path: a reduce of a list this reducer returned (or of equal copies of
it) plus new messages reads, counts and plans only the new ones (see
:func:`~agentstate_reducer.plan.plan_append`), when the history is settled: planned, it
would be left whole, and editing leaves it as it is."""

from __future__ import annotations

from typing import Any

from ..config import ReducerConfig
from ..edit import edit_messages
from ..errors import MessageFormatError
from ..plan import Plan, Settled, plan_append, settle
from ..read import MessageRecord
from ..read.chat import read_messages
from .chains import _Appended, _by_dict, _Chain, _kinds, _print, _prints, _rebased
from .memory import _Remembering


def append(
    reducer: _Remembering, existing: Any, messages: list[Any], namespace: Any = None
) -> Plan | None:
    """The plan of ``messages`` when they extend a list this reducer returned (or equal
    copies of it), else ``None``.

    The list must hold the same messages in the same order, each with the same or
    equal top-level fields (see :func:`~.chains._unchanged`), followed by the new ones. Then
    only the new messages are read and counted (see :func:`plan.plan_append`); usage
    one of them reports is learned here, and the plan uses the budget it leaves.
    """
    chain = reducer._match(existing, messages)
    if chain is None:
        return None
    again = reducer._replayed(chain, messages, namespace)
    if again is not None:
        return again
    config = reducer.config
    size, snapshot = chain.size, chain.snapshot
    cache = reducer._token_counts if config.token_mode else None
    budget = config
    settled = chain.settled
    if settled is None:
        if cache is not None:
            budget = reducer._budget(namespace)
        settled = _settle(reducer, chain, budget)
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
            reducer._learn_new(tokens, size, new, new_views, new_counts, namespace)
        budget = reducer._budget(namespace)
        if budget is not config and reducer._edits_append is not None:
            return None  # the edit step's rule knows only the config's budget
    history = _Appended(snapshot, size, messages)
    got = plan_append(settled, history, new_views, budget, new_counts)
    if got is None:
        return None
    before = settled
    plan, settled = got
    rule = reducer._edits_append
    if rule is not None and not rule(
        settled.size, settled.tokens, new, new_counts, reducer._count_one, new_views
    ):
        return None
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
        # Forgotten first, and this frame's hold on them dropped: their prints are freed
        # before the copies' are made, so a turn's worth of new prints does not push the
        # collector's count of new objects past its threshold (a collection in this
        # reduce, for objects it frees a moment later).
        first = snapshot[0]
        del chain, prints, snapshot
        reducer._forget_copied(first)
        reducer._keep(_Chain(
            id(messages), messages.copy(), len(messages), _prints(messages, kinds, by_dict),
            kinds, by_dict, None, None, rebased, ids, named, classes,
        ))
        return plan
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
                  settled, ids, named, classes)
    reducer._keep(kept)
    reducer._planned(kept, before, budget, plan)
    return plan


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


def _settle(reducer: _Remembering, chain: _Chain, budget: ReducerConfig) -> Settled | None:
    """The settled state of ``chain``'s history (see :func:`~agentstate_reducer.plan.settle`),
    its records read again if they were dropped, remembered with it; ``None`` when
    planning could prune the history or editing would change it."""
    views, counts = chain.views, chain.counts
    token_mode = reducer.config.token_mode and reducer._token_counts is not None
    if views is None or (token_mode and counts is None):
        history = chain.snapshot[: chain.size]
        if token_mode and reducer._token_counts is not None:
            views, counts = reducer._token_counts.read(history)
        else:
            views = read_messages(history)
    settled = settle(views, chain.snapshot, budget, counts)
    rule = reducer._edits_append
    if settled is not None and rule is not None:
        # The append rule holds only for a history that editing leaves as it is.
        history = chain.snapshot[: chain.size]
        if not rule(settled.size, settled.tokens) or edit_messages(
            history, views, counts, reducer.config, reducer._count_one, reducer._part_counter()
        ).edits:
            return None
    if settled is not None:
        reducer._keep(chain._replace(views=None, counts=None, settled=settled))
    return settled
