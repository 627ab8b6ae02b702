"""The reader: every message shape read into one record.

Shapes understood: LangChain message objects (and their ``*Chunk`` classes,
``ChatMessage(role=...)``), duck-typed objects with ``type`` or ``role``,
OpenAI chat dicts, LangChain dicts (``{"role"|"type": ...}``, ``messages_to_dict``
output ``{"type", "data"}`` and ``dumpd`` output ``{"lc", "type": "constructor"}``)
Anthropic dicts with content blocks (``tool_use`` / ``tool_result``), Gemini contents
(``parts``, read in ``_shape_gemini``), Bedrock Converse messages (untyped blocks, read
in ``_shape_bedrock``), PydanticAI ``ModelRequest`` / ``ModelResponse`` messages (read
in ``_shape_pydantic_ai``), and OpenAI Responses API / Agents SDK items (read in
``_shape_responses``).

This is the only module that knows role aliases, where tool-call ids live and
how text is stored. Every other module reads a message through its
:class:`MessageRecord` (:func:`read_message`); other shape families plug in as a
:class:`Shape` (listed in ``_SHAPES``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from operator import attrgetter
from typing import Any, NamedTuple, TypeGuard, TypeVar

from . import _shape_bedrock as _bedrock
from . import _shape_gemini as _gemini
from . import _shape_pydantic_ai as _pydantic_ai
from . import _shape_responses as _responses
from ._field import FieldError as _FieldError
from ._field import as_id as _as_id
from ._field import kind as _kind
from .errors import MessageFormatError

__all__ = (
    "AI",
    "BLANK_PART",
    "FUNCTION",
    "GROUP_BOUNDARY",
    "GROUP_NONE",
    "GROUP_OUTPUT",
    "GROUP_REASONING",
    "HUMAN",
    "INJECTED_KEY",
    "INTERRUPTED_RESULT",
    "MAX_DEPTH",
    "MEDIA_PART",
    "OTHER_PART",
    "PACKAGE_NOTE",
    "PRUNABLE_ROLES",
    "REASONING_PART",
    "SUMMARY_ACK_KIND",
    "SUMMARY_KIND",
    "SYSTEM",
    "TEXT_PART",
    "TOOL",
    "TOOL_ARGS_PART",
    "TOOL_RESULT_PART",
    "TOOL_USE_PART",
    "TURN_NOTE_KIND",
    "CHAT",
    "NO_EXTRAS",
    "EditablePart",
    "Extras",
    "MessageParts",
    "MessageRecord",
    "MessageView",
    "ReasoningPart",
    "Shape",
    "content_kinds",
    "args_text",
    "call_signatures",
    "copy_state",
    "injected_kind",
    "injected_mark",
    "is_injected",
    "is_summary",
    "make_record",
    "editable_body",
    "editable_size",
    "item_type",
    "record_group",
    "editable_parts",
    "holding_block",
    "message_content",
    "message_id",
    "message_parts",
    "message_state",
    "native_provider",
    "normalize_role",
    "package_note",
    "part_text",
    "raw_message_id",
    "read_message",
    "read_messages",
    "read_request",
    "Request",
    "write_request",
    "write_message",
    "reply_text",
    "is_serialisation_stub",
    "request_instructions",
    "reasoning_parts",
    "summary_covers",
    "synthetic_results",
    "as_update",
    "has_anthropic_blocks",
    "is_removal",
    "looks_like_message",
    "match_shape",
    "serialisation",
    "text_block",
    "too_deep",
    "too_deep_among",
    "with_content",
    "with_parts",
    "without_reasoning",
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

# Kinds of content part reported by content_kinds().
TEXT_PART = "text"
#: A text part with no non-whitespace character.
BLANK_PART = "blank"
TOOL_USE_PART = "tool_use"
TOOL_RESULT_PART = "tool_result"
MEDIA_PART = "media"
#: A reasoning block (``thinking``, ``redacted_thinking``, ``reasoning``).
REASONING_PART = "reasoning"
OTHER_PART = "other"


#: A message that stands alone (every chat shape).
GROUP_NONE = 0
#: An output item of a model response that may span several items (Responses).
GROUP_OUTPUT = 1
#: A reasoning item: it belongs with the output items after it (Responses).
GROUP_REASONING = 2
#: A provider-side summary (Responses ``compaction``): nothing before it survives.
GROUP_BOUNDARY = 3


class Shape:
    """How one family of message shapes is read: the dispatch point of the reader.

    :func:`read_message` reads the chat shapes (OpenAI, Anthropic, LangChain, duck-typed)
    itself. A module for another family (``_shape_*.py``) subclasses this, implements
    :meth:`read` (``None``: not its shape) and what differs of :meth:`kinds` and
    :meth:`editable`, and is listed in :data:`_SHAPES`; the record it returns names it
    as :attr:`MessageRecord.shape`, so kinds and editable parts dispatch back to it.
    Changed copies are written back by path (:func:`with_parts`), whatever the shape.
    """

    #: Short name, for errors and the CLI.
    name = "chat"
    #: Whether it reads dicts (then list it in ``_DICT_SHAPES`` too).
    dicts = False
    #: How its messages group with their neighbours (:data:`GROUP_NONE`: each stands
    #: alone); a shape whose messages group reads them with one instance per group.
    group = GROUP_NONE

    def read(self, message: object, index: int) -> MessageRecord | None:
        """The record of ``message`` if it has this shape, else ``None``."""
        return None

    def kinds(self, message: object, record: MessageRecord) -> tuple[str, ...]:
        """The kind of each part of the message's content (see :func:`content_kinds`)."""
        return _chat_kinds(message)

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        """The parts context editing may replace (see :func:`editable_parts`)."""
        return _chat_editable(message, record)

    def editable_size(self, message: object, record: MessageRecord) -> int:
        """At least the UTF-8 bytes of the tool results and text :meth:`editable` finds
        (see :func:`editable_size`), without finding them: the value holding them all."""
        return _value_size(_get(_fields(message), "content"))

    def reasoning(self, message: object, record: MessageRecord) -> tuple[ReasoningPart, ...]:
        """The reasoning the message carries (see :func:`reasoning_parts`)."""
        return _chat_reasoning(message, record)


#: The chat shapes, read by this module.
CHAT = Shape()



class Extras(NamedTuple):
    """What a record holds past its roles, links and string content (shared when empty)."""

    #: The ``name`` field (a participant's, or the tool's on a tool message), billed.
    name: str | None = None
    #: Billed text of the content's blocks, in order: text blocks, reasoning, refusals,
    #: JSON blocks, the text inside ``tool_result`` blocks. Never ``str()`` of a structure.
    texts: tuple[str, ...] = ()
    #: Billed tool calls, each once: ``(name, arguments as stored)``; the arguments are
    #: JSON text (OpenAI) or a value (LangChain), made text by :func:`args_text`.
    tool_calls: tuple[tuple[str, object], ...] = ()
    #: ``tool_call_id`` of a message that is not a chat tool message, billed (a chat
    #: tool message's is its record's only answer, billed from there).
    tool_call_id: str | None = None
    #: Ids of the ``tool_result`` blocks the content carries (any role), billed.
    tool_result_ids: tuple[str, ...] = ()
    #: Images, audio, video and files, billed by item rather than by byte length.
    media: int = 0
    #: Positions in the content of reasoning blocks (``thinking``, ``redacted_thinking``,
    #: ``reasoning``).
    reasoning: tuple[int, ...] = ()
    #: The reader of its shape, for content kinds and editable parts.
    shape: Shape = CHAT


#: The extras of a message with nothing but roles, links and string content.
NO_EXTRAS = Extras()
#: The last fields of :data:`NO_EXTRAS`: no result ids, media or reasoning; chat shape.
_NO_MORE = NO_EXTRAS[4:]


class MessageRecord(NamedTuple):
    """One message as every module reads it: the only answer to "what is this message".

    ``role``, ``id``, ``calls`` and ``answers`` are what the pruning rules need; what a
    chat API bills is ``text`` plus :attr:`extras` (shared :data:`NO_EXTRAS` when there
    is nothing more, which keeps the record of a plain message small). The properties
    read the extras. A new shape's reader builds one with :func:`make_record`.
    """

    #: Normalised role: ``human``, ``ai``, ``system``, ``tool``, ``function``,
    #: or the raw role lower-cased when it is unknown (kept, never pruned).
    role: str
    #: The message id as a string, or ``None``.
    id: str | None
    #: Ids of the tool calls this message issues (ai messages).
    calls: tuple[str, ...]
    #: Ids of the tool calls this message answers (tool results).
    answers: tuple[str, ...]
    #: The content when it is one non-empty string (billed), else ``None``.
    text: str | None = None
    extras: Extras = NO_EXTRAS

    @property
    def texts(self) -> tuple[str, ...]:
        """Every billed text, in order: :attr:`text`, then the blocks' text."""
        text, texts = self[4], self[5].texts
        return (text, *texts) if text else texts

    @property
    def name(self) -> str | None:
        return self.extras.name

    @property
    def tool_calls(self) -> tuple[tuple[str, object], ...]:
        return self.extras.tool_calls

    @property
    def tool_call_id(self) -> str | None:
        """The ``tool_call_id`` field, of any role."""
        extras = self[5]
        if self[0] == TOOL and self[3] and extras.shape is CHAT:
            return self[3][0]
        return extras.tool_call_id

    @property
    def tool_result_ids(self) -> tuple[str, ...]:
        return self.extras.tool_result_ids

    @property
    def media(self) -> int:
        return self.extras.media

    @property
    def reasoning(self) -> tuple[int, ...]:
        return self.extras.reasoning

    @property
    def shape(self) -> Shape:
        return self.extras.shape

    @property
    def group(self) -> int:
        """How it groups with its neighbours: ``GROUP_*``, of its :attr:`shape`."""
        return self.extras.shape.group

    def billed_calls(self) -> tuple[tuple[str, str], ...]:
        """:attr:`tool_calls` with the arguments as JSON text."""
        return tuple((name, args_text(args)) for name, args in self.extras.tool_calls)


