"""What a message's record says of its parts, asked of its shape: billed text, content
kinds, reasoning, the parts context editing may replace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import gemini as _gemini
from . import pydantic_ai as _pydantic_ai
from .bedrock import _converse
from .chat import read_message, too_deep_among
from .fields import _fields, _get, _payload, message_content
from .record import (
    EditablePart,
    MessageParts,
    MessageRecord,
    ReasoningPart,
)

__all__ = (
    "content_kinds",
    "call_signatures",
    "editable_body",
    "editable_size",
    "editable_parts",
    "holding_block",
    "message_parts",
    "native_provider",
    "reasoning_model",
    "reasoning_parts",
)


def reasoning_parts(message: object, index: int = 0) -> tuple[ReasoningPart, ...]:
    """The reasoning a message carries, in order: never edited, never cut (see trim, edit).

    Every shape: Anthropic ``thinking`` / ``redacted_thinking`` blocks, LangChain v1 and
    OpenAI ``reasoning`` blocks, DeepSeek's ``reasoning_content``, a Responses
    ``reasoning`` item (one part, ``block`` ``None``: the item is the reasoning), Gemini
    ``thought`` parts, Converse ``reasoningContent`` blocks and PydanticAI thinking parts.

    Raises:
        MessageFormatError: the message cannot be read; the error names ``index``.
    """
    record = read_message(message, index)
    return record.shape.reasoning(message, record)


def reasoning_model(message: object) -> str | None:
    """The model that produced ``message`` (and so signed its reasoning), when the shape
    carries it, else ``None``.

    LangChain's ``response_metadata`` ``model_name`` or ``model`` (on the object, or in a
    dict serialisation), a PydanticAI ``ModelResponse``'s ``model_name``, an Anthropic
    ``Message`` (``type: "message"``, as the SDK returns it or dumped to a dict) and its
    ``model``. A Responses item, a Gemini content and a Converse message carry none.
    """
    fields = _fields(message)
    meta = _get(fields, "response_metadata")
    if isinstance(meta, Mapping):
        for key in ("model_name", "model"):
            name = meta.get(key)
            if isinstance(name, str) and name:
                return name
    if _pydantic_ai.is_message(message):
        name = getattr(message, "model_name", None)
        return name if isinstance(name, str) and name else None
    if _get(fields, "type") == "message":
        name = _get(fields, "model")
        return name if isinstance(name, str) and name else None
    return None


def message_parts(message: object, index: int = 0) -> MessageParts:
    """What one message bills, as text: its record's text, tool calls (arguments as JSON
    text), ids and media.

    Raises:
        MessageFormatError: the message cannot be read; the error names ``index``.
    """
    r = read_message(message, index)
    try:
        calls = r.billed_calls()
    except RecursionError:  # arguments too deep for their JSON
        error = too_deep_among([message], index)
        if error is None:
            raise
        raise error from None
    return MessageParts(r.role, r.name, r.texts, calls, r.tool_call_id, r.media, r.tool_result_ids)


def native_provider(message: object) -> str | None:
    """The provider whose own message shape ``message`` is in, when only one API takes it:
    ``"gemini"`` for a Gemini content, ``"bedrock"`` for a Converse message (blocks with
    no ``type``: ``toolUse``, ``toolResult``, ``reasoningContent``, media); ``None`` for
    shapes several APIs share (a Converse message of text blocks only among them)."""
    if isinstance(message, Mapping):
        fields = _payload(message)[0]
        if _gemini.is_content(fields):
            return "gemini"
        if _converse(fields.get("content")):
            return "bedrock"
    return None


def call_signatures(message: object) -> tuple[bool, tuple[tuple[str, int, bool], ...]]:
    """Where a message keeps reasoning signatures on its calls (Gemini ``thoughtSignature``).

    Returns ``(any part signed, (call id, part index, signed) per call)``; ``(False, ())``
    for shapes whose signatures do not sit on the call (Anthropic ``thinking`` blocks).
    """
    if isinstance(message, Mapping) and _gemini.is_content(message):
        return _gemini.signed_calls(message["parts"])
    return False, ()


def editable_body(message: object) -> Any:
    """The raw value holding every part :func:`editable_parts` finds: the ``content``
    (a Gemini content's ``parts``), or ``None``."""
    if isinstance(message, Mapping):
        fields = _payload(message)[0]
        if _gemini.is_content(fields):
            return fields["parts"]
    return message_content(message)


def editable_size(message: object, record: MessageRecord | None = None) -> int:
    """At least the UTF-8 bytes (so the characters, and any built-in count) of every
    tool result and text part :func:`editable_parts` finds in ``message``, found
    without finding them: context editing asks it to pass over a message too short to
    edit unread.

    ``record`` is the message's record (read when not given); it may be that of the
    message an edited copy was made from, whose size bounds the copy's. Arguments of
    tool calls are not included.
    """
    if record is None:
        record = read_message(message)
    text = record[4]
    if text is not None:  # the content is this one string
        return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return record[5][7].editable_size(message, record)


def holding_block(message: object, path: tuple[str | int, ...]) -> Any:
    """The content block (a Gemini part) an :class:`EditablePart` path leads into."""
    fields: Any = _fields(message)
    return _get(fields, str(path[0]))[path[1]]


def content_kinds(message: object, index: int = 0) -> tuple[str, ...]:
    """The kind of each part of a message's content, in order.

    A list of blocks gives one kind per block (``"text"``, ``"blank"`` for a text
    block with no non-whitespace character, ``"tool_use"``, ``"tool_result"``,
    ``"media"``, ``"reasoning"``, ``"other"``); a string gives ``("text",)``, or ``()``
    when it is blank or the content is missing. Tool calls kept outside the content
    (OpenAI ``tool_calls``) are not parts: read them from :func:`read_message`.
    """
    record = read_message(message, index)  # the shape checks, and errors naming the index
    return record.shape.kinds(message, record)


def editable_parts(message: object, index: int = 0) -> tuple[EditablePart, ...]:
    """The parts of a message that context editing may replace, in order.

    A tool message's whole content is one :data:`TOOL_RESULT_PART`; a ``tool_result``
    block's content is one; text content (a string, text blocks) gives
    :data:`TEXT_PART`; tool-call arguments (``tool_calls``, ``additional_kwargs``
    and ``tool_use``/``tool_call`` blocks, each copy of a call) give
    :data:`TOOL_ARGS_PART`. Write changed values back with :func:`with_parts`.

    Raises:
        MessageFormatError: the message cannot be read; the error names ``index``.
    """
    record = read_message(message, index)
    return record.shape.editable(message, record)


def reported_input_tokens(value: object) -> int | None:
    """The input tokens a provider reported for one request, or ``None``.

    ``value`` is an ai message (LangChain object or dict, any serialised form) carrying
    ``usage_metadata["input_tokens"]``; a usage record (``{"input_tokens": n}``,
    ``{"prompt_tokens": n}``, or an object with those attributes); a raw response
    carrying one as ``usage`` or ``usage_metadata``; or the count itself.
    """
    if isinstance(value, int):
        return value if value > 0 and not isinstance(value, bool) else None
    fields = _payload(value)[0] if isinstance(value, Mapping) else value
    for key in ("usage_metadata", "usage"):
        usage = _get(fields, key)
        if usage is not None:
            return _usage_input(usage)
    return _usage_input(fields)


def _usage_input(usage: object) -> int | None:
    for key in ("input_tokens", "prompt_tokens"):
        n = _get(usage, key)
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n
    return None
