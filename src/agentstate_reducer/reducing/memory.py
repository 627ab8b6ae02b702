"""The memory of the lists a reducer returned: each remembered as a :class:`~.chains._Chain`
when a reduce returns it, found again when a later list starts with it (the same list or
equal copies), so that repair and the incremental path read only what is new."""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from ..config import ReducerResult
from ..plan import Plan, Settled
from ..read import MessageRecord, is_merge_update, message_id
from ..read.chat import read_messages
from ..tokens.count import read_counted
from .chains import (
    _CHAINS,
    _by_dict,
    _Chain,
    _kinds,
    _last_unchanged,
    _Memo,
    _print,
    _unchanged,
)
from .counts import _Counting
from .lists import _survivors


def _needs_add_messages(reducer: _Remembering, left: list[Any], right: list[Any]) -> bool:
    if any(map(is_merge_update, right)):
        return True
    new_ids = set(map(message_id, right))
    new_ids.discard(None)
    return bool(new_ids) and reducer._holds_an_id(left, new_ids)


def _among(chain: _Chain, ids: set[Any]) -> bool | None:
    """Whether a message of ``chain``'s ``size`` has one of ``ids``, by its index (whose
    entries may name the originals of equal copies); ``None`` when an entry below
    ``size`` was given by another branch from a shared state."""
    index, snapshot, size = chain.ids, chain.snapshot, chain.size
    assert index is not None
    for ident in ids:
        found = index.get(ident)
        if found is not None:
            at, message = found
            if at >= size:
                continue  # its lowest index: no message before holds it
            held = snapshot[at]
            return True if held is message or message_id(held) == ident else None
    return False


class _Planned(NamedTuple):
    """An append the incremental path planned, kept to plan the same append again."""

    #: The settled state of the history it appended to.
    before: Settled
    #: The budget it planned with (after learning the usage its new messages report).
    budget: Any
    plan: Plan
    #: The chain it remembered for the list it returned.
    kept: _Chain
    #: The records and counts (token mode) of its new messages it planned with.
    views: list[MessageRecord]
    counts: list[int] | None