def make_record(
    role: str,
    id: str | None = None,
    calls: tuple[str, ...] = (),
    answers: tuple[str, ...] = (),
    *,
    text: str | None = None,
    **extras: Any,
) -> MessageRecord:
    """A record from its fields; ``extras`` are :class:`Extras` fields (shared when none)."""
    more = Extras(**extras) if extras else NO_EXTRAS
    more = NO_EXTRAS if more == NO_EXTRAS else more
    return MessageRecord(role, id, calls, answers, text or None, more)


#: The former name of :class:`MessageRecord`, for the plan and its tests.
MessageView = MessageRecord
#: :attr:`MessageRecord.group` of a record, read at C level (the plan asks it of every
#: record to learn whether any groups).
record_group = attrgetter("extras.shape.group")


class MessageParts(NamedTuple):
    """What a message bills, as text: :func:`message_parts` of its record."""

    role: str
    name: str | None
    texts: tuple[str, ...]
    #: ``(name, arguments as JSON text)`` per tool call issued.
    tool_calls: tuple[tuple[str, str], ...]
    tool_call_id: str | None
    #: Images, audio, video and files, counted by item rather than by byte length.
    media: int
    #: Ids of the ``tool_result`` content blocks (Anthropic) this message carries.
    tool_result_ids: tuple[str, ...] = ()


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


def item_type(message: object) -> str | None:
    """The ``type`` of an OpenAI Responses item read by ``_shape_responses``, else ``None``.

    Messages (``{"type": "message", "role": ...}``, easy input messages) have a role and
    are read as chat messages: ``None``.
    """
    if type(message) is not dict and not isinstance(message, Mapping):
        return None
    if message.get("role") is not None:
        return None
    kind = message.get("type")
    return kind if type(kind) is str and kind in _responses.ITEM_TYPES else None


#: ``json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)``, built once.
_to_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode


