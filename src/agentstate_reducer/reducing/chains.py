"""The lists a reducer returned, remembered (:class:`_Chain`) so that a reduce of one of them
(or of equal copies) plus new messages reads only the new ones; how a later list is
compared with what was remembered."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, NamedTuple, overload

from ..plan import Settled
from ..read import MessageRecord, copy_state, message_state

#: The views and counts a full plan read, kept to remember the list it returns.
_Memo = tuple[list[MessageRecord], "Sequence[int] | None"]

#: How many recent outputs a reducer remembers: one per conversation it serves at once.
_CHAINS = 8


class _Chain(NamedTuple):
    """A list a reduce returned, remembered so that the next reduce of it (or of equal
    copies of it) reads only the new messages."""

    #: ``id()`` of the list handed out. Not the list itself, which its owner frees when
    #: done; if the id is reused, comparing with the prints tells.
    returned: int
    #: Its messages as returned, in ``snapshot[:size]`` (the caller may edit the list it
    #: got in place). Never handed out: an append extends it in place, so a chain of
    #: appends shares one list; a second branch from the same state copies.
    snapshot: list[Any]
    size: int
    #: :func:`_print` of each message of ``snapshot`` when it was remembered, extended
    #: and copied along with it: what a later list is compared with.
    prints: list[Any]
    #: The class of each message, or ``None`` when every one was a plain dict; in
    #: ``kinds[:size]``, extended in place along a chain of appends as the snapshot is.
    kinds: list[type] | None
    #: Whether every message's fields are its ``__dict__`` (:func:`_by_dict`).
    by_dict: bool
    #: Views and counts of ``snapshot`` when the plan had them, to settle it lazily.
    views: list[MessageRecord] | None
    counts: list[int] | None
    #: The plan's state of ``snapshot``, once computed; ``None`` before.
    settled: Settled | None
    #: ``message id -> (index, message)`` of the snapshot, built when first asked for
    #: and shared along a chain of appends like the snapshot, and by the chain of
    #: equal copies that goes on from it. An entry holds the lowest index any chain
    #: sharing it gave the id, so an id at ``size`` or past it is held by no message
    #: of ``snapshot[:size]``; below, it counts only while the snapshot holds that
    #: message, or a message of that id, at that index. Ids leave it only when it is
    #: dropped, past twice the messages.
    ids: dict[str, tuple[int, Any]] | None = None
    #: Whether every message of ``snapshot[:size]`` has an id; known with ``ids``.
    named: bool = False
    #: The classes of the messages of ``snapshot[:size]``, known with ``ids``.
    classes: frozenset[type] | None = None
    #: With ``repair_dangling_calls``, the index in ``snapshot[:size]`` from which calls
    #: may still be pending (see :func:`~agentstate_reducer._structure.pending_from`),
    #: once known; the repair of an append reads from there.
    pending: int | None = None


#: An object message's top-level fields, read at C speed.
_FIELDS = operator.attrgetter("__dict__")


def _print(message: Any) -> Any:
    """What a message is recognised by later: a shallow copy of its top-level fields (a
    dict's items, an object's ``__dict__``), sharing every value; for an object without
    ``__dict__``, a :func:`copy_state` of what the reader reads."""
    if isinstance(message, dict):
        return message.copy()
    fields = getattr(message, "__dict__", None)
    if type(fields) is dict:
        return fields.copy()
    return copy_state(message_state(message))


def _fields(message: Any) -> Any:
    """The live side of :func:`_print`, compared with ``==`` against it."""
    if isinstance(message, dict):
        return message
    fields = getattr(message, "__dict__", None)
    if type(fields) is dict:
        return fields
    return message_state(message)


def _kinds(messages: list[Any]) -> list[type] | None:
    """The class of each message, or ``None`` when every one is a plain dict."""
    kinds = list(map(type, messages))
    return None if all(kind is dict for kind in kinds) else kinds


def _by_dict(messages: list[Any]) -> bool:
    """Whether every message is an object (no mapping) whose fields are its ``__dict__``."""
    return all(
        not isinstance(m, dict) and type(getattr(m, "__dict__", None)) is dict for m in messages
    )


def _unchanged(seen: list[Any], chain: _Chain, start: int = 0) -> bool:
    """Whether ``seen`` holds the chain's messages from ``start`` on (``len(seen)`` of
    them; from 0, its whole history): the same or equal top-level fields, message by
    message, of the same classes. Plain dicts: one C-level list comparison; objects:
    their classes, then their ``__dict__``, the same way."""
    end = start + len(seen)
    prints, kinds = chain.prints, chain.kinds
    if start or len(prints) != end:  # no copy of the prints in the common case
        prints = prints[start:end]
    try:
        if kinds is None:
            return bool(seen == prints)
        if start or len(kinds) != end:
            kinds = kinds[start:end]
        if list(map(type, seen)) != kinds:
            return False
        return bool(list(map(_FIELDS if chain.by_dict else _fields, seen)) == prints)
    except Exception:  # a field whose == raises (an array, say)
        return False


def _last_unchanged(seen: list[Any], chain: _Chain) -> bool:
    """:func:`_unchanged` of the last message only: which chains are worth comparing."""
    last = chain.size - 1
    kinds = chain.kinds
    message = seen[last]
    try:
        if kinds is not None and type(message) is not kinds[last]:
            return False
        return bool(_fields(message) == chain.prints[last])
    except Exception:
        return False


def _prints(messages: list[Any], kinds: list[type] | None, by_dict: bool) -> list[Any]:
    """:func:`_print` of each message, at C speed when all are dicts or all objects
    whose fields are their ``__dict__``."""
    if kinds is None:
        return list(map(dict.copy, messages))
    if by_dict:
        return list(map(dict.copy, map(_FIELDS, messages)))
    return list(map(_print, messages))


def _rebased(settled: Settled, snapshot: list[Any], size: int, messages: list[Any]) -> Settled:
    """``settled`` with its issuing messages taken from ``messages`` (equal copies of
    ``snapshot[:size]`` followed by new messages); an entry of another branch is left out."""
    issued: dict[str, tuple[int, object]] = {}
    for call, (i, message) in settled.issued.items():
        if i < size:
            if snapshot[i] is message:
                issued[call] = (i, messages[i])
        elif i < len(messages) and messages[i] is message:
            issued[call] = (i, message)
    return Settled(settled.size, settled.tokens, issued)


class _Appended(Sequence[Any]):
    """A chain's messages followed by the new ones, for :func:`plan.plan_append`: it
    asks whether the message that issued a call is still at its index, which holds for
    the chain's own objects, not for the equal copies ``messages`` may hold."""

    def __init__(self, snapshot: list[Any], size: int, messages: list[Any]) -> None:
        self._snapshot, self._size, self._messages = snapshot, size, messages

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._messages)))]
        if 0 <= index < self._size:
            return self._snapshot[index]
        return self._messages[index]
