"""LangGraph's ``add_messages`` merge, less removals of ids the reducer pruned.

Shared by :meth:`MessageReducer.as_langgraph_reducer` (which merges an update only
``add_messages`` understands) and the LangGraph integration (``reducing_add_messages``).
It sits in the core so the core never imports an integration; LangChain and LangGraph
are imported at the first merge (:func:`require` raises ``ImportError`` without them).
"""

from __future__ import annotations

import operator
import os
import random
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection
from functools import cache
from types import SimpleNamespace
from typing import Any, cast

from .errors import MessageFormatError, ReducerError, UpdateError
from .read import as_update, message_id, read_message

__all__ = ("PrunedIds", "merge_messages", "plain_append", "require")


@cache
def _framework() -> Any:
    from langchain_core.messages import (
        BaseMessage,
        BaseMessageChunk,
        RemoveMessage,
        convert_to_messages,
    )
    from langgraph.graph.message import add_messages

    return SimpleNamespace(
        BaseMessage=BaseMessage,
        BaseMessageChunk=BaseMessageChunk,
        RemoveMessage=RemoveMessage,
        convert_to_messages=convert_to_messages,
        add_messages=add_messages,
    )


def _all_messages(items: list[Any]) -> bool:
    """Whether every item is a LangChain message, which the coercion and the conversion
    return unchanged: the few distinct classes are checked, not each item."""
    base = _framework().BaseMessage
    return all(issubclass(kind, base) for kind in set(map(type, items)))


def require() -> None:
    """Import LangChain and LangGraph now: ``ImportError`` if the extra is missing."""
    _framework()


def _as_update(value: Any) -> list[Any]:
    # add_messages' coercion: a tuple such as ("user", "hi") is one message, not a list.
    return [as_update(m) for m in value] if isinstance(value, list) else [as_update(value)]