def _json(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return _to_json(value)
    except (TypeError, ValueError):
        return str(value)


def args_text(args: object) -> str:
    """A tool call's arguments as billed: JSON text as stored, else the value as JSON."""
    return args if type(args) is str and args else _json(args or {})


_new_record = tuple.__new__
_EMPTY: tuple[str, ...] = ()


class _PydanticAIShape(Shape):
    """PydanticAI ``ModelRequest`` / ``ModelResponse`` (``_shape_pydantic_ai`` reads them)."""

    name = "pydantic-ai"

    def read(self, message: object, index: int) -> MessageRecord | None:
        if not _pydantic_ai.is_message(message):
            return None
        role, calls, answers = _pydantic_ai.read(message)
        billed = _pydantic_ai.billed(message)
        extras = Extras(
            None,
            (*billed.texts, *map(_json, billed.values)),
            _unique_calls(billed.calls),
            None,
            tuple(billed.results),
            billed.media,
            (),
            self,
        )
        return MessageRecord(_ALIASES[role], None, calls, answers, None, extras)

    def kinds(self, message: object, record: MessageRecord) -> tuple[str, ...]:
        return _pydantic_ai.kinds(message)

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        return tuple(EditablePart(*part) for part in _pydantic_ai.editable(message))

    def editable_size(self, message: object, record: MessageRecord) -> int:
        parts = _pydantic_ai.editable(message)
        return sum(_value_size(part[4]) for part in parts if part[1] != TOOL_ARGS_PART)

    def reasoning(self, message: object, record: MessageRecord) -> tuple[ReasoningPart, ...]:
        # A ThinkingPart keeps its signature; PydanticAI sends it back as each model needs.
        return tuple(ReasoningPart("thinking", i, True) for i in _pydantic_ai.reasoning(message))


def _turn_record(
    shape: Shape,
    role: str,
    ident: str | None,
    calls: tuple[str, ...],
    answers: tuple[str, ...],
    texts: list[str],
    billed_calls: list[tuple[str, Any]],
    media: int,
) -> MessageRecord:
    """The record of a Gemini content or a Converse message, whose calls and results
    share one part list: a model turn only issues calls, a user turn only answers them,
    any other role does neither."""
    if role == AI:
        answers = ()
    elif role == HUMAN:
        calls = ()
    else:
        calls = answers = ()
    billed = tuple((name, _json(args)) for name, args in billed_calls)
    extras = Extras(None, tuple(texts), billed, None, answers, media, (), shape)
    return MessageRecord(role, ident, calls, answers, None, extras)


class _GeminiShape(Shape):
    """Gemini contents: ``{"role": "user" | "model", "parts": [...]}`` (``_shape_gemini``)."""

    name = "gemini"
    dicts = True

    def read(self, message: object, index: int) -> MessageRecord | None:
        if type(message) is not dict and not isinstance(message, Mapping):
            return None
        fields, raw = _payload(message)
        if not _gemini.is_content(fields):
            return None
        role = normalize_role(raw) or HUMAN  # a content without a role is the user's
        ident = _as_id(fields.get("id"))
        parts = fields["parts"]
        calls, answers = _gemini.links(parts)
        texts, billed_calls, responses, media = _gemini.billed(parts)
        texts.extend(_json(r) for r in responses if r is not None)
        return _turn_record(self, role, ident, calls, answers, texts, billed_calls, media)

    def kinds(self, message: object, record: MessageRecord) -> tuple[str, ...]:
        return tuple(_GEMINI_KINDS[k] for k in _gemini.kinds(_fields(message)["parts"]))

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        return tuple(EditablePart(*part) for part in _gemini.editable(_fields(message)["parts"]))

    def editable_size(self, message: object, record: MessageRecord) -> int:
        return _value_size(_fields(message)["parts"])

    def reasoning(self, message: object, record: MessageRecord) -> tuple[ReasoningPart, ...]:
        # Gemini checks signatures on the calls (call_signatures), never on a thought part.
        kinds = _gemini.kinds(_fields(message)["parts"])
        return tuple(ReasoningPart("thought", i, True) for i, k in enumerate(kinds)
                     if k == _gemini.THOUGHT)


_GEMINI = _GeminiShape()


def _converse(content: object) -> TypeGuard[list[Any]]:
    """Whether ``content`` is a list of Converse blocks, asked only when the first block is
    a dict without ``type`` (typed blocks never are)."""
    return (
        type(content) is list
        and bool(content)
        and type(content[0]) is dict
        and "type" not in content[0]
        and _bedrock.is_message(content)
    )


class _BedrockShape(Shape):
    """Bedrock Converse messages: content blocks with no ``type`` (``_shape_bedrock``)."""

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
        calls, answers = _bedrock.links(content)
        texts, billed_calls, values, media, _ = _bedrock.billed(content)
        texts.extend(_json(v) for v in values)
        return _turn_record(self, role, ident, calls, answers, texts, billed_calls, media)

    def kinds(self, message: object, record: MessageRecord) -> tuple[str, ...]:
        content = _fields(message).get("content")
        return tuple(_BEDROCK_KINDS[k] for k in _bedrock.kinds(content))

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        content = _fields(message).get("content")
        return tuple(EditablePart(*part) for part in _bedrock.editable(content))

    def reasoning(self, message: object, record: MessageRecord) -> tuple[ReasoningPart, ...]:
        content = _fields(message).get("content")
        return tuple(
            ReasoningPart("reasoningContent", i, _bedrock.reasoning_signed(content[i]))
            for i, k in enumerate(_bedrock.kinds(content))
            if k == _bedrock.REASONING
        )


class _ResponsesShape(Shape):
    """OpenAI Responses API / Agents SDK items: a dict with no ``role`` whose ``type`` is
    a Responses item type (``_shape_responses``). One instance per group."""

    name = "openai-responses"
    dicts = True

    def __init__(self, group: int = GROUP_NONE) -> None:
        self.group = group

    def read(self, message: object, index: int) -> MessageRecord | None:
        kind = item_type(message)
        if kind is None:
            return None
        assert isinstance(message, Mapping)
        role, ident, calls, answers = _responses.read_item(message, kind)
        texts, billed_calls, answered, media = _responses.billed(message, kind)
        extras = Extras(
            None, tuple(texts), tuple(billed_calls), answered, (), media, (),
            _RESPONSES_GROUPS.get(kind, _RESPONSES),
        )
        return MessageRecord(role, ident, calls, answers, None, extras)

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        kind = item_type(message)
        assert kind is not None and isinstance(message, Mapping)
        return tuple(EditablePart(*part) for part in _responses.editable(message, kind))

    def editable_size(self, message: object, record: MessageRecord) -> int:
        kind = item_type(message)
        assert kind is not None and isinstance(message, Mapping)
        parts = _responses.editable(message, kind)
        return sum(_value_size(part[4]) for part in parts if part[1] != TOOL_ARGS_PART)

    def kinds(self, message: object, record: MessageRecord) -> tuple[str, ...]:
        if self.group != GROUP_REASONING:
            return _chat_kinds(message)
        assert isinstance(message, Mapping)
        return (REASONING_PART,) * _responses.reasoning_kinds(message)

    def reasoning(self, message: object, record: MessageRecord) -> tuple[ReasoningPart, ...]:
        if self.group != GROUP_REASONING:
            return ()
        assert isinstance(message, Mapping)
        # The whole item is reasoning: no block of it stands alone.
        return (ReasoningPart("reasoning", None, _responses.reasoning_signed(message)),)


_RESPONSES = _ResponsesShape()
_RESPONSES_OUTPUT = _ResponsesShape(GROUP_OUTPUT)
#: The shape instance (so the group) of each item type that groups.
_RESPONSES_GROUPS: dict[str, _ResponsesShape] = {
    **{kind: _RESPONSES_OUTPUT for kind in _responses.OUTPUT_TYPES},
    _responses.REASONING: _ResponsesShape(GROUP_REASONING),
    _responses.COMPACTION: _ResponsesShape(GROUP_BOUNDARY),
}


_BEDROCK = _BedrockShape()
#: Readers of other shape families, tried in order before the chat shapes by the general
#: reader: every one for an object, those reading dicts (also in :data:`_DICT_SHAPES`)
#: for a mapping.
_SHAPES: list[Shape] = [_PydanticAIShape(), _RESPONSES, _GEMINI, _BEDROCK]
#: The shapes of :data:`_SHAPES` that read dicts. While there is one, the fast path reads
#: only dicts whose every key is one of :data:`_CHAT_KEYS`; other dicts reach these
#: readers.
_DICT_SHAPES: list[Shape] = [_RESPONSES, _GEMINI, _BEDROCK]
#: Keys of a chat dict message: read by the chat shapes, or known to mean nothing billed.
_CHAT_KEYS = frozenset(
    {
        "role",
        "content",
        "id",
        "name",
        "type",
        "tool_calls",
        "tool_call_id",
        "invalid_tool_calls",
        "function_call",
        "refusal",
        "audio",
        "annotations",
        "additional_kwargs",
        "response_metadata",
        "usage_metadata",
        "status",
        "artifact",
        "example",
        "agentstate_reducer",  # INJECTED_KEY
    }
)


# -- the reader -----------------------------------------------------------------------


def read_message(message: object, index: int = 0) -> MessageRecord:
    """Read one message into its :class:`MessageRecord`.

    Raises:
        MessageFormatError: ``message`` cannot be read: it is neither a dict nor an
            object with ``type`` or ``role``, a field has the wrong type (tool calls that
            are not mappings, an id that is a list), reading an attribute of a foreign
            object raised (chained), or it nests too deeply (:data:`MAX_DEPTH`); the
            error names ``index`` and the field, never the content.
    """
    try:
        fast = _read_dict(message) if type(message) is dict else _read_object(message)
        return fast or _read(message, index)
    except Exception as exc:  # free until raised: the fast path pays nothing
        raise _unreadable(message, index, exc) from _cause(exc)


def read_messages(messages: list[Any]) -> list[MessageRecord]:
    """Read every message, in order; errors name the offending index and field."""
    plain, other = _read_dict, _read_object
    try:
        return [
            (plain(m) if type(m) is dict else other(m)) or _read(m, i)
            for i, m in enumerate(messages)
        ]
    except Exception as exc:
        if isinstance(exc, MessageFormatError) and not isinstance(exc, _FieldError):
            raise  # it names its index already
        for i, m in enumerate(messages):  # which one: read again, one by one
            read_message(m, i)
        raise _unreadable(None, -1, exc) from _cause(exc)


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


def _read_fast(message: object) -> MessageRecord | None:
    """The one fast path: the record of a message of a common shape, or ``None``.

    The shapes: a dict with a ``role`` (or a LangChain ``type``), or a LangChain-style
    object keeping its fields in ``__dict__``, whose role is a known alias as written,
    whose content is a string or ``None`` (so no block, no media, no ``tool_result``),
    and whose tool calls, if any, are dicts in ``tool_calls``. It gives exactly what
    :func:`_read` gives; any other message, or any doubt, gives ``None``.
    """
    if type(message) is dict:
        return _read_dict(message)
    return _read_object(message)


def _read_object(message: object) -> MessageRecord | None:
    """:func:`_read_fast` of an object: its fields read from ``__dict__``."""
    plain = _PLAIN_CLASSES.get(type(message))
    if plain is None:
        plain = _plain_class(type(message))
    fields = getattr(message, "__dict__", None) if plain else None
    if type(fields) is not dict:
        return None
    if plain == _PYDANTIC and message.__pydantic_extra__:  # type: ignore[attr-defined]
        return None  # undeclared fields, which getattr() would read
    get = fields.get
    extra = get("additional_kwargs")
    # LangChain objects built from raw provider output keep calls here.
    if extra and (
        type(extra) is not dict
        or extra.get("tool_calls")
        or extra.get("invalid_tool_calls")
        or extra.get("function_call") is not None
        or "reasoning_content" in extra
    ):
        return None
    return _read_fields(get, get("type"))


def _read_fields(get: Callable[[str], Any], raw: object) -> MessageRecord | None:
    """:func:`_read_fast` of the fields ``get`` reads (an object's, or a LangChain dict's)."""
    role = _ALIASES.get(raw) if type(raw) is str else None
    if role is None or get("reasoning_content") is not None:
        return None
    content = get("content")
    ident = get("id")
    if ident is not None and type(ident) is not str:
        ident = _as_id(ident)
    found = get("tool_calls")
    name = get("name")
    call_id = get("tool_call_id")
    if not found and name is None and call_id is None and (type(content) is str):
        if get("invalid_tool_calls") or get("function_call") is not None:
            return None
        # Text, and no name, tool call or tool result.
        bare = (role, ident or None, (), (), content or None, NO_EXTRAS)
        return _new_record(MessageRecord, bare)
    if (
        (content is not None and type(content) is not str)
        or (name is not None and type(name) is not str)
        or (call_id is not None and type(call_id) is not str)
        or get("invalid_tool_calls")
        or get("function_call") is not None
    ):
        return None
    issued: tuple[str, ...] = _EMPTY
    calls: tuple[tuple[str, object], ...] = ()
    if found:
        read = _read_calls(found, role)
        if read is None:
            return None
        issued, calls = read
    call_id = call_id or None
    answers = _EMPTY
    if role == TOOL and call_id:
        answers, call_id = (call_id,), None
    name = name or None
    if name is None and call_id is None and not calls:
        extras = NO_EXTRAS
    else:
        extras = _new_record(Extras, (name, (), calls, call_id, (), 0, (), CHAT))
    fields = (role, ident or None, issued, answers, content or None, extras)
    return _new_record(MessageRecord, fields)


def _read_dict(message: dict[str, Any]) -> MessageRecord | None:
    """:func:`_read_fast` of a dict. With a ``role``, each key is read once, and the keys
    that rule the fast path out are looked up only when the dict has keys not read yet."""
    raw = message.get("role")
    if raw is None:
        if "data" in message or "kwargs" in message:
            return None  # messages_to_dict / dumpd shapes keep fields one level down
        return _read_fields(message.get, message.get("type"))
    role = _ALIASES.get(raw) if type(raw) is str else None
    if role is None:
        return None
    content = message.get("content")
    ident = message.get("id")
    if ident is not None and type(ident) is not str:
        ident = _as_id(ident)
    size = len(message)
    if type(content) is str:
        known = 2 if ident is None else 3  # the keys read so far: role, content, id
        if size == known:  # the commonest message: a role, text and maybe an id
            plain = (role, ident or None, (), (), content or None, NO_EXTRAS)
            return _new_record(MessageRecord, plain)
        if size == known + 1 and role == TOOL:  # a tool result: text and the id it answers
            call_id = message.get("tool_call_id")
            if type(call_id) is str and call_id:
                answered = (role, ident or None, (), (call_id,), content or None, NO_EXTRAS)
                return _new_record(MessageRecord, answered)
    elif content is None:
        known = (2 if "content" in message else 1) + (ident is not None)
    elif type(content) is list and size == 2 + ("id" in message):
        return _read_blocks(role, ident or None, content)  # role, content blocks, an id
    else:
        return None
    if size == known + 1 and role == AI:  # the commonest call: one OpenAI call
        found = message.get("tool_calls")
        if type(found) is list and len(found) == 1:
            call = found[0]
            function = call.get("function") if type(call) is dict else None
            if type(function) is dict:
                cid = call.get("id")
                call_name = function.get("name")
                if type(cid) is str and cid and type(call_name) is str:
                    billed = ((call_name, function.get("arguments")),)
                    extras = _new_record(Extras, (None, (), billed, None, *_NO_MORE))
                    calling = (role, ident or None, (cid,), (), content or None, extras)
                    return _new_record(MessageRecord, calling)
    # Keys not accounted for yet; a key holding None counts here until looked at.
    rest = size - known
    found = call_id = name = None
    if role == TOOL:
        call_id = message.get("tool_call_id")
        if call_id is not None:
            if type(call_id) is not str:
                return None
            rest -= 1
            if not rest and call_id:  # a tool result: text and the id it answers
                answered = (role, ident or None, (), (call_id,), content or None, NO_EXTRAS)
                return _new_record(MessageRecord, answered)
    elif role == AI:
        found = message.get("tool_calls")
        if found is not None:
            rest -= 1
            if not rest and type(found) is list and len(found) == 1:
                record = _one_call(role, ident, content, found[0])
                if record is not None:
                    return record
    if rest:
        name = message.get("name")
        if name is not None:
            if type(name) is not str:
                return None
            rest -= 1
    if rest:
        if _DICT_SHAPES and not _CHAT_KEYS.issuperset(message):
            return None  # a key the chat shapes do not know: the other shapes' readers decide
        if found is None and role != AI:
            found = message.get("tool_calls")
        if call_id is None and role != TOOL:
            call_id = message.get("tool_call_id")
            if call_id is not None and type(call_id) is not str:
                return None
        if message.get("invalid_tool_calls") or message.get("function_call") is not None:
            return None
    issued: tuple[str, ...] = _EMPTY
    calls: tuple[tuple[str, object], ...] = ()
    if found:
        read = _read_calls(found, role)
        if read is None:
            return None
        issued, calls = read
    answers = _EMPTY
    if role == TOOL and call_id:
        answers, call_id = (call_id,), None
    if name or call_id or calls:
        extras = _new_record(Extras, (name or None, (), calls, call_id or None, (), 0, (), CHAT))
    else:
        extras = NO_EXTRAS
    fields = (role, ident or None, issued, answers, content or None, extras)
    return _new_record(MessageRecord, fields)


def _read_blocks(role: str, ident: str | None, content: list[Any]) -> MessageRecord | None:
    """:func:`_read_fast` of a dict of a role, a list of Anthropic content blocks and maybe
    an id: ``text``, ``tool_use``, ``tool_result`` (string content), ``thinking`` and
    ``redacted_thinking`` blocks whose fields are strings; any other block gives ``None``.
    What it finds, in order, is what :class:`_Walk` finds."""
    texts: list[str] = []
    calls: list[tuple[str | None, str, object]] = []
    ids: list[str] = []
    results: list[str] = []
    reasoning: list[int] = []
    for i, block in enumerate(content):
        if type(block) is not dict:
            return None
        kind = block.get("type")
        if kind == "text":
            value = block.get("text")
        elif kind == "tool_use":
            cid, name = block.get("id"), block.get("name")
            if type(cid) is not str or not cid or type(name) is not str or "input" not in block:
                return None
            calls.append((cid, name, block["input"]))
            ids.append(cid)
            continue
        elif kind == "tool_result":
            rid = block.get("tool_use_id")
            if type(rid) is not str or not rid:
                return None
            results.append(rid)
            value = block.get("content")
            if value is None:
                continue
        elif kind == "thinking":
            reasoning.append(i)
            value = block.get("thinking")
        elif kind == "redacted_thinking":
            reasoning.append(i)
            value = block.get("data")
        else:
            return None
        if type(value) is not str:
            return None
        if value:
            texts.append(value)
    issued = _dedupe(ids) if role == AI and ids else _EMPTY
    answers = _dedupe(results) if role == HUMAN and results else _EMPTY
    billed = _unique_calls(calls) if calls else ()
    if texts or billed or results or reasoning:
        extras = _new_record(
            Extras, (None, tuple(texts), billed, None, tuple(results), 0, tuple(reasoning), CHAT)
        )
    else:
        extras = NO_EXTRAS
    return _new_record(MessageRecord, (role, ident, issued, answers, None, extras))


def _one_call(
    role: str, ident: str | None, content: str | None, call: object
) -> MessageRecord | None:
    """The record of an ai message issuing one OpenAI call, its commonest shape, or ``None``."""
    function = call.get("function") if type(call) is dict else None
    if type(function) is not dict:
        return None
    cid = call.get("id")  # type: ignore[attr-defined]
    call_name = function.get("name")
    if type(cid) is not str or not cid or type(call_name) is not str:
        return None
    billed = ((call_name, function.get("arguments")),)
    extras = _new_record(Extras, (None, (), billed, None, *_NO_MORE))
    return _new_record(MessageRecord, (role, ident or None, (cid,), (), content or None, extras))


def _read_calls(
    found: object, role: str
) -> tuple[tuple[str, ...], tuple[tuple[str, object], ...]] | None:
    """Ids issued (ai messages only) and billed ``(name, arguments)`` of dict tool calls."""
    if type(found) is not list:
        return None
    read = []
    for call in found:
        if type(call) is not dict:
            return None
        function = call.get("function")
        if function is None:  # LangChain: {"id", "name", "args"}
            call_name, args = call.get("name"), call.get("args")
        elif type(function) is dict:  # OpenAI: {"id", "function": {"name", "arguments"}}
            call_name, args = function.get("name"), function.get("arguments")
        else:
            return None
        cid = call.get("id")
        if type(cid) is not str or not cid:
            if cid is not None and type(cid) not in (str, int):
                return None  # the general reader names the field if it is no id
            cid = _as_id(cid)
        read.append((cid, call_name if type(call_name) is str else "", args))
    if len(read) == 1:
        cid, call_name, args = read[0]
        return ((cid,) if cid is not None and role == AI else _EMPTY), ((call_name, args),)
    issued = _dedupe(c for c, _, _ in read if c is not None) if role == AI else _EMPTY
    return issued, _unique_calls(read)


def _read(message: object, index: int) -> MessageRecord:
    """The general reader: every shape, one walk over the fields and the content."""
    fields: Any
    if type(message) is dict or isinstance(message, Mapping):
        for shape in _DICT_SHAPES:
            record = shape.read(message, index)
            if record is not None:
                return record
        fields, raw = _payload(message)
        role = normalize_role(raw)
        ident = _as_id(fields.get("id"))
    else:
        for shape in _SHAPES:
            record = shape.read(message, index)
            if record is not None:
                return record
        raw = _get(message, "type")
        if raw is None:
            raw = _get(message, "role")
            if raw is None:
                raise MessageFormatError(
                    f"message at index {index} (messages[{index}]) is a "
                    f"{type(message).__name__!s} with neither 'type' nor 'role'; expected a "
                    "dict or a message object"
                )
        role = normalize_role(raw)
        if role in _CHAT_TYPES:
            role = normalize_role(_get(message, "role"))
        elif role not in _ALIASES.values() and isinstance(_get(message, "role"), str):
            role = normalize_role(message.role)  # type: ignore[attr-defined]
        fields = message
        ident = _as_id(_get(message, "id"))
    walk = _Walk()
    _field_calls(fields, walk)
    content = _get(fields, "content")
    try:
        walk.content(content, top=True)
    except _FieldError as exc:
        raise exc.within(".content") from exc.__cause__
    walk.text(_reasoning_field(fields))
    name = _get(fields, "name")
    call_id = _as_id(_get(fields, "tool_call_id"), ".tool_call_id")
    calls: tuple[str, ...] = _EMPTY
    answers: tuple[str, ...] = _EMPTY
    if role == AI:
        calls = _dedupe(c for c, _, _, linked in walk.calls if linked and c is not None)
    elif role == TOOL:
        if call_id is not None:
            answers, call_id = (call_id,), None  # billed as the answer
    elif role == HUMAN and walk.results:
        answers = _dedupe(walk.results)
    text = None
    texts = walk.texts
    if texts and walk.string:  # the content is one string: the record's text
        text = texts.pop(0)
    extras = Extras(
        name if isinstance(name, str) and name else None,
        tuple(texts),
        _unique_calls([(c, n, a) for c, n, a, _ in walk.calls]),
        call_id,
        tuple(walk.results),
        walk.media,
        tuple(walk.reasoning),
        CHAT,
    )
    return MessageRecord(
        role, ident, calls, answers, text, NO_EXTRAS if extras == NO_EXTRAS else extras
    )


class _Walk:
    """What one walk over a message's fields and content finds, in order."""

    __slots__ = ("calls", "media", "reasoning", "results", "string", "texts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        #: ``(id or None, name, arguments as stored, linked)``: ``linked`` for calls a
        #: tool result answers (not server-side ones).
        self.calls: list[tuple[str | None, str, object, bool]] = []
        self.results: list[str] = []
        self.media = 0
        self.reasoning: list[int] = []
        #: Whether the top-level content is one string (its text comes first).
        self.string = False

    def add_call(self, ident: object, name: object, args: object, linked: bool) -> None:
        self.calls.append((_as_id(ident), name if isinstance(name, str) else "", args, linked))

    def content(self, content: object, top: bool = False) -> None:
        if content is None:
            return
        if isinstance(content, str):
            if content:
                self.texts.append(content)
                self.string = top
            return
        if type(content) is dict or isinstance(content, Mapping):
            content = [content]
        if not isinstance(content, (list, tuple)):
            self.texts.append(str(content))
            return
        try:
            for i, block in enumerate(content):
                if isinstance(block, str):
                    if block:
                        self.texts.append(block)
                elif type(block) is dict or isinstance(block, Mapping):
                    self.block(block, i if top else -1)
        except _FieldError as exc:
            raise exc.within(f"[{i}]") from exc.__cause__

    def block(self, block: Mapping[str, Any], index: int) -> None:
        kind = block.get("type")
        if kind in _TEXT_BLOCKS:
            self.text(block.get("text"))
        elif kind in _MEDIA_BLOCKS:
            self.media += 1
        elif kind in _CALL_BLOCKS:
            args = block.get("input") if "input" in block else block.get("args")
            self.add_call(block.get("id"), block.get("name"), args, kind in _CLIENT_CALL_BLOCKS)
        elif kind == "tool_result":
            ident = _as_id(block.get("tool_use_id"), ".tool_use_id")
            if ident is not None:
                self.results.append(ident)
            try:
                self.content(block.get("content"))
            except _FieldError as exc:
                raise exc.within(".content") from exc.__cause__
        elif kind in _REASONING_BLOCKS:
            if index >= 0:
                self.reasoning.append(index)
            if kind == "thinking":
                self.text(block.get("thinking"))
            elif kind == "redacted_thinking":  # encrypted: its size stands for its tokens
                self.text(block.get("data"))
            elif kind == "reasoning":
                self.text(block.get("reasoning", block.get("text")))
                summary = block.get("summary")
                if isinstance(summary, (list, tuple)):
                    for item in summary:
                        if isinstance(item, Mapping):
                            self.text(item.get("text"))
        elif kind == "refusal":
            self.text(block.get("refusal"))
        elif kind == "json":
            self.texts.append(_json(block.get("json")))
        else:
            # Unknown or untyped blocks bill only the text they carry, never their repr.
            self.text(block.get("text"))

    def text(self, value: object) -> None:
        if isinstance(value, str) and value:
            self.texts.append(value)


def _calls_field(fields: Any, key: str) -> tuple[object, str]:
    """The value of the calls field ``key`` and its path (in ``additional_kwargs`` when
    the field is empty)."""
    calls = _get(fields, key)
    if not calls and type(fields) is not dict and not isinstance(fields, Mapping):
        # LangChain objects built from raw provider output keep calls here.
        extra = _get(fields, "additional_kwargs")
        if isinstance(extra, Mapping) and extra.get(key):
            return extra.get(key), f".additional_kwargs.{key}"
    return calls, f".{key}"


def _call_like(value: object) -> bool:
    """A tool call or its ``function``: a mapping, or an object with call attributes (an
    SDK's model); a number, a string, a list or ``None`` is none."""
    if type(value) is dict or isinstance(value, Mapping):
        return True
    if value is None or isinstance(value, (str, bytes, int, float, list, tuple)):
        return False
    return any(hasattr(value, key) for key in ("id", "name", "function", "arguments", "args"))


def _field_calls(fields: Any, walk: _Walk) -> None:
    for key in ("tool_calls", "invalid_tool_calls"):
        calls, where = _calls_field(fields, key)
        if not calls:
            continue
        if not isinstance(calls, (list, tuple)):
            raise _FieldError(where, f"expected a list of tool calls, got {_kind(calls)}")
        for j, call in enumerate(calls):
            if not _call_like(call):
                raise _FieldError(f"{where}[{j}]", f"expected a tool call, got {_kind(call)}")
            try:
                function = _get(call, "function")
                if function is None:  # LangChain: {"id", "name", "args"}
                    walk.add_call(_get(call, "id"), _get(call, "name"), _get(call, "args"), True)
                    continue
                if not _call_like(function):
                    raise _FieldError(".function", f"expected a mapping, got {_kind(function)}")
                # OpenAI: {"id", "function": {"name", "arguments"}}
                try:
                    name, args = _get(function, "name"), _get(function, "arguments")
                except _FieldError as exc:
                    raise exc.within(".function") from exc.__cause__
                walk.add_call(_get(call, "id"), name, args, True)
            except _FieldError as exc:
                raise exc.within(f"{where}[{j}]") from exc.__cause__
    legacy, where = _calls_field(fields, "function_call")
    if legacy is not None:
        if not _call_like(legacy):
            raise _FieldError(where, f"expected a mapping, got {_kind(legacy)}")
        try:
            walk.add_call(None, _get(legacy, "name"), _get(legacy, "arguments") or "", False)
        except _FieldError as exc:
            raise exc.within(where) from exc.__cause__


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


class ReasoningPart(NamedTuple):
    """One piece of reasoning a message carries back to its provider."""

    #: ``"thinking"`` / ``"redacted_thinking"`` (Anthropic blocks; ``"thinking"`` is also
    #: a PydanticAI ``ThinkingPart``), ``"reasoning"`` (a
    #: LangChain v1 block, or a whole Responses ``reasoning`` item),
    #: ``"reasoning_content"`` (DeepSeek's field), ``"thought"`` (a Gemini part) or
    #: ``"reasoningContent"`` (a Converse block).
    kind: str
    #: Index of the content block (a Gemini or PydanticAI part), or ``None`` for a field
    #: or an item.
    block: int | None
    #: Whether it carries what the provider checks it by: a ``thinking`` block's
    #: ``signature``, a ``redacted_thinking`` block's ``data``, a Converse block's
    #: ``signature`` or ``redactedContent``, a Responses item's ``id`` or
    #: ``encrypted_content`` (always true otherwise).
    signed: bool


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


def without_reasoning(
    message: _M, index: int = 0, *, kinds: Collection[str] | None = None
) -> _M | None:
    """A copy of ``message`` without its reasoning (:func:`reasoning_parts`; of ``kinds``
    only, when given), each part dropped whole and every other part kept as it was;
    ``message`` itself when it has none; ``None`` when nothing is left (a Responses
    ``reasoning`` item, or a message of reasoning alone). Never mutates ``message``.

    Raises:
        MessageFormatError: the message cannot be read; the error names ``index``.
    """
    record = read_message(message, index)
    parts = record.shape.reasoning(message, record)
    if kinds is not None:
        parts = tuple(p for p in parts if p.kind in kinds)
    if not parts:
        return message
    if record.shape.group == GROUP_REASONING:
        return None
    blocks = {p.block for p in parts if p.block is not None}
    key = "parts" if record.shape is _GEMINI or _pydantic_ai.is_message(message) else "content"
    held = _get(_fields(message), key)
    kept = [b for i, b in enumerate(held) if i not in blocks] if blocks else held
    if blocks and not kept and not record.calls:
        return None
    if _pydantic_ai.is_message(message):
        return dataclasses.replace(message, parts=kept)  # type: ignore[type-var]
    copied: Any = with_content(message, kept) if key == "content" else copy.deepcopy(message)
    fields: Any = _fields(copied)
    if key == "parts":
        fields[key] = copy.deepcopy(kept)
    if any(p.block is None for p in parts):  # DeepSeek's reasoning_content field
        extra = _get(fields, "additional_kwargs")
        if isinstance(fields, dict):
            fields.pop("reasoning_content", None)
        elif "reasoning_content" in getattr(fields, "__dict__", {}):
            setattr(fields, "reasoning_content", None)  # noqa: B010
        if isinstance(extra, dict):
            extra.pop("reasoning_content", None)
    return copied  # type: ignore[no-any-return]


def _chat_reasoning(message: object, record: MessageRecord) -> tuple[ReasoningPart, ...]:
    out: list[ReasoningPart] = []
    if record.reasoning:  # the positions of the content's reasoning blocks
        content = message_content(message)
        for i in record.reasoning:
            block = content[i]
            block_type = block.get("type")
            if block_type in ("thinking", "redacted_thinking"):
                proof = block.get("signature" if block_type == "thinking" else "data")
                out.append(ReasoningPart(block_type, i, isinstance(proof, str) and bool(proof)))
            else:
                out.append(ReasoningPart("reasoning", i, True))
    if record.shape is CHAT:
        fields: Any = _payload(message)[0] if isinstance(message, Mapping) else message
        if isinstance(_reasoning_field(fields), str):
            out.append(ReasoningPart("reasoning_content", None, True))
    return tuple(out)


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


_PYDANTIC = 2
#: Per class: 0 when the fast path must not read its instances, 1 when every field it
#: reads lives in the instance ``__dict__``, :data:`_PYDANTIC` when undeclared fields
#: may also live elsewhere (pydantic models with ``extra="allow"``, as LangChain's are).
_PLAIN_CLASSES: dict[type, int] = {}


def _plain_class(cls: type) -> int:
    if issubclass(cls, Mapping) or any(hasattr(cls, field) for field in _OBJECT_FIELDS):
        kind = 0  # a mapping, or a property or class attribute that only getattr() reads
    elif hasattr(cls, "__pydantic_extra__"):
        kind = _PYDANTIC
    elif hasattr(cls, "__getattr__") or cls.__getattribute__ is not object.__getattribute__:
        kind = 0  # attributes computed on access
    else:
        kind = 1
    _PLAIN_CLASSES[cls] = kind
    return kind



def _call_ids(calls: object) -> Iterator[str]:
    if not isinstance(calls, (list, tuple)):
        return
    for call in calls:
        ident = _as_id(_get(call, "id"))
        if ident is not None:
            yield ident


def _block_ids(content: object, block_types: frozenset[str], key: str) -> Iterator[str]:
    if not isinstance(content, (list, tuple)):
        return
    for block in content:
        if isinstance(block, Mapping) and block.get("type") in block_types:
            ident = _as_id(block.get(key))
            if ident is not None:
                yield ident


def message_id(message: object) -> str | None:
    """The id of a message of any shape, or ``None``."""
    if isinstance(message, Mapping):
        return _as_id(_payload(message)[0].get("id"))
    return _as_id(getattr(message, "id", None))


def is_merge_update(message: object) -> bool:
    """True for what only LangGraph's ``add_messages`` reads as an update, not a message.

    A ``("user", "hi")`` tuple, a bare string, or a removal (:func:`is_removal`).
    """
    return isinstance(message, (str, tuple)) or is_removal(message)


def raw_message_id(message: object) -> object:
    """The id of a message as stored (``1`` and ``"1"`` differ), or ``None`` for none."""
    if isinstance(message, Mapping):
        value = _payload(message)[0].get("id")
    else:
        value = getattr(message, "id", None)
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
_ATOM_TYPES = frozenset({str, int, float, bool, type(None)})
#: Per class, the fields it computes (properties, class attributes) rather than stores in
#: ``__dict__``; asking a pydantic model for a field it lacks is slow, so ask only these.
_COMPUTED: dict[type, frozenset[str]] = {}


def message_state(message: object) -> object:
    """Everything :func:`message_parts` and :func:`read_message` read, as one value.

    A dict message is its own state (nothing is built); an object's state is a list
    of its class and the fields read from it. Compare a state with ``==`` against a
    :func:`copy_state` taken earlier to learn whether the message changed since.
    """
    if isinstance(message, dict):
        return message
    if _pydantic_ai.is_message(message):
        return _pydantic_ai.state(message)
    attrs = getattr(message, "__dict__", None)
    cls = type(message)
    if isinstance(attrs, dict):  # pydantic models and plain objects keep fields here
        computed = _COMPUTED.get(cls)
        if computed is None:
            computed = _COMPUTED[cls] = frozenset(k for k in _OBJECT_FIELDS if hasattr(cls, k))
        if not computed:
            return [cls, *map(attrs.get, _OBJECT_FIELDS)]
        get = attrs.get
        values = [getattr(message, k, None) if k in computed else get(k) for k in _OBJECT_FIELDS]
        return [cls, *values]
    if isinstance(message, Mapping):
        return dict(message)
    return [cls, *[getattr(message, key, None) for key in _OBJECT_FIELDS]]


def copy_state(state: object, _depth: int = 0) -> object:
    """Copy the dicts, lists and tuples of a :func:`message_state`, sharing everything else.

    Strings are immutable and shared, so a copy costs one step per container item,
    never a pass over text (a base64 image costs what a short string does). The copy
    equals the live state until a field, a content block or a tool call's arguments
    is replaced or edited in place, however deep.
    """
    return _copy_tree(state, _share, _depth)


def _share(value: Any, depth: int) -> Any:
    """:func:`copy_state`'s answer for what is not a plain container: a dict subclass
    (it compares as a dict) is copied, any other object shared (compared with ==, which
    for most objects is identity), and so is anything nested deeper than 64."""
    if depth <= 64 and isinstance(value, dict):
        return {k: _copy_tree(v, _share, depth + 1) for k, v in value.items()}
    return value


def _copy_tree(value: Any, other: Callable[[Any, int], Any], depth: int) -> Any:
    """Copy the dicts, lists and tuples of ``value``, sharing strings and numbers (they
    are immutable); anything else, and anything nested deeper than 64 (a cycle, say),
    is ``other(value, depth)``."""
    kind = type(value)
    if kind in _ATOM_TYPES:
        return value
    if depth > 64:
        return other(value, depth)
    if kind is dict:
        copied = value.copy()  # one C-level copy; only nested containers are walked
        if not _ATOM_TYPES.issuperset(map(type, copied.values())):
            for key, item in value.items():
                if type(item) not in _ATOM_TYPES:
                    copied[key] = _copy_tree(item, other, depth + 1)
        return copied
    if kind is list or kind is tuple:
        if _ATOM_TYPES.issuperset(map(type, value)):
            return value[:]  # a tuple is immutable: value[:] is the tuple itself
        items = [v if type(v) in _ATOM_TYPES else _copy_tree(v, other, depth + 1) for v in value]
        return items if kind is list else tuple(items)
    return other(value, depth)


def message_content(message: object) -> Any:
    """The raw ``content`` of a message of any shape, or ``None`` when it has none."""
    fields: Any = _payload(message)[0] if isinstance(message, Mapping) else message
    return _get(fields, "content")


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


def with_content(message: _M, content: object) -> _M:
    """A deep copy of ``message`` (same shape and class) whose content is ``content``.

    Nothing is shared with ``message`` or ``content``, so neither is ever mutated.
    """
    new = copy.deepcopy(content)
    if isinstance(message, Mapping):
        fields = _payload(message)[0]
        # The payload is the message itself or one nested mapping (``data`` / ``kwargs``).
        key = next((k for k, v in message.items() if v is fields), None)
        # Blank the old content before copying: it is replaced, so never worth copying.
        blank = {k: None if k == "content" else v for k, v in fields.items()}
        copied: dict[Any, Any] = blank if key is None else {**message, key: blank}
        copied = copy.deepcopy(copied)
        (copied if key is None else copied[key])["content"] = new
        return copied  # type: ignore[return-value]
    model_copy = getattr(message, "model_copy", None)
    if callable(model_copy):  # pydantic v2 models, e.g. LangChain messages
        return model_copy(update={"content": new}, deep=True)  # type: ignore[no-any-return]
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        return dataclasses.replace(copy.deepcopy(message), content=new)
    copied_obj = copy.deepcopy(message)
    setattr(copied_obj, "content", new)  # noqa: B010 - duck-typed message objects
    return copied_obj


def _text_kind(text: object) -> str:
    return TEXT_PART if isinstance(text, str) and text.strip() else BLANK_PART


def _block_kind(block: object) -> str:
    if isinstance(block, str):
        return _text_kind(block)
    if not isinstance(block, Mapping):
        return OTHER_PART
    kind = block.get("type")
    if kind in _TEXT_BLOCKS or (kind is None and "text" in block):
        return _text_kind(block.get("text"))
    if kind in _MEDIA_BLOCKS:
        return MEDIA_PART
    if kind in _CALL_BLOCKS:
        return TOOL_USE_PART
    if kind == "tool_result":
        return TOOL_RESULT_PART
    if kind in _REASONING_BLOCKS:
        return REASONING_PART
    return OTHER_PART


_GEMINI_KINDS = {
    _gemini.TEXT: TEXT_PART,
    "blank": BLANK_PART,
    _gemini.THOUGHT: REASONING_PART,
    _gemini.CALL: TOOL_USE_PART,
    _gemini.RESPONSE: TOOL_RESULT_PART,
    _gemini.MEDIA: MEDIA_PART,
    _gemini.CODE: OTHER_PART,
    _gemini.OTHER: OTHER_PART,
}


_BEDROCK_KINDS = {
    _bedrock.TEXT: TEXT_PART,
    "blank": BLANK_PART,
    _bedrock.REASONING: REASONING_PART,
    _bedrock.CALL: TOOL_USE_PART,
    _bedrock.RESULT: TOOL_RESULT_PART,
    _bedrock.MEDIA: MEDIA_PART,
    _bedrock.OTHER: OTHER_PART,
}


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


def _chat_kinds(message: object) -> tuple[str, ...]:
    content = message_content(message)
    if content is None:
        return ()
    if isinstance(content, str):
        return (TEXT_PART,) if content.strip() else ()
    if isinstance(content, Mapping):
        return (_block_kind(content),)
    if isinstance(content, (list, tuple)):
        return tuple(_block_kind(block) for block in content)
    return (_text_kind(str(content)),)


# -- messages the package injected ---------------------------------------------------

#: The key marking a message the package injected: a key of a dict message, or of a
#: LangChain message's ``additional_kwargs`` (which chat model integrations never send).
#: Its value is ``{"kind": SUMMARY_KIND, "covers": n}`` or ``{"kind": SUMMARY_ACK_KIND}``.
INJECTED_KEY = "agentstate_reducer"
#: ``kind`` of an injected summary message.
SUMMARY_KIND = "summary"
#: ``kind`` of the acknowledgement that follows an injected summary.
SUMMARY_ACK_KIND = "summary-ack"
#: ``kind`` of the note standing for the steps the turn ladder dropped from a turn.
TURN_NOTE_KIND = "turn-note"
_INJECTED_KINDS = frozenset({SUMMARY_KIND, SUMMARY_ACK_KIND, TURN_NOTE_KIND})


def _marker(message: object) -> Mapping[str, Any] | None:
    if isinstance(message, Mapping):
        fields = _payload(message)[0]
        mark = fields.get(INJECTED_KEY)
        extra = fields.get("additional_kwargs") if mark is None else None
    elif _pydantic_ai.is_message(message):
        mark, extra = _pydantic_ai.marker(message, INJECTED_KEY), None
    else:
        mark = None
        extra = getattr(message, "additional_kwargs", None)
    if isinstance(extra, Mapping):
        mark = extra.get(INJECTED_KEY)
    if isinstance(mark, Mapping) and mark.get("kind") in _INJECTED_KINDS:
        return mark
    return None


def injected_kind(message: object) -> str | None:
    """:data:`SUMMARY_KIND` or :data:`SUMMARY_ACK_KIND` for a message the package injected,
    else ``None`` (conversation). Read from metadata only, never from the wording."""
    mark = _marker(message)
    return None if mark is None else str(mark["kind"])


def injected_mark(message: object) -> Mapping[str, Any] | None:
    """The marker of a message the package injected (its ``kind`` and what it records),
    else ``None``."""
    return _marker(message)


def is_summary(message: object) -> bool:
    """True for a summary message the package injected (recognised by its metadata)."""
    return injected_kind(message) == SUMMARY_KIND


def is_injected(message: object) -> bool:
    """True for a summary or its acknowledgement, injected by the package."""
    return _marker(message) is not None


def summary_covers(message: object) -> int:
    """How many conversation messages an injected summary stands for (0 if not one)."""
    mark = _marker(message)
    covers = mark.get("covers") if mark is not None else None
    if isinstance(covers, bool) or not isinstance(covers, int) or covers < 0:
        return 0
    return covers
# -- parts that context editing may rewrite ------------------------------------------

#: Kind of :class:`EditablePart` holding a tool call's arguments.
TOOL_ARGS_PART = "tool_args"
#: Where the package's own note on a copy it made lives (a dict key, or an
#: ``additional_kwargs`` key on a message object): the key injected messages carry too.
#: An edit's note holds ``"edit"``, never the ``"kind"`` of an injected message.
PACKAGE_NOTE = INJECTED_KEY


class EditablePart(NamedTuple):
    """One part of a message that context editing may replace, and where it sits."""

    #: The path from the message's fields to the part, e.g. ``("content",)``,
    #: ``("content", 2, "content")`` (a ``tool_result`` block), ``("tool_calls", 0, "args")``.
    path: tuple[str | int, ...]
    #: :data:`TOOL_RESULT_PART`, :data:`TEXT_PART` or :data:`TOOL_ARGS_PART`.
    kind: str
    #: The call a tool result answers, or the call whose arguments these are.
    call_id: str | None
    #: The tool's name where the message says it (tool calls, a ``ToolMessage.name``).
    tool: str | None
    #: The raw value at ``path``.
    value: Any


def _block_parts(content: list[Any] | tuple[Any, ...], out: list[EditablePart]) -> None:
    for i, block in enumerate(content):
        if isinstance(block, str):
            out.append(EditablePart(("content", i), TEXT_PART, None, None, block))
        elif isinstance(block, Mapping):
            kind = block.get("type")
            if kind in _TEXT_BLOCKS and isinstance(block.get("text"), str):
                text = block["text"]
                out.append(EditablePart(("content", i, "text"), TEXT_PART, None, None, text))
            elif kind == "tool_result" and "content" in block:
                ident = _as_id(block.get("tool_use_id"))
                part = EditablePart(
                    ("content", i, "content"), TOOL_RESULT_PART, ident, None, block["content"]
                )
                out.append(part)
            elif kind in _CALL_BLOCKS:
                key = "input" if "input" in block else "args"
                name = block.get("name")
                out.append(
                    EditablePart(
                        ("content", i, key),
                        TOOL_ARGS_PART,
                        _as_id(block.get("id")),
                        name if isinstance(name, str) else None,
                        block.get(key),
                    )
                )


def _call_parts(fields: Any, prefix: tuple[str, ...], out: list[EditablePart]) -> None:
    calls = _get(fields, "tool_calls")
    if not isinstance(calls, (list, tuple)):
        return
    for j, call in enumerate(calls):
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        path: tuple[str | int, ...]
        if isinstance(function, Mapping):  # OpenAI: {"id", "function": {"name", "arguments"}}
            name, value = function.get("name"), function.get("arguments")
            path = (*prefix, "tool_calls", j, "function", "arguments")
        else:  # LangChain: {"id", "name", "args"}
            name, value = call.get("name"), call.get("args")
            path = (*prefix, "tool_calls", j, "args")
        tool = name if isinstance(name, str) else None
        out.append(EditablePart(path, TOOL_ARGS_PART, _as_id(call.get("id")), tool, value))


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


def _chat_editable(message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
    fields: Any = _fields(message)
    out: list[EditablePart] = []
    content = _get(fields, "content")
    if record.role == TOOL:
        name = _get(fields, "name")
        call = record.answers[0] if record.answers else None
        tool = name if isinstance(name, str) and name else None
        out.append(EditablePart(("content",), TOOL_RESULT_PART, call, tool, content))
    elif isinstance(content, str):
        out.append(EditablePart(("content",), TEXT_PART, None, None, content))
    elif isinstance(content, (list, tuple)):
        _block_parts(content, out)
    if record.role == AI:
        _call_parts(fields, (), out)
        extra = None if isinstance(fields, Mapping) else getattr(fields, "additional_kwargs", None)
        if isinstance(extra, Mapping):
            _call_parts(extra, ("additional_kwargs",), out)
    return tuple(out)


def _set_path(root: Any, path: tuple[str | int, ...], value: object) -> None:
    node = root
    step: Any
    for step in path[:-1]:
        node = node[step] if isinstance(node, (Mapping, list)) else getattr(node, str(step))
    last: Any = path[-1]
    if isinstance(node, (dict, list)):
        node[last] = value
    else:
        setattr(node, str(last), value)


def _deep_copy(value: Any) -> Any:
    """``copy.deepcopy(value)`` of a JSON-like value, walked without its memo: dicts,
    lists and tuples are rebuilt, strings and numbers shared (they are immutable), and
    anything else (or anything nested deeper than 64, a cycle say) goes to deepcopy."""
    return _copy_tree(value, _deepcopy, 0)


def _deepcopy(value: Any, depth: int) -> Any:
    return copy.deepcopy(value)


def _copy_object(message: Any) -> Any:
    """A deep copy of a message object. A pydantic model (a LangChain message) is copied
    as ``copy.deepcopy`` copies it, but its fields walked as :func:`_deep_copy` walks a
    dict: its ``__copy__`` gives the copy its own ``__dict__``, extra and private fields.
    Any other object goes to ``copy.deepcopy``."""
    if getattr(type(message), "__pydantic_fields__", None) is None:
        return copy.deepcopy(message)
    copied = copy.copy(message)
    fields = copied.__dict__
    for key, value in fields.items():
        if type(value) not in _ATOM_TYPES:
            fields[key] = _deep_copy(value)
    for slot in ("__pydantic_extra__", "__pydantic_private__"):
        more = getattr(copied, slot, None)
        if more:
            object.__setattr__(copied, slot, {k: _deep_copy(v) for k, v in more.items()})
    return copied


def _thaw(value: Any) -> Any:
    """Tuples in a copied message become lists, so a path through them can be written."""
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    if isinstance(value, list):
        return [_thaw(v) for v in value]
    if isinstance(value, dict):
        return {k: _thaw(v) for k, v in value.items()}
    return value


def with_parts(
    message: _M,
    values: Mapping[tuple[str | int, ...], object],
    *,
    note: Mapping[str, Any] | None = None,
) -> _M:
    """A deep copy of ``message`` (same shape and class) with each path set to its value.

    Paths are those of :func:`editable_parts` (``("id",)`` sets the id). ``note``, when
    given, is recorded on the copy under :data:`PACKAGE_NOTE` (a key of a dict
    message's fields, or of a message object's ``additional_kwargs``) and read back by
    :func:`package_note`. Neither ``message`` nor the values are ever mutated.
    """
    if _pydantic_ai.is_message(message):
        return _pydantic_ai.with_values(message, values, note, PACKAGE_NOTE)  # type: ignore[no-any-return]
    copied: Any = _deep_copy(message) if type(message) is dict else _copy_object(message)
    mapping = isinstance(copied, Mapping)
    fields: Any = _payload(copied)[0] if mapping else copied
    if mapping and _gemini.is_content(fields):
        values = {path: _gemini.stored(path, value) for path, value in values.items()}
    elif _converse(_get(fields, "content")):
        values = {path: _bedrock.stored(path, value) for path, value in values.items()}
    for path, value in values.items():
        top = path[0]
        if len(path) > 1:
            current = _get(fields, str(top))
            thawed = _thaw(current)
            if thawed is not current:
                if isinstance(fields, dict):
                    fields[top] = thawed
                else:
                    setattr(fields, str(top), thawed)
        _set_path(fields, path, _deep_copy(value))
    if note is not None:
        if isinstance(fields, dict):
            fields[PACKAGE_NOTE] = dict(note)
        else:
            extra = getattr(fields, "additional_kwargs", None)
            if isinstance(extra, dict):
                extra[PACKAGE_NOTE] = dict(note)
            else:
                setattr(fields, PACKAGE_NOTE, dict(note))
    return copied  # type: ignore[no-any-return]


def package_note(message: object) -> Mapping[str, Any] | None:
    """The note :func:`with_parts` recorded on a copy, or ``None``."""
    if _pydantic_ai.is_message(message):
        found = _pydantic_ai.marker(message, PACKAGE_NOTE)
        return found if isinstance(found, Mapping) else None
    fields: Any = _payload(message)[0] if isinstance(message, Mapping) else message
    found = _get(fields, PACKAGE_NOTE)
    if found is None and not isinstance(fields, Mapping):
        extra = getattr(fields, "additional_kwargs", None)
        if isinstance(extra, Mapping):
            found = extra.get(PACKAGE_NOTE)
    return found if isinstance(found, Mapping) else None


def part_text(value: object) -> str:
    """The text a part's value carries (text blocks joined by newlines; never a repr)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and "type" not in value and "text" not in value:
        return _json(value)  # a JSON object (a Gemini function response)
    found = _bedrock.result_text(value)
    if found is not None:
        return found
    walk = _Walk()
    walk.content(value)
    return "\n".join(walk.texts)


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


#: Content of the synthetic result :func:`synthetic_results` writes for a dead call.
INTERRUPTED_RESULT = "The tool call was interrupted; no result was recorded."
_LANGCHAIN_TOOL_ID = ["langchain", "schema", "messages", "ToolMessage"]


def synthetic_results(
    issuer: object, call_ids: tuple[str, ...], content: str = INTERRUPTED_RESULT
) -> list[Any]:
    """Tool results answering ``call_ids`` of the ai message ``issuer``, in its own shape.

    A LangChain message gets one ``ToolMessage`` per call (``status="error"``); an
    Anthropic dict (calls in ``tool_use`` blocks) one user message of ``tool_result``
    blocks (``is_error``); a dict in LangChain form (``type``, ``messages_to_dict`` or
    ``dumpd``) one tool message per call in that form; a Responses ``function_call`` /
    ``custom_tool_call`` item one output item per call (computer and shell calls get
    none: their outputs cannot be made up); any other message one OpenAI
    ``{"role": "tool", ...}`` dict per call. Ids derive from the call ids, so the same
    dead call always gets the same result; dicts get an ``id`` only when ``issuer`` has one.
    """
    ids = [f"synthetic-result-{call}" for call in call_ids]
    module = type(issuer).__module__
    if module.startswith(("langchain_core.", "langchain.")):
        from langchain_core.messages import ToolMessage

        return [
            ToolMessage(content=content, tool_call_id=call, id=ident, status="error")
            for call, ident in zip(call_ids, ids, strict=True)
        ]
    if not isinstance(issuer, Mapping):
        openai = [{"role": "tool", "tool_call_id": c, "content": content} for c in call_ids]
        if _pydantic_ai.is_message(issuer):
            return _pydantic_ai.synthetic_results(issuer, call_ids, content, lambda: openai)
        return openai
    kind = item_type(issuer)
    if kind is not None:
        return _responses.synthetic_outputs(issuer, kind, call_ids, content)
    fields, _ = _payload(issuer)
    for shape in (_gemini, _bedrock):
        found = shape.synthetic(fields, call_ids, content)
        if found is not None:
            return [found]
    with_id = fields.get("id") is not None
    if "role" in issuer:
        uses = set(_block_ids(fields.get("content"), _ANTHROPIC_CALL_BLOCKS, "id"))
        listed = set(_call_ids(fields.get("tool_calls")))
        if set(call_ids) <= uses - listed:  # Anthropic: results ride in a user message
            blocks = [
                {"type": "tool_result", "tool_use_id": c, "content": content, "is_error": True}
                for c in call_ids
            ]
            message: dict[str, Any] = {"role": "user", "content": blocks}
            if with_id:
                message["id"] = ids[0]
            return [message]
    out: list[Any] = []
    for call, ident in zip(call_ids, ids, strict=True):
        body: dict[str, Any] = {"content": content, "tool_call_id": call}
        if with_id:
            body["id"] = ident
        if "role" in issuer:
            out.append({"role": "tool", **body})
        elif issuer.get("type") == "constructor":
            kwargs = {"type": "tool", **body, "status": "error"}
            out.append({"lc": 1, "type": "constructor", "id": _LANGCHAIN_TOOL_ID, "kwargs": kwargs})
        elif fields is not issuer:  # messages_to_dict: {"type", "data"}
            out.append({"type": "tool", "data": {"type": "tool", **body, "status": "error"}})
        else:
            out.append({"type": "tool", **body})
    return out


# -- shapes of whole lists, and writing in a message's shape -------------------------


def looks_like_message(value: object) -> bool:
    """Whether a decoded JSON value is a message of a shape the reader reads (a dict with
    a ``role`` or a ``type``)."""
    return isinstance(value, dict) and ("role" in value or "type" in value)


def serialisation(messages: list[Any]) -> str:
    """``"dumpd"`` or ``"messages_to_dict"`` when every message is in that LangChain
    serialisation, else ``""``."""
    if not messages or not all(isinstance(m, dict) for m in messages):
        return ""
    if all(m.get("lc") == 1 and m.get("type") == "constructor" for m in messages):
        return "dumpd"
    if all("type" in m and isinstance(m.get("data"), dict) for m in messages):
        return "messages_to_dict"
    return ""


def has_anthropic_blocks(messages: list[Any]) -> bool:
    """Whether any dict message carries Anthropic ``tool_use`` / ``tool_result`` blocks."""
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in content
        ):
            return True
    return False


def text_block(block: object) -> str | None:
    """The text of a content part that may be cut into pieces: a string or a ``text``
    block's text; ``None`` for any other part."""
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping) and block.get("type") == "text":
        text = block.get("text")
        if isinstance(text, str):
            return text
    return None


def is_removal(message: object) -> bool:
    """A LangGraph removal: ``RemoveMessage`` or ``{"type": "remove", "id": ...}``."""
    if isinstance(message, Mapping):
        return message.get("type") == "remove"
    return getattr(message, "type", None) == "remove"


def as_update(message: _M) -> _M:
    """``message`` as ``add_messages`` reads it: a removal dict without content gets an
    empty one (what ``RemoveMessage(id)`` means); anything else is returned as it is."""
    if isinstance(message, dict) and is_removal(message) and "content" not in message:
        return {**message, "content": ""}  # type: ignore[return-value]
    return message


def _is_langchain(message: object) -> bool:
    return type(message).__module__.startswith(("langchain_core.", "langchain."))


def match_shape(block: list[Any], sample: object) -> list[Any]:
    """OpenAI-style dicts (``role`` ``user``/``assistant``) in the shape of ``sample``.

    LangChain messages become ``HumanMessage``/``AIMessage`` carrying the package's
    marker (:data:`INJECTED_KEY`) in ``additional_kwargs``; PydanticAI messages become a
    ``ModelRequest`` / ``ModelResponse`` of one text part, the marker in ``metadata``
    (never sent to a model); dicts using LangChain role
    names (``human``/``ai``, as ``role`` or ``type``) get those; anything else is left
    as it is.
    """
    if _is_langchain(sample):
        from langchain_core.messages import AIMessage, HumanMessage

        out: list[Any] = []
        for message in block:
            cls = HumanMessage if message["role"] == "user" else AIMessage
            extra = {INJECTED_KEY: message[INJECTED_KEY]} if INJECTED_KEY in message else {}
            out.append(cls(content=message["content"], id=message["id"], additional_kwargs=extra))
        return out
    if _pydantic_ai.is_message(sample):
        out = []
        for message in block:
            record, mark = read_message(message), _marker(message)
            metadata = {INJECTED_KEY: dict(mark)} if mark is not None else None
            text = "\n".join(record.texts)
            out.append(_pydantic_ai.text_message(sample, record.role == AI, text, metadata))
        return out
    if not isinstance(sample, Mapping):
        return block
    key = "role" if "role" in sample else "type"
    if sample.get(key) not in ("human", "ai"):
        return block
    names = {"user": "human", "assistant": "ai"}
    if key == "role":
        return [{**m, "role": names[m["role"]]} for m in block]
    renamed = []
    for m in block:
        out_m = {"type": names[m["role"]]}
        out_m.update((k, v) for k, v in m.items() if k != "role")
        renamed.append(out_m)
    return renamed


# -- requests: where a provider request keeps its messages and system prompt ----------


class Request(NamedTuple):
    """A provider request as the reader reads it (:func:`read_request`)."""

    #: ``"openai"`` (chat completions), ``"anthropic"``, ``"bedrock"``, ``"gemini"``,
    #: ``"openai-responses"``, or ``""`` for an object with a ``messages`` list that names
    #: no provider.
    kind: str
    #: The request as read; :func:`write_request` copies it, never changes it.
    document: Mapping[str, Any]
    #: The conversation, as stored under :attr:`list_key`.
    messages: list[Any]
    #: The key holding the conversation (``messages``, ``contents``, ``input``).
    list_key: str
    #: The top-level system prompt as a message in the conversation's shape, or ``None``.
    system: dict[str, Any] | None = None
    #: The key holding it (``system``, ``systemInstruction``, ``instructions``).
    system_key: str | None = None

    @property
    def planned(self) -> list[Any]:
        """What to plan over: the system prompt first (when there is one), then the
        conversation."""
        return [self.system, *self.messages] if self.system is not None else self.messages


def read_request(document: Mapping[str, Any]) -> Request | None:
    """The :class:`Request` of a decoded request, or ``None`` when it holds no message list
    (no ``messages``, ``contents`` or ``input`` key).

    A ``messages`` list is Bedrock Converse's (Converse keys, a ``system`` list of untyped
    blocks, or a Converse message), Anthropic's (a top-level ``system``, or
    ``tool_use`` / ``tool_result`` blocks), chat completions' (a ``model``), or no
    provider's; ``contents`` is Gemini's; ``input`` is a Responses request's.

    Raises:
        MessageFormatError: the list, or the system prompt, is not in its shape.
    """
    if "messages" in document:
        messages = document["messages"]
        if not isinstance(messages, list):
            raise MessageFormatError(
                f'"messages" must be a list of messages, got {messages!r:.60}'
            )
        if _bedrock.is_request(document) or any(
            native_provider(m) == "bedrock" for m in messages
        ):
            kind = "bedrock"
        elif "system" in document or has_anthropic_blocks(messages):
            kind = "anthropic"
        else:
            kind = "openai" if "model" in document else ""
        if kind in ("bedrock", "anthropic") and "system" in document:
            prompt = {"role": "system", "content": document["system"]}
            return Request(kind, document, messages, "messages", prompt, "system")
        return Request(kind, document, messages, "messages")
    if _gemini.REQUEST_LIST in document:
        contents = document[_gemini.REQUEST_LIST]
        if not isinstance(contents, list):
            raise MessageFormatError(
                f'"{_gemini.REQUEST_LIST}" must be a list of Gemini contents, '
                f"got {contents!r:.60}"
            )
        try:
            found = _gemini.request_system(document)
        except ValueError as exc:
            raise MessageFormatError(str(exc)) from None
        key, system = found if found is not None else (None, None)
        return Request("gemini", document, contents, _gemini.REQUEST_LIST, system, key)
    if _responses.REQUEST_LIST in document:
        items = document[_responses.REQUEST_LIST]
        if not isinstance(items, list):
            raise MessageFormatError(
                f'"{_responses.REQUEST_LIST}" must be a list of items, got {items!r:.60}'
            )
        instructions = _responses.request_system(document)
        key = _responses.SYSTEM_KEY if instructions is not None else None
        return Request(
            "openai-responses", document, items, _responses.REQUEST_LIST, instructions, key
        )
    return None


def write_request(request: Request, messages: list[Any], system: object = None) -> dict[str, Any]:
    """A copy of ``request.document`` holding ``messages`` (every other key untouched).

    ``system`` is the system prompt kept: :attr:`Request.system` itself (the document's
    value stays as it was), a changed copy of it (e.g. trim's partial copy, whose content
    is written back), or ``None`` (the prompt was dropped: its key goes).
    """
    document = dict(request.document)
    if request.system_key is not None:
        if system is None:
            del document[request.system_key]
        elif system is not request.system:
            if request.kind == "gemini":
                document[request.system_key] = _gemini.system_value(_fields(system))
            else:
                document[request.system_key] = message_content(system)
    document[request.list_key] = messages
    return document



# -- writing a message -----------------------------------------------------------------

#: How an OpenAI chat dict spells each canonical role.
_CHAT_ROLES = {HUMAN: "user", AI: "assistant", SYSTEM: "system", TOOL: "tool"}


def write_message(role: str, content: object, **fields: Any) -> dict[str, Any]:
    """A new message as an OpenAI chat dict: ``role`` (canonical, e.g. :data:`HUMAN`, or as
    spelled), then ``content``, then ``fields`` in order. Put it in a conversation's own
    shape with :func:`match_shape`."""
    return {"role": _CHAT_ROLES.get(role, role), "content": content, **fields}


def reply_text(reply: object, *, strict: bool = False) -> str | None:
    """The text of what a model or function returned: a string as it is, ``None`` as
    ``None``, a message (a chat model's reply, any shape read here) its billed text joined
    by newlines (never a repr); anything else as ``str()``, or ``None`` when ``strict``."""
    if reply is None or isinstance(reply, str):
        return reply
    if not isinstance(reply, Mapping) and getattr(reply, "content", None) is None:
        return None if strict else str(reply)
    content = message_content(reply)
    if isinstance(content, str):
        return content
    return "\n".join(read_message(reply).texts)


def is_serialisation_stub(value: object) -> bool:
    """Whether a value of LangChain ``dumpd`` output is its placeholder for an object it
    cannot serialise (``{"lc": 1, "type": "not_implemented", "id": [...]}``)."""
    return (
        isinstance(value, Mapping)
        and value.get("lc") == 1
        and value.get("type") == "not_implemented"
    )


def request_instructions(parts: Any) -> str | None:
    """The instruction text of a PydanticAI request's ``instruction_parts`` (joined by
    blank lines), or ``None`` when there is none."""
    return _pydantic_ai.instructions(parts)
