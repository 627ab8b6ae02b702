"""Microsoft Agent Framework's message shape: ``Message`` holding typed ``Content`` items.

Read by duck typing (a message has a string ``role`` and a list of ``contents``, each
saying what it is in ``type``), so nothing here imports ``agent_framework``.

How the shape maps onto the reader's view:

* an ``assistant`` message issues the calls of its ``function_call`` contents (by
  ``call_id``); text, reasoning and calls of one message are never cut apart.
* a ``tool`` message answers calls with its ``function_result`` contents (by ``call_id``);
  a ``user`` or ``system`` message is what its role says.
* a function result's output is its ``items`` (``result`` holds their text): an edited
  result is written back with the content class's own ``from_function_result``, so both
  say the same.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ._field import FieldError, as_id, per_class
from ._field import kind as kind_of
from .fields import _ALIASES, _json, _unique_calls, _value_size
from .record import (
    BLANK_PART,
    MEDIA_PART,
    OTHER_PART,
    REASONING_PART,
    TEXT_PART,
    TOOL_ARGS_PART,
    TOOL_RESULT_PART,
    TOOL_USE_PART,
    EditablePart,
    Extras,
    MessageRecord,
    ReasoningPart,
    Shape,
    register,
)

__all__ = (
    "is_message",
    "marker",
    "sendable",
    "state",
    "synthetic_results",
    "text_message",
    "with_values",
    "without",
)

#: Content types billed and counted as media, by item.
_MEDIA = frozenset({"data", "uri", "hosted_file", "image_generation_tool_result"})


def _is_message_class(cls: type) -> bool:
    return cls.__name__ == "Message" and cls.__module__.startswith("agent_framework")


#: True for an Agent Framework ``Message`` (by class, cached per class).
is_message = per_class(_is_message_class)


def _contents(message: object) -> Sequence[Any]:
    contents = getattr(message, "contents", None)
    return contents if isinstance(contents, (list, tuple)) else ()


def _type(content: object, i: int) -> str:
    kind = getattr(content, "type", None)
    if type(kind) is not str:
        raise FieldError(f".contents[{i}]", f"expected a content, got {kind_of(content)}")
    return kind


def _call_id(content: object, i: int) -> str | None:
    value = getattr(content, "call_id", None)
    if type(value) is str:
        return value or None
    return None if value is None else as_id(value, f".contents[{i}].call_id")


def _result_text(content: object) -> str | None:
    result = getattr(content, "result", None)
    return result if isinstance(result, str) else None


def _read(message: object) -> MessageRecord:
    contents = getattr(message, "contents", None)
    if not isinstance(contents, (list, tuple)):
        raise FieldError(".contents", f"expected a list of contents, got {kind_of(contents)}")
    raw = getattr(message, "role", None)
    role = _ALIASES.get(str(raw).lower(), str(raw).lower())
    calls: list[str] = []
    answers: list[str] = []
    texts: list[str] = []
    billed: list[tuple[str | None, str, object]] = []
    media = 0
    reasoning: list[int] = []
    for i, content in enumerate(contents):
        kind = _type(content, i)
        if kind in ("text", "text_reasoning"):
            text = getattr(content, "text", None)
            if isinstance(text, str) and text:
                texts.append(text)
            if kind == "text_reasoning":
                reasoning.append(i)
        elif kind == "function_call":
            ident = _call_id(content, i)
            name = getattr(content, "name", None)
            billed.append((ident, name if isinstance(name, str) else "", _args(content)))
            if ident is not None:
                calls.append(ident)
        elif kind == "function_result":
            ident = _call_id(content, i)
            if ident is not None:
                answers.append(ident)
            text = _result_text(content)
            if text:
                texts.append(text)
            elif getattr(content, "result", None) is not None:
                texts.append(_json(content.result))
        elif kind in _MEDIA:
            media += 1
    calls_t = tuple(dict.fromkeys(calls))
    answers_t = tuple(dict.fromkeys(answers))
    extras = Extras(
        None, tuple(texts), _unique_calls(billed), None, answers_t, media, tuple(reasoning),
        _SHAPE,
    )
    ident = getattr(message, "message_id", None)
    return MessageRecord(role, as_id(ident), calls_t, answers_t, None, extras)


def _args(content: object) -> object:
    arguments = getattr(content, "arguments", None)
    return {} if arguments is None else arguments


def _kinds(message: object) -> tuple[str, ...]:
    out: list[str] = []
    for content in _contents(message):
        kind = getattr(content, "type", None)
        if kind == "text":
            text = getattr(content, "text", None)
            out.append(TEXT_PART if isinstance(text, str) and text.strip() else BLANK_PART)
        elif kind == "text_reasoning":
            out.append(REASONING_PART)
        elif kind == "function_call":
            out.append(TOOL_USE_PART)
        elif kind == "function_result":
            out.append(TOOL_RESULT_PART)
        elif kind in _MEDIA:
            out.append(MEDIA_PART)
        else:
            out.append(OTHER_PART)
    return tuple(out)


def _editable(message: object) -> list[EditablePart]:
    """A function result's ``result`` (``"tool_result"``), a call's ``arguments``
    (``"tool_args"``) and a text content's ``text`` (``"text"``), by path."""
    out: list[EditablePart] = []
    names: dict[str, str] = {}
    for j, content in enumerate(_contents(message)):
        kind = getattr(content, "type", None)
        name = getattr(content, "name", None)
        ident = as_id(getattr(content, "call_id", None))
        if kind == "function_call":
            if ident is not None and isinstance(name, str):
                names[ident] = name
            tool = name if isinstance(name, str) and name else None
            out.append(EditablePart(("contents", j, "arguments"), TOOL_ARGS_PART, ident, tool,
                                    getattr(content, "arguments", None)))
        elif kind == "function_result":
            out.append(EditablePart(("contents", j, "result"), TOOL_RESULT_PART, ident,
                                    names.get(ident or ""), getattr(content, "result", None)))
        elif kind == "text" and isinstance(getattr(content, "text", None), str):
            out.append(EditablePart(("contents", j, "text"), TEXT_PART, None, None,
                                    content.text))
    return out


