"""The record every module reads a message through (:class:`MessageRecord`), the kinds of
its parts, and :class:`Shape`: the dispatch point of the reader, with the registry of
the shape families (:func:`register`). The base :class:`Shape` reads the chat layout
(content blocks); a family that differs overrides what differs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any, NamedTuple

from ._field import as_id as _as_id
from .fields import (
    _CALL_BLOCKS,
    _MEDIA_BLOCKS,
    _REASONING_BLOCKS,
    _TEXT_BLOCKS,
    AI,
    HUMAN,
    TOOL,
    _fields,
    _get,
    _json,
    _payload,
    _reasoning_field,
    _value_size,
    args_text,
    message_content,
)

__all__ = (
    "register",
    "BLANK_PART",
    "GROUP_BOUNDARY",
    "GROUP_NONE",
    "GROUP_OUTPUT",
    "GROUP_REASONING",
    "MEDIA_PART",
    "OTHER_PART",
    "REASONING_PART",
    "TEXT_PART",
    "TOOL_ARGS_PART",
    "TOOL_RESULT_PART",
    "TOOL_USE_PART",
    "CHAT",
    "COMPACTED",
    "NO_EXTRAS",
    "EditablePart",
    "Extras",
    "MessageParts",
    "MessageRecord",
    "ReasoningPart",
    "Shape",
    "make_record",
    "record_group",
)


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
    itself. A module for another family (in ``read/``) subclasses this, implements
    :meth:`read` (``None``: not its shape) and what differs of :meth:`kinds` and
    :meth:`editable`, and is added with :func:`register`; the record it returns names it
    as :attr:`MessageRecord.shape`, so kinds and editable parts dispatch back to it.
    Changed copies are written back by path (:func:`with_parts`), whatever the shape.
    """

    #: Short name, for errors and the CLI.
    name = "chat"
    #: Whether it reads dicts: the registry then offers it every mapping the chat shapes
    #: do not read.
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


class _Compacted(Shape):
    """An assistant message holding an Anthropic ``compaction`` block: read as chat, a
    boundary nothing before survives (the API drops what precedes it), never edited."""

    group = GROUP_BOUNDARY

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        return ()


#: The chat shape of an assistant message carrying a ``compaction`` block.
COMPACTED = _Compacted()


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


def _turn_links(
    role: str, calls: tuple[str, ...], answers: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(calls, answers)`` of a turn whose calls and results share one part list (a
    Gemini content, a Converse message): a model turn only issues calls, a user turn
    only answers them, any other role does neither."""
    if role == AI:
        return calls, ()
    if role == HUMAN:
        return (), answers
    return (), ()


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
    calls, answers = _turn_links(role, calls, answers)
    billed = tuple((name, _json(args)) for name, args in billed_calls)
    extras = Extras(None, tuple(texts), billed, None, answers, media, (), shape)
    return MessageRecord(role, ident, calls, answers, None, extras)


def _turn_kinds(items: list[Any], kind_of: Callable[[Any], str]) -> tuple[str, ...]:
    """The kind of each part of a Gemini content or block of a Converse message, as
    ``kind_of`` names it, :data:`BLANK_PART` for a text one with no non-whitespace
    character."""
    return tuple(
        _text_kind(item.get("text")) if (kind := kind_of(item)) == TEXT_PART else kind
        for item in items
    )


#: The shape families, in the order they registered (``read/__init__`` imports them in
#: that order): the general reader tries every one on an object before the chat shapes.
_SHAPES: list[Shape] = []
#: The registered shapes whose :attr:`Shape.dicts` is true, tried on a mapping. While there
#: is one, the fast path reads only dicts whose every key is one of ``dicts._CHAT_KEYS``;
#: other dicts reach these readers.
_DICT_SHAPES: list[Shape] = []


def register(shape: Shape) -> Shape:
    """Add ``shape`` to the reader: the one step of adding a shape family."""
    _SHAPES.append(shape)
    if shape.dicts:
        _DICT_SHAPES.append(shape)
    return shape


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
    if record.shape is CHAT or record.shape is COMPACTED:
        fields: Any = _payload(message)[0] if isinstance(message, Mapping) else message
        if isinstance(_reasoning_field(fields), str):
            out.append(ReasoningPart("reasoning_content", None, True))
    return tuple(out)


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


#: Kind of :class:`EditablePart` holding a tool call's arguments.
TOOL_ARGS_PART = "tool_args"


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
