"""Where a message keeps its fields: roles and their aliases, the payload of a dict
(LangChain serialisations one level down), attribute reads that name the field on error,
ids, and JSON text of a value.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ._field import FieldError as _FieldError
from ._field import as_id as _as_id

__all__ = (
    "AI",
    "FUNCTION",
    "HUMAN",
    "MAX_DEPTH",
    "PRUNABLE_ROLES",
    "SYSTEM",
    "TOOL",
    "args_text",
    "message_content",
    "message_id",
    "normalize_role",
    "raw_message_id",
)


HUMAN = "human"
AI = "ai"
SYSTEM = "system"
TOOL = "tool"
FUNCTION = "function"
#: Roles the window may remove directly; every other role is kept unless cascaded.
PRUNABLE_ROLES = frozenset({HUMAN, AI})

_ALIASES: dict[str, str] = {
    "human": HUMAN,
    "user": HUMAN,
    "humanmessage": HUMAN,
    "humanmessagechunk": HUMAN,
    "ai": AI,
    "assistant": AI,
    "agent": AI,
    "model": AI,
    "aimessage": AI,
    "aimessagechunk": AI,
    "system": SYSTEM,
    "developer": SYSTEM,
    "systemmessage": SYSTEM,
    "systemmessagechunk": SYSTEM,
    "tool": TOOL,
    "toolmessage": TOOL,
    "toolmessagechunk": TOOL,
    "function": FUNCTION,
    "functionmessage": FUNCTION,
    "functionmessagechunk": FUNCTION,
}
_CHAT_TYPES = frozenset({"chat", "chatmessage", "chatmessagechunk"})
_MEDIA_BLOCKS = frozenset(
    {
        "image",
        "image_url",
        "input_image",
        "audio",
        "input_audio",
        "file",
        "input_file",
        "document",
        "video",
    }
)
_TEXT_BLOCKS = frozenset({"text", "input_text", "output_text", "text-plain"})
#: Content blocks that issue a tool call (Anthropic ``tool_use``, LangChain v1 ``tool_call``
#: and ``invalid_tool_call``), billed as calls.
_CALL_BLOCKS = frozenset(
    {"tool_use", "tool_call", "invalid_tool_call", "server_tool_use", "server_tool_call"}
)
#: The call blocks a later tool result answers. A server-side call (``server_tool_use``,
#: ``server_tool_call``) is run by the provider and answered inside the same message, so
#: no tool message may answer it: it is billed, never linked.
_CLIENT_CALL_BLOCKS = _CALL_BLOCKS - {"server_tool_use", "server_tool_call"}
#: Reasoning blocks: Anthropic ``thinking`` / ``redacted_thinking``, LangChain v1 and
#: OpenAI ``reasoning``.
_REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking", "reasoning"})
_RESULT_BLOCKS = frozenset({"tool_result"})
_ANTHROPIC_CALL_BLOCKS = frozenset({"tool_use"})
_ANTHROPIC_BLOCKS = _ANTHROPIC_CALL_BLOCKS | _RESULT_BLOCKS

_M = TypeVar("_M")


def normalize_role(raw: object) -> str:
    """Map a role, type or class name onto the canonical role (unknown: lower-cased)."""
    if not isinstance(raw, str):
        return ""
    key = raw.lower()
    return _ALIASES.get(key, key)


#: How deeply a message may nest lists and dicts inside each other (in its content or a
#: tool call's arguments) and be read, counted, trimmed, edited and stored everywhere (the
#: outbox refuses deeper ones). Deeper nesting is read where nothing walks into it; where
#: something must (the JSON of a block or of arguments, a copy) and Python's recursion
#: limit is reached, the error is a :class:`MessageFormatError` naming the index and the
#: field (:func:`too_deep`), never a ``RecursionError``.
MAX_DEPTH = 100


def _payload(message: Mapping[str, Any]) -> tuple[Mapping[str, Any], object]:
    """Return the mapping holding a dict message's fields, and its raw role."""
    role = message.get("role")
    if role is not None:
        return message, role
    kind = message.get("type")
    if kind == "constructor":
        kwargs = message.get("kwargs")
        ident = message.get("id")
        cls = ident[-1] if isinstance(ident, list) and ident else None
        if isinstance(kwargs, Mapping):
            if isinstance(cls, str) and cls.lower() in _CHAT_TYPES:
                return kwargs, kwargs.get("role")
            return kwargs, cls
        return message, cls
    data = message.get("data")
    if isinstance(data, Mapping) and "content" in data:
        if isinstance(kind, str) and kind.lower() in _CHAT_TYPES:
            return data, data.get("role")
        return data, kind
    return message, kind


def _fields(message: object) -> Any:
    """Where a message keeps its fields: a dict's payload, or the object itself."""
    if type(message) is dict or isinstance(message, Mapping):
        return _payload(message)[0]
    return message


def _get(message: Any, key: str) -> Any:
    if type(message) is dict or isinstance(message, Mapping):
        return message.get(key)
    try:
        value = getattr(message, key, None)
    except Exception as exc:  # a foreign object's property: the error names the field
        raise _read_failed(f".{key}", exc) from exc
    if value is None and key in _descriptors(type(message)):
        try:  # None from getattr: missing, or a property raising AttributeError?
            getattr(message, key)
        except AttributeError as exc:
            raise _read_failed(f".{key}", exc) from exc
    return value


