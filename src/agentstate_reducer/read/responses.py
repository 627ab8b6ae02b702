"""The OpenAI Responses API / Agents SDK input items, read into records.

Only the reader calls this module: it dispatches here a dict with no ``role`` whose
``type`` is one of :data:`ITEM_TYPES`. Messages (``{"type": "message", "role": ...}`` and
the easy ``{"role": ..., "content": ...}``) carry a role, so the chat reader reads them.

An item is read into plain values (role, id, calls issued, calls answered, billed text,
editable paths); nothing here builds a copy or knows another shape. Writes go through
``messages.with_parts`` / ``with_content``, which set existing keys in place, so an
edited copy keeps every key, in order, and leaves unknown keys untouched.

How items group (see :func:`messages.response_units`): a ``reasoning`` item belongs
with the output items after it (a ``message``, ``function_call`` ...) up to the next
input item; a ``compaction`` item is a boundary nothing before it survives.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._field import FieldError, as_id
from ._field import kind as kind_of
from .fields import _value_size
from .record import (
    GROUP_BOUNDARY,
    GROUP_NONE,
    GROUP_OUTPUT,
    GROUP_REASONING,
    REASONING_PART,
    TOOL_ARGS_PART,
    EditablePart,
    Extras,
    MessageRecord,
    ReasoningPart,
    Shape,
    _chat_kinds,
    register,
)

__all__ = (
    "CALL_TYPES",
    "COMPACTION",
    "ITEM_TYPES",
    "OUTPUT_TYPES",
    "REASONING",
    "REQUEST_LIST",
    "SYSTEM_KEY",
    "ItemRead",
    "billed",
    "editable",
    "read_item",
    "reasoning_kinds",
    "reasoning_signed",
    "request_system",
    "synthetic_outputs",
)

#: A tool call the client runs, and the type of the item carrying its result.
CALL_TYPES: dict[str, str] = {
    "function_call": "function_call_output",
    "computer_call": "computer_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
_RESULT_TYPES = frozenset(CALL_TYPES.values())
REASONING = "reasoning"
COMPACTION = "compaction"
#: Tools the provider runs itself: the item is the call and its result at once.
_SERVER_TYPES = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
    }
)
#: Items the model produces: one response is a run of them, never split by the reducer.
OUTPUT_TYPES = frozenset({REASONING, *CALL_TYPES, *_SERVER_TYPES})
#: Every ``type`` read here (items with no ``role``).
ITEM_TYPES = frozenset({*OUTPUT_TYPES, *_RESULT_TYPES, COMPACTION})

# Canonical roles, as ``fields.py`` spells them (repeated rather than imported;
# ``test_shape_responses`` checks they agree).
_AI = "ai"
_TOOL = "tool"
_SYSTEM = "system"

#: ``(role, id, calls issued, calls answered)`` of one item.
ItemRead = tuple[str, str | None, tuple[str, ...], tuple[str, ...]]
_NONE: tuple[str, ...] = ()


def _as_id(value: object) -> str | None:
    return as_id(value)  # read once by read_item(), which names the field of a bad one


def _id(item: Mapping[str, Any], key: str) -> str | None:
    """``item[key]`` as an id (ints and UUIDs as text); the error names ``.key``."""
    value = item.get(key)
    if type(value) is str:
        return value or None
    return None if value is None else as_id(value, "." + key)


def read_item(item: Mapping[str, Any], kind: str) -> ItemRead:
    """Role, id, calls issued and calls answered of an item whose ``type`` is ``kind``.

    A call and its output are linked by ``call_id``; the item's own ``id`` (``fc_...``,
    ``rs_...``) is its id. A ``compaction`` item reads as a system message: the window
    never prunes it.
    """
    ident = _id(item, "id")
    if kind in CALL_TYPES:
        call = _id(item, "call_id")
        return _AI, ident, (call,) if call is not None else _NONE, _NONE
    if kind in _RESULT_TYPES:
        call = _id(item, "call_id")
        return _TOOL, ident, _NONE, (call,) if call is not None else _NONE
    if kind == COMPACTION:
        return _SYSTEM, ident, _NONE, _NONE
    return _AI, ident, _NONE, _NONE  # reasoning, and the provider's own tools


def reasoning_kinds(item: Mapping[str, Any]) -> int:
    """How many parts a ``reasoning`` item's ``content`` holds (each one reasoning)."""
    content = item.get("content")
    return len(content) if isinstance(content, list) else 0


def reasoning_signed(item: Mapping[str, Any]) -> bool:
    """Whether a ``reasoning`` item carries what the API finds it by: its ``id`` (a stored
    response) or its ``encrypted_content`` (a stateless one)."""
    return any(isinstance(item.get(k), str) and item.get(k) for k in ("id", "encrypted_content"))


