"""Bedrock Converse ``messages``, read into records: by the reader, never by anything else.

A message is ``{"role": "user" | "assistant", "content": [...]}`` whose blocks carry no
``type``: each holds one key, ``text``, ``image``, ``document``, ``video``, ``toolUse``
``{"toolUseId", "name", "input"}``, ``toolResult`` ``{"toolUseId", "content": [...],
"status"}``, ``reasoningContent`` (``{"reasoningText": {"text", "signature"}}`` or
``{"redactedContent": ...}``), ``cachePoint``, ``guardContent``, ``citationsContent``.
A tool result's own content is a list of ``text``, ``json``, ``image``, ``document`` and
``video`` blocks. Calls and results are matched by ``toolUseId``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeGuard

from ._field import FieldError, as_id
from ._field import kind as kind_of
from .fields import _fields, _json, _payload, normalize_role
from .record import (
    BLANK_PART,
    MEDIA_PART,
    OTHER_PART,
    REASONING_PART,
    TEXT_PART,
    TOOL_RESULT_PART,
    TOOL_USE_PART,
    EditablePart,
    MessageRecord,
    ReasoningPart,
    Shape,
    _turn_kinds,
    _turn_record,
    register,
)

__all__ = (
    "CALL",
    "MEDIA",
    "OTHER",
    "REASONING",
    "RESULT",
    "TEXT",
    "billed",
    "editable",
    "is_message",
    "is_request",
    "kinds",
    "links",
    "reasoning_signed",
    "result_text",
    "stored",
    "synthetic",
)

# Kinds of block, as block_kind() names them.
TEXT = "text"
CALL = "call"
RESULT = "result"
REASONING = "reasoning"
MEDIA = "media"
OTHER = "other"

_MEDIA_KEYS = frozenset({"image", "document", "video", "audio"})
#: Keys only a Converse block has: one of them marks a content list as Converse's.
_CONVERSE_KEYS = frozenset(
    {
        "toolUse",
        "toolResult",
        "reasoningContent",
        "cachePoint",
        "guardContent",
        "citationsContent",
        *_MEDIA_KEYS,
    }
)


def is_message(content: object) -> TypeGuard[list[Any]]:
    """Whether a message's ``content`` is a list of Converse blocks (no ``type``, a
    Converse key such as ``toolUse``, ``toolResult`` or ``reasoningContent``)."""
    if type(content) is not list or not content:
        return False
    seen = False
    for block in content:
        if not isinstance(block, Mapping):
            continue  # not a block: links() names it once the message reads as Converse
        if "type" in block:
            return False
        if not seen and not _CONVERSE_KEYS.isdisjoint(block):
            seen = True
    return seen


def block_kind(block: Mapping[str, Any]) -> str:
    """:data:`TEXT`, :data:`CALL`, :data:`RESULT`, :data:`REASONING`, :data:`MEDIA` or
    :data:`OTHER` (``cachePoint``, ``guardContent``, anything unknown)."""
    if "toolUse" in block:
        return CALL
    if "toolResult" in block:
        return RESULT
    if "reasoningContent" in block:
        return REASONING
    if "text" in block:
        return TEXT
    if not _MEDIA_KEYS.isdisjoint(block):
        return MEDIA
    return OTHER


def _as_id(value: object) -> str | None:
    return as_id(value)  # read once by links(), which names the field of a bad one


def _checked(block: Mapping[str, Any], key: str, i: int) -> str | None:
    """The ``toolUseId`` of the ``toolUse`` / ``toolResult`` ``block`` (``content[i]``)."""
    body = block.get(key)
    if not isinstance(body, Mapping):
        raise FieldError(f".content[{i}].{key}", f"expected an object, got {kind_of(body)}")
    ident = body.get("toolUseId")
    if type(ident) is str:
        return ident or None
    return as_id(ident, f".content[{i}].{key}.toolUseId")


def _body(block: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    body = block.get(key)
    return body if isinstance(body, Mapping) else {}


def links(content: list[Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(toolUseId`` of each ``toolUse``, ``toolUseId`` of each ``toolResult)``, each once."""
    calls: dict[str, None] = {}
    answers: dict[str, None] = {}
    for i, block in enumerate(content):
        if type(block) is not dict and not isinstance(block, Mapping):
            raise FieldError(f".content[{i}]", f"expected a content block, got {kind_of(block)}")
        if "toolUse" in block:
            ident = _checked(block, "toolUse", i)
            if ident is not None:
                calls[ident] = None
        elif "toolResult" in block:
            ident = _checked(block, "toolResult", i)
            if ident is not None:
                answers[ident] = None
    return tuple(calls), tuple(answers)