class _Remembering(_Counting):
    """The lists this reducer returned: remembered, matched, indexed by id."""

    #: The latest append planned (:meth:`_planned`), or ``None``.
    _last_append: _Planned | None = None

    def _planned(
        self, chain: _Chain, before: Settled, budget: Any, plan: Plan,
        views: list[MessageRecord], counts: list[int] | None,
    ) -> None:
        """Keep ``chain``, remembered for the list returned with ``plan`` by an append
        onto the history settled as ``before`` (its new messages read as ``views`` and
        ``counts``), to replay that append (:meth:`_replayed`)."""
        self._last_append = _Planned(before, budget, plan, chain, views, counts)

    def _replayed(self, chain: _Chain, messages: list[Any], namespace: Any) -> Plan | None:
        """The plan of the latest append again, when ``messages`` is that append once more:
        a chain of the same settled history matched, followed by the same new objects,
        unchanged since (their top-level fields against the prints then taken), with
        the same budget; the list is remembered as that append's was. Else ``None``.

        LangGraph merges each reply twice: the conditional edge reads the state with the
        node's update applied, then the update is applied, both times onto the same list.
        The plan is a function of the settled history, the new messages' records and
        counts and the budget, all unchanged; their usage was learned the first time (an
        ai message is learned from once, whatever the namespace). The namespace counts
        only through the budget it calibrates: a run's is a new tuple on every merge.
        """
        last = self._last_append
        if last is None or last.before is not chain.settled:
            return None
        kept, size, n = last.kept, chain.size, len(messages)
        if kept.size != n or n <= size:
            return None
        new, held = messages[size:], kept.snapshot
        if size and (messages[0] is not held[0] or messages[size - 1] is not held[size - 1]):
            return None  # equal copies: the append onto them goes on with them
        if not all(map(operator.is_, new, held[size:n])):
            return None
        if not _unchanged(new, kept, size):
            return None
        config = self.config
        # Read and counted again: the prints see the top-level fields only, not an edit
        # inside one (a content block changed in place). A built-in counter counts from
        # the record (read_counted, no copy taken); any other through the token cache.
        cache = self._token_counts if config.token_mode else None
        try:
            if cache is None:
                views, counts = read_messages(new), None
            else:
                read = [r for r in (read_counted(m, cache.counter) for m in new) if r]
                if len(read) == len(new):
                    views, counts = [r[0] for r in read], [r[1] for r in read]
                else:
                    views, counts = cache.read(new)
            if views != last.views or counts != last.counts:
                return None
        except Exception:  # unreadable now (the full path names it), or an == raising
            return None
        budget = (
            self._budget(namespace) if config.token_mode and self._token_counts is not None
            else config
        )
        if budget is not last.budget:
            return None
        self._keep(kept._replace(returned=id(messages)))
        return last.plan

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
        n = len(messages)
        whole = len(existing) if type(existing) is list else -1
        if found is not None:  # (or a list that took the id of one since freed)
            candidates.remove(found)
            if found.size == whole <= n:  # the list returned: compared first, alone
                if _unchanged(existing, found):
                    return found
            else:
                candidates.insert(0, found)
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
        chain = self._indexed(existing)
        if chain is None:
            return any(message_id(m) in ids for m in existing)
        held = _among(chain, ids)
        return any(message_id(m) in ids for m in existing) if held is None else held

    def _fresh_ids(
        self, existing: list[Any], ids: list[str]
    ) -> tuple[bool, frozenset[type]] | None:
        """Whether every message of ``existing`` has an id and none is one of ``ids``
        (non-empty strings), and the classes of its messages, in O(len(ids)) on a list
        this reducer returned (or a copy of it); ``None`` when not known so. The
        comparison it took is handed on to the next reduce in this thread: of
        ``existing`` (and new messages) it compares no more, so a reduce must follow,
        as in ``reducing_add_messages`` whatever merges."""
        chain = self._indexed(existing)
        if chain is None or not chain.named or chain.classes is None:
            return None
        held = _among(chain, set(ids))
        return None if held is None else (not held, chain.classes)

    def _indexed(self, existing: list[Any]) -> _Chain | None:
        """The chain holding all of ``existing``, with its index of ids (built if
        missing), handed on to the reduce that follows in this thread; else ``None``."""
        chain = self._match(existing, existing)
        if chain is None or chain.size != len(existing):
            return None
        if chain.ids is None or chain.classes is None:
            index: dict[str, tuple[int, Any]] = {}
            snapshot = chain.snapshot
            named = True
            for i in range(chain.size):
                ident = message_id(snapshot[i])
                if ident is None:
                    named = False
                elif ident not in index:  # the lowest index of an id (see _Chain.ids)
                    index[ident] = (i, snapshot[i])
            kinds = chain.kinds
            classes = frozenset((dict,) if kinds is None else kinds[: chain.size])
            chain = chain._replace(ids=index, named=named, classes=classes)
            self._keep(chain)
        # The reduce that follows in the same call need not compare the list again.
        self._checked.list = (existing, chain)
        return chain

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
        """Remember ``chain`` as the latest."""
        key = chain.returned
        with self._chains_lock:
            chains = self._chains
            chains[key] = chain
            chains.move_to_end(key)
            while len(chains) > _CHAINS:
                chains.popitem(last=False)

    def _forget_copied(self, first: Any) -> None:
        """Forget the chains whose first message is ``first``, of which equal copies now
        stand in (the originals a checkpointer's copies replace, and their branches).

        Forgotten, their messages are freed by whoever drops them last, not by a reduce
        that evicts them turns later; nor do they take :data:`_CHAINS` places.
        """
        with self._chains_lock:
            chains = self._chains
            for old in [k for k, c in chains.items() if c.snapshot and c.snapshot[0] is first]:
                del chains[old]
        self._last_append = None  # it holds a chain of the originals too