def _json(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(value)


def _texts(parts: object, out: list[str], field: str) -> int:
    """Append the text of ``parts`` (a string or a list of typed parts); return media items.
    ``field`` names the key holding them in the error for a part that is no part."""
    if isinstance(parts, str):
        if parts:
            out.append(parts)
        return 0
    if isinstance(parts, Mapping):
        parts = [parts]
    media = 0
    if isinstance(parts, (list, tuple)):
        for j, part in enumerate(parts):
            if isinstance(part, str):
                if part:
                    out.append(part)
            elif not isinstance(part, Mapping):
                raise FieldError(f".{field}[{j}]", f"expected a part object, got {kind_of(part)}")
            else:
                kind = part.get("type")
                if kind in ("input_image", "input_file", "computer_screenshot"):
                    media += 1
                else:
                    text = part.get("text")
                    if isinstance(text, str) and text:
                        out.append(text)
    return media


def billed(
    item: Mapping[str, Any], kind: str
) -> tuple[list[str], list[tuple[str, str]], str | None, int]:
    """What the provider bills for an item: ``(texts, tool calls, answered id, media)``.

    A call bills its name and arguments (``input`` for a custom tool, ``action`` for the
    computer and shell tools); an output its ``call_id`` and output (screenshots as
    media). A ``reasoning`` item bills the reasoning it carries back: its ``content``
    text and its ``encrypted_content`` (whose size stands for the hidden reasoning
    tokens), or its summary when it has neither. A ``compaction`` item bills its
    encrypted summary by size.
    """
    texts: list[str] = []
    calls: list[tuple[str, str]] = []
    answered: str | None = None
    media = 0
    if kind in CALL_TYPES:
        name = item.get("name")
        if "arguments" in item:
            args = item.get("arguments")
        elif "input" in item:
            args = item.get("input")
        else:
            args = item.get("action")
        label = name if isinstance(name, str) else kind.removesuffix("_call")
        calls.append((label, _json(args if args is not None else {})))
    elif kind in _RESULT_TYPES:
        answered = _as_id(item.get("call_id"))
        media = _texts(item.get("output"), texts, "output")
    elif kind == REASONING:
        _texts(item.get("content"), texts, "content")
        encrypted = item.get("encrypted_content")
        if isinstance(encrypted, str) and encrypted:
            texts.append(encrypted)
        if not texts:
            _texts(item.get("summary"), texts, "summary")
    elif kind == COMPACTION:
        encrypted = item.get("encrypted_content")
        if isinstance(encrypted, str) and encrypted:
            texts.append(encrypted)
    else:  # the provider's own tools: what the call asked and what it found
        for key in ("action", "arguments", "queries", "code", "input", "output", "result"):
            value = item.get(key)
            if isinstance(value, str):
                if value:
                    texts.append(value)
            elif value is not None:
                texts.append(_json(value))
    return texts, calls, answered, media


#: ``(path, kind, call id, tool name, value)``: one part context editing may replace.
Editable = tuple[tuple[str | int, ...], str, str | None, str | None, Any]


def editable(item: Mapping[str, Any], kind: str) -> list[Editable]:
    """The parts of an item context editing may replace.

    A ``function_call_output`` / ``custom_tool_call_output`` gives its ``output`` (kind
    ``"tool_result"``); a ``function_call`` its ``arguments`` and a custom call its
    ``input`` (kind ``"tool_args"``). Reasoning, compaction and the computer and shell
    tools give nothing: their payloads must go back as the provider wrote them.
    """
    call = _as_id(item.get("call_id"))
    if kind in ("function_call_output", "custom_tool_call_output") and "output" in item:
        return [(("output",), "tool_result", call, None, item["output"])]
    if kind in ("function_call", "custom_tool_call"):
        key = "arguments" if kind == "function_call" else "input"
        if key in item:
            name = item.get("name")
            tool = name if isinstance(name, str) and name else None
            return [((key,), "tool_args", call, tool, item[key])]
    return []


def synthetic_outputs(
    issuer: Mapping[str, Any], kind: str, call_ids: tuple[str, ...], content: str
) -> list[dict[str, Any]]:
    """One output item per dead call of ``issuer`` (a call item of type ``kind``)."""
    result = CALL_TYPES[kind]
    if kind not in ("function_call", "custom_tool_call"):
        # Computer and shell outputs have a structured payload no text can stand in for.
        return []
    return [{"type": result, "call_id": call, "output": content} for call in call_ids]


# -- the request: {"model": ..., "instructions": "...", "input": [...]} ---------------

#: The key of a Responses request holding its input items.
REQUEST_LIST = "input"
#: The key holding its system prompt (a string).
SYSTEM_KEY = "instructions"


def request_system(document: Mapping[str, Any]) -> dict[str, Any] | None:
    """The request's ``instructions`` as a system message, or ``None`` when it has none
    (or they are not a string: then they are left as they are)."""
    instructions = document.get(SYSTEM_KEY)
    if not isinstance(instructions, str):
        return None
    return {"role": _SYSTEM, "content": instructions}


def item_type(message: object) -> str | None:
    """The ``type`` of an OpenAI Responses item read by this module, else ``None``.

    Messages (``{"type": "message", "role": ...}``, easy input messages) have a role and
    are read as chat messages: ``None``.
    """
    if type(message) is not dict and not isinstance(message, Mapping):
        return None
    if message.get("role") is not None:
        return None
    kind = message.get("type")
    return kind if type(kind) is str and kind in ITEM_TYPES else None


class _ResponsesShape(Shape):
    """OpenAI Responses API / Agents SDK items: a dict with no ``role`` whose ``type`` is
    a Responses item type. One instance per group."""

    name = "openai-responses"
    dicts = True

    def __init__(self, group: int = GROUP_NONE) -> None:
        self.group = group

    def read(self, message: object, index: int) -> MessageRecord | None:
        if type(message) is dict:  # item_type(), inline: most dicts the reader asks are items
            if message.get("role") is not None:
                return None
            kind = message.get("type")
            if type(kind) is not str or kind not in ITEM_TYPES:
                return None
            plain = _read_plain(message, kind)
            if plain is not None:
                return plain
        else:
            found = item_type(message)
            if found is None:
                return None
            kind = found
        assert isinstance(message, Mapping)
        role, ident, calls, answers = read_item(message, kind)
        texts, billed_calls, answered, media = billed(message, kind)
        extras = Extras(
            None, tuple(texts), tuple(billed_calls), answered, (), media, (),
            _RESPONSES_GROUPS.get(kind, _RESPONSES),
        )
        return MessageRecord(role, ident, calls, answers, None, extras)

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        kind = item_type(message)
        assert kind is not None and isinstance(message, Mapping)
        return tuple(EditablePart(*part) for part in editable(message, kind))

    def editable_size(self, message: object, record: MessageRecord) -> int:
        kind = item_type(message)
        assert kind is not None and isinstance(message, Mapping)
        parts = editable(message, kind)
        return sum(_value_size(part[4]) for part in parts if part[1] != TOOL_ARGS_PART)

    def kinds(self, message: object, record: MessageRecord) -> tuple[str, ...]:
        if self.group != GROUP_REASONING:
            return _chat_kinds(message)
        assert isinstance(message, Mapping)
        return (REASONING_PART,) * reasoning_kinds(message)

    def reasoning(self, message: object, record: MessageRecord) -> tuple[ReasoningPart, ...]:
        if self.group != GROUP_REASONING:
            return ()
        assert isinstance(message, Mapping)
        # The whole item is reasoning: no block of it stands alone.
        return (ReasoningPart("reasoning", None, reasoning_signed(message)),)


_RESPONSES = _ResponsesShape()
_RESPONSES_OUTPUT = _ResponsesShape(GROUP_OUTPUT)
#: The shape instance (so the group) of each item type that groups.
_RESPONSES_GROUPS: dict[str, _ResponsesShape] = {
    **{kind: _RESPONSES_OUTPUT for kind in OUTPUT_TYPES},
    REASONING: _ResponsesShape(GROUP_REASONING),
    COMPACTION: _ResponsesShape(GROUP_BOUNDARY),
}
_REASONING_SHAPE = _RESPONSES_GROUPS[REASONING]
_new = tuple.__new__


def _read_plain(item: dict[str, Any], kind: str) -> MessageRecord | None:
    """The record :meth:`_ResponsesShape.read` gives the commonest items, whose fields are
    strings: a ``function_call``, a ``function_call_output`` and a ``reasoning`` item with
    ``encrypted_content`` and no ``content``; ``None`` for any other (read in full)."""
    get = item.get
    ident = get("id")
    if ident is not None and type(ident) is not str:
        return None
    ident = ident or None
    if kind == "function_call":
        call, name, args = get("call_id"), get("name"), get("arguments")
        if type(call) is not str or type(name) is not str or type(args) is not str:
            return None
        extras = _new(Extras, (None, (), ((name, args),), None, (), 0, (), _RESPONSES_OUTPUT))
        return _new(MessageRecord, (_AI, ident, (call,) if call else _NONE, _NONE, None, extras))
    if kind == "function_call_output":
        call, output = get("call_id"), get("output")
        if type(call) is not str or type(output) is not str:
            return None
        call = call or None
        texts = (output,) if output else ()
        extras = _new(Extras, (None, texts, (), call, (), 0, (), _RESPONSES))
        return _new(MessageRecord, (_TOOL, ident, _NONE, (call,) if call else _NONE, None, extras))
    if kind == REASONING and get("content") is None:
        encrypted = get("encrypted_content")
        if type(encrypted) is not str or not encrypted:
            return None
        extras = _new(Extras, (None, (encrypted,), (), None, (), 0, (), _REASONING_SHAPE))
        return _new(MessageRecord, (_AI, ident, _NONE, _NONE, None, extras))
    return None


register(_RESPONSES)