def _result_parts(content: object, texts: list[str], values: list[Any], at: int = -1) -> int:
    """Collect a tool result's text and JSON; return its media count. ``at``: the index
    of the block holding it, to name a bad field (else what is not a block is skipped)."""
    if isinstance(content, str):
        if content:
            texts.append(content)
        return 0
    media = 0
    if isinstance(content, list):
        for j, item in enumerate(content):
            if not isinstance(item, Mapping):
                if at < 0:
                    continue
                where = f".content[{at}].toolResult.content[{j}]"
                raise FieldError(where, f"expected a content block, got {kind_of(item)}")
            if isinstance(item.get("text"), str):
                if item["text"]:
                    texts.append(item["text"])
            elif "json" in item:
                values.append(item["json"])
            elif not _MEDIA_KEYS.isdisjoint(item):
                media += 1
    return media


def billed(
    content: list[Any],
) -> tuple[list[str], list[tuple[str, Any]], list[Any], int, list[int]]:
    """What a message bills: ``(texts, (name, input) per call, JSON values, media count,
    positions of reasoning blocks)``.

    Reasoning text (``reasoningText.text``) is billed like text when sent back; its
    ``signature`` and ``redactedContent`` are opaque and are not counted.
    """
    texts: list[str] = []
    calls: list[tuple[str, Any]] = []
    values: list[Any] = []
    media = 0
    reasoning: list[int] = []
    for i, block in enumerate(content):
        kind = block_kind(block)
        if kind == TEXT:
            text = block.get("text")
            if isinstance(text, str) and text:
                texts.append(text)
        elif kind == CALL:
            body = _body(block, "toolUse")
            name = body.get("name")
            calls.append((name if isinstance(name, str) else "", body.get("input") or {}))
        elif kind == RESULT:
            media += _result_parts(_body(block, "toolResult").get("content"), texts, values, i)
        elif kind == REASONING:
            reasoning.append(i)
            text = _body(_body(block, "reasoningContent"), "reasoningText").get("text")
            if isinstance(text, str) and text:
                texts.append(text)
        elif kind == MEDIA:
            media += 1
        else:
            guard = _body(_body(block, "guardContent"), "text").get("text")
            if isinstance(guard, str) and guard:
                texts.append(guard)
    return texts, calls, values, media, reasoning


def kinds(content: list[Any]) -> tuple[str, ...]:
    """The kind of each block (see :func:`block_kind`), with ``"blank"`` for empty text."""
    return _turn_kinds(content, block_kind)


def reasoning_signed(block: Mapping[str, Any]) -> bool:
    """Whether a ``reasoningContent`` block carries what Converse checks it by: its
    ``reasoningText``'s ``signature``, or ``redactedContent``."""
    body = _body(block, "reasoningContent")
    if body.get("redactedContent"):
        return True
    signature = _body(body, "reasoningText").get("signature")
    return isinstance(signature, str) and bool(signature)


def _unwrap(content: object) -> object:
    """A result content ``[{"text": text}]`` reads as ``text``, so edits see what they wrote."""
    if isinstance(content, list) and len(content) == 1:
        item = content[0]
        if isinstance(item, Mapping) and len(item) == 1 and isinstance(item.get("text"), str):
            return item["text"]
    return content


def result_text(content: object) -> str | None:
    """The text of a tool result's content (texts and JSON, by line), or ``None`` when it
    is not a Converse result content."""
    if not isinstance(content, list) or not content:
        return None
    if not all(isinstance(i, Mapping) and "type" not in i for i in content):
        return None
    texts: list[str] = []
    values: list[Any] = []
    _result_parts(content, texts, values)
    texts.extend(json.dumps(v, ensure_ascii=False, default=str) for v in values)
    return "\n".join(texts)


def editable(
    content: list[Any],
) -> list[tuple[tuple[str | int, ...], str, str | None, str | None, Any]]:
    """``(path, kind, call id, tool, value)`` of the parts context editing may replace.

    ``kind`` is ``"text"`` (a text block), ``"tool_result"`` (a ``toolResult``'s
    ``content``; ``[{"text": text}]`` reads as ``text``) or ``"tool_args"`` (a
    ``toolUse``'s ``input``). Reasoning blocks are never editable.
    """
    out: list[tuple[tuple[str | int, ...], str, str | None, str | None, Any]] = []
    for i, block in enumerate(content):
        kind = block_kind(block)
        if kind == TEXT and isinstance(block.get("text"), str):
            out.append((("content", i, "text"), "text", None, None, block["text"]))
        elif kind == CALL:
            body = _body(block, "toolUse")
            name = body.get("name")
            tool = name if isinstance(name, str) and name else None
            ident = _as_id(body.get("toolUseId"))
            out.append(
                (("content", i, "toolUse", "input"), "tool_args", ident, tool, body.get("input"))
            )
        elif kind == RESULT:
            body = _body(block, "toolResult")
            if "content" in body:
                ident = _as_id(body.get("toolUseId"))
                value = _unwrap(body["content"])
                out.append(
                    (("content", i, "toolResult", "content"), "tool_result", ident, None, value)
                )
    return out