def state(message: object) -> object:
    """Everything the reader reads from a message, as one comparable value: its class and
    its ``to_dict()`` (the framework's own serialisation: plain values, no addresses)."""
    to_dict = getattr(message, "to_dict", None)
    if callable(to_dict):
        return [type(message), to_dict()]
    return [type(message), getattr(message, "role", None), list(_contents(message))]


def _properties(message: object) -> dict[str, Any]:
    found = getattr(message, "additional_properties", None)
    return dict(found) if isinstance(found, Mapping) else {}


def marker(message: object, key: str) -> object:
    """The value under ``key`` in a message's ``additional_properties``, or ``None``."""
    return _properties(message).get(key)


def _with(content: Any, field: str, value: object) -> Any:
    if field == "result" and getattr(content, "type", None) == "function_result":
        return type(content).from_function_result(
            content.call_id,
            id=getattr(content, "id", None),
            result=value,
            status=getattr(content, "status", None),
            additional_properties=dict(getattr(content, "additional_properties", None) or {}),
        )
    copied = copy.copy(content)
    setattr(copied, field, value)
    return copied


def with_values(
    message: Any,
    values: Mapping[tuple[str | int, ...], object],
    note: Mapping[str, Any] | None,
    note_key: str,
) -> Any:
    """A copy of ``message`` with each path of :func:`_editable` set to its value; every
    other content shared, never mutated. ``("id",)`` sets ``message_id``; ``note`` goes in
    ``additional_properties`` under ``note_key``."""
    contents = list(_contents(message))
    ident: object = None
    for path, value in values.items():
        value = copy.deepcopy(value)
        if path == ("id",):
            ident = value
        elif path == ("contents",):
            contents = list(value)  # type: ignore[call-overload]
        elif len(path) == 3 and path[0] == "contents" and isinstance(path[1], int):
            contents[path[1]] = _with(contents[path[1]], str(path[2]), value)
        else:
            raise ConfigError(f"no editable part of an Agent Framework message at {path!r}")
    copied = copy.copy(message)
    copied.contents = contents
    properties = _properties(message)
    if note is not None:
        properties[note_key] = dict(note)
    copied.additional_properties = properties
    if ident is not None:
        copied.message_id = ident
    return copied


def without(message: Any, blocks: set[int]) -> Any:
    """A copy of ``message`` without the contents at ``blocks`` (``None`` when none is left)."""
    kept = [c for i, c in enumerate(_contents(message)) if i not in blocks]
    if not kept:
        return None
    copied = copy.copy(message)
    copied.contents = kept
    copied.additional_properties = _properties(message)
    return copied


def _classes(sample: object) -> tuple[Any, Any]:
    module = sys.modules.get(type(sample).__module__)
    return getattr(module, "Message", None), getattr(module, "Content", None)


def synthetic_results(issuer: object, call_ids: tuple[str, ...], content: str) -> list[Any]:
    """One ``tool`` message of function results answering ``call_ids``, built with the
    classes of the issuer's own module."""
    message_cls, content_cls = _classes(issuer)
    results = [content_cls.from_function_result(c, result=content) for c in call_ids]
    return [message_cls(role="tool", contents=results)]


def text_message(
    sample: object, role: str, text: str, ident: object, properties: Mapping[str, Any] | None
) -> Any:
    """A message of ``role`` holding one text content, built like ``sample``'s class."""
    message_cls, content_cls = _classes(sample)
    message = message_cls(role=role, contents=[content_cls.from_text(text)])
    if isinstance(ident, str):
        message.message_id = ident
    message.additional_properties = dict(properties or {})
    return message


def sendable(messages: Sequence[Any], keys: frozenset[str]) -> list[Any]:
    """``messages`` with ``keys`` taken out of any message's ``additional_properties``
    that holds them (a copy; the others are the messages themselves)."""
    out: list[Any] = []
    for message in messages:
        properties = _properties(message) if is_message(message) else {}
        if keys.isdisjoint(properties):
            out.append(message)
            continue
        copied = copy.copy(message)
        copied.additional_properties = {k: v for k, v in properties.items() if k not in keys}
        out.append(copied)
    return out


class _AgentFrameworkShape(Shape):
    """Agent Framework ``Message`` objects."""

    name = "agent-framework"

    def read(self, message: object, index: int) -> MessageRecord | None:
        if not is_message(message):
            return None
        return _read(message)

    def kinds(self, message: object, record: MessageRecord) -> tuple[str, ...]:
        return _kinds(message)

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        return tuple(_editable(message))

    def editable_size(self, message: object, record: MessageRecord) -> int:
        parts = _editable(message)
        return sum(_value_size(part.value) for part in parts if part.kind != TOOL_ARGS_PART)

    def reasoning(self, message: object, record: MessageRecord) -> tuple[ReasoningPart, ...]:
        return tuple(ReasoningPart("text_reasoning", i, True) for i in record.reasoning)


_SHAPE = _AgentFrameworkShape()
register(_SHAPE)
