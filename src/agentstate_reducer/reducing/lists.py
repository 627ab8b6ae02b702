"""Lists of messages in and out of a reduce: the one-or-many argument rules, survivors and
pruned split at C speed, a result rebuilt without its frozen ``__init__``."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from itertools import compress, repeat
from typing import Any, Protocol, TypeVar

from ..config import ReducerResult
from ..errors import ConfigTypeError


def as_message_list(value: Any) -> list[Any]:
    """``None`` -> ``[]``, a list or tuple -> a new list, anything else -> a one-item list.

    A lone dict is one message, never a sequence of its keys.
    """
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _message_list(value: Any, name: str) -> list[Any]:
    """``value`` as a list of messages, or the error naming ``name``'s argument."""
    if type(value) is list:
        return value
    if isinstance(value, tuple):
        return list(value)
    # The type only: a message's repr quotes its content.
    raise ConfigTypeError(
        f"{name}(messages): messages must be a list of messages, got a "
        f"{type(value).__name__}; a single message goes in a list"
    )


def hard_message_limit(max_messages: int) -> int:
    """Count mode's hard limit while summaries fail: twice ``max_messages`` messages
    (the summary block included), plus the preserved first message and pinned ones."""
    return 2 * max_messages


def _kept_flags(size: int, pruned: Sequence[int]) -> bytearray:
    """One flag per message, 1 where it stays; built at C speed."""
    flags = bytearray(b"\x01") * size
    for _ in map(flags.__setitem__, pruned, repeat(0)):
        pass
    return flags


def _split(messages: list[Any], pruned: Sequence[int]) -> tuple[list[Any], list[Any]]:
    if pruned and pruned[-1] - pruned[0] == len(pruned) - 1:  # one block: slices
        first, end = pruned[0], pruned[-1] + 1
        return messages[:first] + messages[end:], messages[first:end]
    flags = _kept_flags(len(messages), pruned)
    return list(compress(messages, flags)), list(map(messages.__getitem__, pruned))


def _survivors(items: Sequence[_T], pruned: Sequence[int]) -> list[_T]:
    """The items at the indices ``pruned`` (ascending) does not hold."""
    if not pruned:
        return list(items)
    if pruned[-1] - pruned[0] == len(pruned) - 1:
        return [*items[: pruned[0]], *items[pruned[-1] + 1 :]]
    flags = _kept_flags(len(items), pruned)
    if type(items) is list:
        return list(compress(items, flags))
    return list(map(items.__getitem__, compress(range(len(items)), flags)))  # lazy: no iter


def _rebuilt(result: ReducerResult[Any], **changes: Any) -> ReducerResult[Any]:
    """``dataclasses.replace(result, **changes)`` without the frozen ``__init__``: its
    setattr per field cost more than the rest of an append step. ``changes`` must hold
    a new value for every mutable field the new result should not share."""
    new = object.__new__(ReducerResult)
    new.__dict__.update(result.__dict__, **changes)
    return new


#: The fields of a reduce that pruned nothing, before its figures.
_NOTHING_PRUNED: ReducerResult[Any] = ReducerResult([], [], None)


def _concat(existing: Any, new: Any) -> list[Any]:
    """``as_message_list(existing) + as_message_list(new)`` with one copy in the common case."""
    if type(existing) is list:
        if new is None:
            return existing.copy()
        if type(new) is list:
            return existing + new
    return as_message_list(existing) + as_message_list(new)


_REASON = operator.itemgetter(0)


_T = TypeVar("_T")


class _HasContent(Protocol):
    @property
    def content(self) -> Any: ...


class _HasParts(Protocol):
    @property
    def parts(self) -> Any: ...


#: One message where a list is expected (``reduce(history, message)``), as typed: a dict,
#: or an object with ``content`` or ``parts``. Never a list or tuple, so that a list of
#: dicts with ``Any`` values types the result by its messages rather than as ``Any``.
OneMessage = Mapping[str, Any] | _HasContent | _HasParts
