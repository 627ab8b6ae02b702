"""The reader's errors: the one naming the index and the field of a message that could not
be read (:func:`_unreadable`, probing the foreign object's attributes again on the error
path), and the one for a message nested too deeply to read (:func:`too_deep`), found
without recursion."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import MessageFormatError
from ._field import FieldError as _FieldError
from .fields import _OBJECT_FIELDS, MAX_DEPTH, _read_failed
from .responses import item_type

__all__ = ("too_deep", "too_deep_among")


def _cause(exc: BaseException) -> BaseException | None:
    """What an error about a message chains: the foreign object's own error, if any."""
    if isinstance(exc, _FieldError):
        return exc.__cause__
    return None if isinstance(exc, (MessageFormatError, RecursionError)) else exc


def _unreadable(message: object, index: int, exc: BaseException) -> BaseException:
    """The error naming the index and the field for ``exc``, raised reading ``message``."""
    if isinstance(exc, MessageFormatError) and not isinstance(exc, _FieldError):
        return exc
    if isinstance(exc, RecursionError):
        # Not this message's doing if it is shallow (the caller's stack was deep already).
        return too_deep(message, index) if _deepest(message)[1] > MAX_DEPTH else exc
    if not isinstance(exc, _FieldError):
        exc = _probe(message, exc)
    listed = "input" if item_type(message) else "messages"  # as the Responses API names it
    where = f"{listed}[{index}]" if index >= 0 else "a message"
    return MessageFormatError(
        f"message at index {index} ({where}{exc.field}): {exc.problem}"
        if index >= 0
        else f"{where}{exc.field}: {exc.problem}"
    )


def _probe(message: object, exc: BaseException) -> _FieldError:
    """Which attribute of ``message`` raises, read again one by one (the error path)."""
    if not isinstance(message, Mapping):
        for key in (*_OBJECT_FIELDS, "reasoning_content", "parts", "__dict__"):
            try:
                getattr(message, key, None)
            except Exception as again:
                return _read_failed(f".{key}", again)
        parts = getattr(message, "parts", None)  # a PydanticAI message: which part raised
        for i, part in enumerate(parts if isinstance(parts, (list, tuple)) else ()):
            for key in _PART_FIELDS:
                try:
                    getattr(part, key, None)
                except Exception as again:
                    return _read_failed(f".parts[{i}].{key}", again)
    return _read_failed("", exc)


#: The attributes of a PydanticAI part the reader reads, probed on the error path.
_PART_FIELDS = ("part_kind", "tool_call_id", "tool_name", "content", "args", "transcript")


def too_deep(message: object, index: int) -> MessageFormatError:
    """The error for a message nested past what Python's recursion limit lets be read,
    naming ``index`` and the deepest field (found without recursion)."""
    path, depth = _deepest(message)
    return MessageFormatError(
        f"message at index {index} (messages[{index}]{path}): nested {depth} levels deep, "
        f"too deep to read; keep content and tool-call arguments within MAX_DEPTH "
        f"({MAX_DEPTH}) levels"
    )


def too_deep_among(messages: Iterable[Any], offset: int = 0) -> MessageFormatError | None:
    """:func:`too_deep` of the most deeply nested of ``messages`` (its index counted from
    ``offset``), or ``None`` when none nests past :data:`MAX_DEPTH` (a ``RecursionError``
    then came from elsewhere). For a ``RecursionError`` met after the messages were read."""
    found, most = -1, MAX_DEPTH
    items = list(messages)
    for i, message in enumerate(items):
        depth = _deepest(message)[1]
        if depth > most:
            found, most = i, depth
    return None if found < 0 else too_deep(items[found], found + offset)


def _deepest(message: object) -> tuple[str, int]:
    """The path to the most deeply nested value of ``message`` (its first steps, then
    ``...``) and the depth, by an explicit stack."""
    top: list[tuple[str, object]]
    if isinstance(message, Mapping):
        top = [(f".{k}", v) for k, v in message.items()]
    else:
        top = []
        for key in (*_OBJECT_FIELDS, "reasoning_content", "parts"):
            try:
                top.append((f".{key}", getattr(message, key, None)))
            except Exception:
                continue
    best_path: tuple[str, ...] = ()
    best = 0
    # (depth, the path's first steps, value): a path is kept only to its fourth step.
    stack: list[tuple[int, tuple[str, ...], object]] = [(1, (s,), v) for s, v in top]
    seen: set[int] = set()
    while stack:
        depth, path, value = stack.pop()
        if depth > best:
            best_path, best = path, depth
        if isinstance(value, Mapping):
            steps: Iterable[tuple[str, object]] = ((f".{k}", v) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            steps = ((f"[{i}]", v) for i, v in enumerate(value))
        else:
            continue
        if id(value) in seen:
            continue  # a cycle, or the same value twice
        seen.add(id(value))
        for step, child in steps:
            stack.append((depth + 1, path if len(path) >= 4 else (*path, step), child))
    shown = "".join(best_path[:4]) + ("..." if best > 4 else "")
    return shown, best