def _read_failed(field: str, exc: BaseException) -> _FieldError:
    # The exception's text is not repeated: a foreign object's error may quote content.
    return _FieldError(field, f"reading it raised {type(exc).__name__}")


#: Per class, the attribute names it computes (properties and other descriptors).
_DESCRIPTORS: dict[type, frozenset[str]] = {}


def _descriptors(cls: type) -> frozenset[str]:
    found = _DESCRIPTORS.get(cls)
    if found is None:
        found = _DESCRIPTORS[cls] = frozenset(
            name
            for klass in cls.__mro__
            for name, value in vars(klass).items()
            if hasattr(type(value), "__set__") or hasattr(value, "__set_name__")
        )
    return found


def _dedupe(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))


#: ``json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)``, built once.
_to_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode


def _c_encoder() -> Callable[[object, int], Sequence[str]] | None:
    """The C encoder :data:`_to_json` builds anew on every call, built once, or ``None``
    where it is missing or encodes otherwise (checked on a probe)."""
    try:
        encode = _new_c_encoder()
        probe = {"a": [1, 2.5, None, True, "é\n\"", float("inf")], "b": {3: ()}, "c": {1j}}
        if encode is None or "".join(encode(probe, 0)) != _to_json(probe):
            return None
    except Exception:
        return None
    return encode


def _new_c_encoder() -> Callable[[object, int], Sequence[str]] | None:
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    # With its cycle check (the markers): without one a cycle recurses as deep as the
    # recursion limit lets it, and past the C stack where that limit is raised.
    return make(  # type: ignore[no-any-return]
        {}, str, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )


#: Half of a short JSON's cost is building the encoder; arguments and Gemini responses
#: are made JSON once a message.
_C_JSON = _c_encoder()


def _json(value: object) -> str:
    global _C_JSON
    if isinstance(value, str):
        return value
    encode = _C_JSON
    if encode is not None:
        try:
            return "".join(encode(value, 0))
        except Exception:  # a cycle, a key JSON cannot write, too deep: as _to_json does
            # A failed call leaves what it was writing in the markers (held, and taken
            # for a cycle when met again): a new encoder starts with none; a call under
            # way in another thread keeps its own.
            _C_JSON = _new_c_encoder()
    try:
        return _to_json(value)
    except (TypeError, ValueError):
        return str(value)


def args_text(args: object) -> str:
    """A tool call's arguments as billed: JSON text as stored, else the value as JSON."""
    return args if type(args) is str and args else _json(args or {})


_new_record = tuple.__new__
_EMPTY: tuple[str, ...] = ()


def _unique_calls(
    calls: list[tuple[str | None, str, object]],
) -> tuple[tuple[str, object], ...]:
    """Drop a call whose id was already seen (LangChain keeps Anthropic calls twice)."""
    seen: set[str] = set()
    out: list[tuple[str, object]] = []
    for ident, name, args in calls:
        if ident is not None:
            if ident in seen:
                continue
            seen.add(ident)
        out.append((name, args))
    return tuple(out)


def _reasoning_field(fields: Any) -> object:
    """DeepSeek's ``reasoning_content`` (a field, or in ``additional_kwargs``), or ``None``."""
    found = _get(fields, "reasoning_content")
    if found is None and type(fields) is not dict and not isinstance(fields, Mapping):
        extra = _get(fields, "additional_kwargs")
        if isinstance(extra, Mapping):
            found = extra.get("reasoning_content")
    return found


def message_id(message: object) -> str | None:
    """The id of a message of any shape, or ``None``."""
    if isinstance(message, Mapping):
        return _as_id(_payload(message)[0].get("id"))
    return _as_id(getattr(message, "id", None))


def _framework_id(message: object) -> object:
    """An Agent Framework ``Message``'s ``message_id``, else the framework's id of the
    first function call or result it holds (``"function_call:af-call-..."``): stable
    wherever the message sits, so the ledger knows it again after an earlier message
    left the framework's history (an abandoned approval does)."""
    value = getattr(message, "message_id", None)
    if value is not None:
        return value
    for content in getattr(message, "contents", None) or ():
        kind = getattr(content, "type", None)
        ident = getattr(content, "id", None)
        if kind in ("function_call", "function_result") and isinstance(ident, str) and ident:
            return f"{kind}:{ident}"
    return None


def raw_message_id(message: object) -> object:
    """The id of a message as stored (``1`` and ``"1"`` differ), or ``None`` for none."""
    if isinstance(message, Mapping):
        value = _payload(message)[0].get("id")
    else:
        value = getattr(message, "id", None)
        if value is None and type(message).__module__.startswith("agent_framework"):
            value = _framework_id(message)
    return None if value is None or value == "" else value


#: Attributes the reader reads from a message object.
_OBJECT_FIELDS = (
    "type",
    "role",
    "id",
    "name",
    "tool_call_id",
    "content",
    "tool_calls",
    "invalid_tool_calls",
    "function_call",
    "additional_kwargs",
)


def message_content(message: object) -> Any:
    """The raw ``content`` of a message of any shape, or ``None`` when it has none."""
    fields: Any = _payload(message)[0] if isinstance(message, Mapping) else message
    return _get(fields, "content")


def _value_size(value: object) -> int:
    """At least the UTF-8 bytes of every string in ``value`` (a ``repr`` holds each whole)."""
    if value is None:
        return 0
    if type(value) is str:
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    try:
        return len(repr(value).encode("utf-8", "surrogatepass"))
    except Exception:
        return sys.maxsize