def stored(path: tuple[str | int, ...], value: object) -> object:
    """What to store at ``path`` (from :func:`editable`) for ``value``: a string written as
    a tool result's content becomes ``[{"text": value}]`` (Converse wants a list of
    blocks), anything else stays as it is."""
    if isinstance(value, str) and len(path) == 4 and path[2] == "toolResult":
        return [{"text": value}]
    return value


def synthetic(
    issuer: Mapping[str, Any], call_ids: tuple[str, ...], content: str
) -> dict[str, Any] | None:
    """One user message answering ``call_ids`` of the assistant message ``issuer`` with
    ``toolResult`` blocks (``status: "error"``), or ``None`` when ``issuer`` is not a
    Converse message issuing them."""
    blocks = issuer.get("content")
    if not is_message(blocks):
        return None
    issued, _ = links(blocks)
    if not set(call_ids) <= set(issued):
        return None
    results = [
        {"toolResult": {"toolUseId": c, "content": [{"text": content}], "status": "error"}}
        for c in call_ids
    ]
    return {"role": "user", "content": results}


# -- the request: {"modelId": ..., "system": [{"text": ...}], "messages": [...]} ------

#: Top-level keys of a Converse request that no other request has.
_REQUEST_KEYS = frozenset(
    {
        "modelId",
        "inferenceConfig",
        "toolConfig",
        "guardrailConfig",
        "additionalModelRequestFields",
        "promptVariables",
    }
)


def is_request(document: Mapping[str, Any]) -> bool:
    """Whether a request with ``messages`` is a Converse request by its own keys: one only
    Converse has, or a ``system`` list of blocks without ``type`` (Anthropic's is a string
    or typed blocks). A request whose messages are Converse messages is one too; the
    reader asks that of each message."""
    if not _REQUEST_KEYS.isdisjoint(document):
        return True
    system = document.get("system")
    return (
        isinstance(system, list)
        and bool(system)
        and all(isinstance(b, Mapping) and "type" not in b for b in system)
    )


def _converse(content: object) -> TypeGuard[list[Any]]:
    """Whether ``content`` is a list of Converse blocks, asked only when the first block is
    a dict without ``type`` (typed blocks never are)."""
    return (
        type(content) is list
        and bool(content)
        and type(content[0]) is dict
        and "type" not in content[0]
        and is_message(content)
    )


class _BedrockShape(Shape):
    """Bedrock Converse messages: content blocks with no ``type``."""

    name = "bedrock"
    dicts = True

    def read(self, message: object, index: int) -> MessageRecord | None:
        if type(message) is not dict and not isinstance(message, Mapping):
            return None
        fields, raw = _payload(message)
        content = fields.get("content")
        if not _converse(content):
            return None
        role = normalize_role(raw)
        ident = _as_id(fields.get("id"))
        calls, answers = links(content)
        texts, billed_calls, values, media, _ = billed(content)
        texts.extend(_json(v) for v in values)
        return _turn_record(self, role, ident, calls, answers, texts, billed_calls, media)

    def kinds(self, message: object, record: MessageRecord) -> tuple[str, ...]:
        content = _fields(message).get("content")
        return tuple(_BEDROCK_KINDS[k] for k in kinds(content))

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        content = _fields(message).get("content")
        return tuple(EditablePart(*part) for part in editable(content))

    def reasoning(self, message: object, record: MessageRecord) -> tuple[ReasoningPart, ...]:
        content = _fields(message).get("content")
        return tuple(
            ReasoningPart("reasoningContent", i, reasoning_signed(content[i]))
            for i, k in enumerate(kinds(content))
            if k == REASONING
        )


_BEDROCK = _BedrockShape()

_BEDROCK_KINDS = {
    TEXT: TEXT_PART,
    "blank": BLANK_PART,
    REASONING: REASONING_PART,
    CALL: TOOL_USE_PART,
    RESULT: TOOL_RESULT_PART,
    MEDIA: MEDIA_PART,
    OTHER: OTHER_PART,
}


register(_BEDROCK)