class PrunedIds:
    """The ids a reducer pruned lately (the last ``size``), shared by the threads of a graph."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, messages: list[Any]) -> None:
        with self._lock:
            for m in messages:
                i = message_id(m)
                if i is not None:
                    self._ids[i] = None
                    self._ids.move_to_end(i)
            while len(self._ids) > self._size:
                self._ids.popitem(last=False)

    def __contains__(self, i: object) -> bool:
        with self._lock:
            return i in self._ids


def _without_stale_removals(left: list[Any], right: list[Any], pruned: PrunedIds) -> list[Any]:
    """Drop ``RemoveMessage`` updates for ids this reducer pruned, so they are not an error.

    Pruning removes messages a node may still hold; removing one of those again is a
    no-op. Any other unknown id reaches ``add_messages``, which raises ``ValueError``.
    """
    remove = _framework().RemoveMessage
    if not any(isinstance(m, remove) for m in right):
        return right
    known = {message_id(m) for m in left}
    known.update(message_id(m) for m in right if not isinstance(m, remove))
    return [
        m
        for m in right
        if not isinstance(m, remove) or m.id in known or m.id not in pruned
    ]


_ID = operator.attrgetter("id")

#: Where the ids given come from: a generator of this module's own, seeded from
#: ``os.urandom`` and again in a forked child, so that no seed a program sets reaches
#: it. ``uuid4()`` asks the system for each id, a system call that costs 40 us of CPU
#: in a LangGraph turn on a loaded virtual machine (bench/graph.py).
_RANDOM = random.Random()
os.register_at_fork(after_in_child=_RANDOM.seed)


def _new_id() -> str:
    """A new random UUID (version 4), as ``add_messages`` gives a message without an id."""
    return str(uuid.UUID(int=_RANDOM.getrandbits(128), version=4))


#: ``class -> whether _plain holds for it``: a few classes, asked twice a merge.
_PLAIN: dict[type, bool] = {}


def _plain(kinds: Collection[type]) -> bool:
    """Whether messages of these classes are what ``add_messages`` keeps as they are
    and appends: messages, neither chunks (it converts them) nor removals."""
    for kind in kinds:
        plain = _PLAIN.get(kind)
        if plain is None:
            fw = _framework()
            plain = issubclass(kind, fw.BaseMessage) and not issubclass(
                kind, (fw.BaseMessageChunk, fw.RemoveMessage)
            )
            if len(_PLAIN) < 256:  # classes made on the fly are not all kept
                _PLAIN[kind] = plain
        if not plain:
            return False
    return True


def plain_append(
    left: Any,
    right: Any,
    format: str | None = None,
    *,
    fresh: Callable[[list[Any], list[str]], tuple[bool, Collection[type]] | None] | None = None,
) -> list[Any] | None:
    """``right`` as ``add_messages(left, right)`` appends it, when that is all it does,
    else ``None`` (the merge decides).

    It is when both sides are lists of LangChain messages (no chunk, no removal), each
    of ``left`` has an id, and the ids of ``right`` are new and distinct: then the merge
    is ``left + right``, a message of ``right`` without an id given one as
    ``add_messages`` gives it (a new random UUID, set on the message). One pass over ``left``
    at C speed (the classes, then the ids into a set); ``fresh(left, ids)``, when it
    knows (not ``None``), says instead whether each of ``left`` has an id and none of
    the non-empty string ``ids`` of ``right`` is among them, and the classes of ``left``.
    """
    if format is not None or type(left) is not list:
        return None
    if type(right) is not list:
        right = [right]
    if not right or not _plain(set(map(type, right))):
        return None
    new = [i for i in map(_ID, right) if i is not None]
    if len(set(new)) != len(new):
        return None
    got = None
    if fresh is not None and all(type(i) is str and i for i in new):
        got = fresh(left, new)
    if got is not None:
        known, classes = got
        if not _plain(classes):
            return None
    else:
        if not _plain(set(map(type, left))):
            return None
        ids = set(map(_ID, left))
        known = None not in ids and ids.isdisjoint(new)
    if not known:
        return None
    appended: list[Any] = right
    for m in appended:
        if m.id is None:
            m.id = _new_id()
    return appended


def merge_messages(
    left: Any, right: Any, pruned: PrunedIds, format: str | None = None
) -> list[Any]:
    """``add_messages(left, right, format=format)``, minus removals of ids in ``pruned``.

    Raises:
        MessageFormatError: LangChain cannot make a message of an item; the error names
            its index in ``left + right`` (and in its side), never its content.
        UpdateError: ``add_messages`` refused the update (a removal of an id neither
            side holds), in its own words.
    """
    before = left if type(left) is list and _all_messages(left) else _as_update(left)
    existing = before if before is left else _converted(before, "left", 0)
    after = right if type(right) is list and _all_messages(right) else _as_update(right)
    # Converted first, so a dict {"type": "remove", "id": ...} is a RemoveMessage here too.
    update = _without_stale_removals(
        existing, after if after is right else _converted(after, "right", len(before)), pruned
    )
    # The wrapper LangGraph puts around add_messages hides its format= option from mypy.
    merge = cast(Callable[..., list[Any]], _framework().add_messages)
    try:
        return merge(existing, update, format=format)
    except ReducerError:
        raise
    except ValueError as exc:  # its words name the id, never a message's content
        raise UpdateError(str(exc)) from exc


def _converted(items: list[Any], side: str, offset: int) -> list[Any]:
    """``convert_to_messages(items)``; an item it refuses raises naming its index."""
    convert_to_messages = _framework().convert_to_messages
    try:
        converted: list[Any] = convert_to_messages(items)
        return converted
    except Exception as exc:
        for i, item in enumerate(items):  # which one: converted again, one by one
            try:
                convert_to_messages([item])
            except Exception as again:
                read_message(item, offset + i)  # the reader names the field, if it can
                # LangChain's text may quote the item: its type and the index only.
                raise MessageFormatError(
                    f"message at index {offset + i} ({side}[{i}]): LangChain cannot make a "
                    f"message of this {type(item).__name__} ({type(again).__name__})"
                ) from again
        raise MessageFormatError(
            f"the {side} messages: LangChain cannot make messages of them "
            f"({type(exc).__name__})"
        ) from exc
