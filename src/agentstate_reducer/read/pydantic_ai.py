"""PydanticAI's message shape: ``ModelRequest`` / ``ModelResponse`` holding typed parts.

Read by duck typing (a message's ``kind`` is ``"request"`` or ``"response"`` and it
holds ``parts``; each part says what it is in ``part_kind``), so nothing here imports
``pydantic_ai``. :mod:`agentstate_reducer.messages` dispatches here; what this module
returns is raw (role aliases, kind names, argument values) and the reader there
normalises it.

How the shape maps onto the reader's view:

* a ``ModelResponse`` is an assistant message; its ``tool-call`` parts issue calls
  (native ``builtin-tool-call`` parts are answered inside the same response, so they
  issue none). Text, thinking and calls of one response are one message: they are
  never cut apart.
* a ``ModelRequest`` answering calls (``tool-return`` parts, a ``retry-prompt`` naming
  a tool) is a tool message, or a user message carrying results when it also holds a
  user prompt or feedback; one with a user prompt only is a plain user message (it
  opens a turn); one holding only system prompts is a system message.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ..errors import ConfigError
from ._field import FieldError, as_id, per_class
from ._field import kind as kind_of
from .fields import _ALIASES, _json, _unique_calls, _value_size
from .record import (
    GROUP_BOUNDARY,
    TOOL_ARGS_PART,
    EditablePart,
    Extras,
    MessageRecord,
    ReasoningPart,
    Shape,
    register,
)

__all__ = (
    "Billed",
    "billed",
    "editable",
    "instructions",
    "is_message",
    "kinds",
    "marker",
    "read",
    "reasoning",
    "state",
    "synthetic_results",
    "text_message",
    "with_values",
)

#: Parts of a request that speak in the user's voice (rendered as user content).
_USER_PARTS = frozenset({"user-prompt", "retry-feedback", "compaction", "speech"})
#: ``kind`` of the items of a user prompt that are media, counted by item.
_MEDIA_ITEMS = frozenset(
    {"image-url", "audio-url", "document-url", "video-url", "binary", "uploaded-file"}
)
_TEXT_ITEMS = frozenset({"text-content", "structured-content"})


def _is_message_class(cls: type) -> bool:
    fields = getattr(cls, "__dataclass_fields__", None)
    return (
        isinstance(fields, Mapping)
        and "parts" in fields
        and getattr(cls, "kind", None) in ("request", "response")
    )


#: True for a PydanticAI ``ModelRequest`` or ``ModelResponse`` (by shape, cached per class).
is_message = per_class(_is_message_class)


def _parts(message: object) -> Sequence[Any]:
    parts = getattr(message, "parts", None)
    return parts if isinstance(parts, (list, tuple)) else ()


def _answers(part: object) -> bool:
    """Whether a request part is a tool result answering a ``tool-call`` part."""
    kind = getattr(part, "part_kind", None)
    if kind == "tool-return":
        return True
    # A retry prompt naming no tool is feedback on the whole response, not a result.
    return kind == "retry-prompt" and getattr(part, "tool_name", None) is not None


def _as_id(value: object) -> str | None:
    return as_id(value)  # read once by read(), which names the field of a bad one


def _call_id(part: object, i: int) -> str | None:
    """The ``tool_call_id`` of ``parts[i]``; the error names it when it is no id."""
    value = getattr(part, "tool_call_id", None)
    if type(value) is str:
        return value or None
    return None if value is None else as_id(value, f".parts[{i}].tool_call_id")


def _no_part(part: object, i: int) -> FieldError:
    return FieldError(f".parts[{i}]", f"expected a part, got {kind_of(part)}")


def _dedupe(ids: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))


def read(message: object) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """``(role alias, calls issued, calls answered)`` of a PydanticAI message."""
    parts = getattr(message, "parts", None)
    if not isinstance(parts, (list, tuple)):
        raise FieldError(".parts", f"expected a list of parts, got {kind_of(parts)}")
    if getattr(message, "kind", None) == "response":
        calls: list[str] = []
        for i, part in enumerate(parts):
            kind = getattr(part, "part_kind", None)
            if kind == "tool-call":
                ident = _call_id(part, i)
                if ident is not None:
                    calls.append(ident)
            elif kind == "builtin-tool-call":
                _call_id(part, i)  # billed, never linked
            elif type(kind) is not str:
                raise _no_part(part, i)
        return "assistant", _dedupe(calls), ()
    answers: list[str] = []
    user = system = False
    for i, part in enumerate(parts):
        kind = getattr(part, "part_kind", None)
        if type(kind) is not str:
            raise _no_part(part, i)
        if _answers(part):
            ident = _call_id(part, i)
            if ident is not None:
                answers.append(ident)
        elif kind in _USER_PARTS or kind == "retry-prompt":
            user = True
        elif kind == "system-prompt":
            system = True
    if answers:
        return ("user" if user else "tool"), (), _dedupe(answers)
    if system and not user:
        return "system", (), ()
    return "user", (), ()


class Billed(NamedTuple):
    """What a PydanticAI message bills for, raw: the reader turns values into text."""

    texts: list[str]
    #: Structured values (tool return contents, validation errors) billed as JSON text.
    values: list[object]
    #: ``(id, tool name, arguments as given)`` per tool call, native calls included.
    calls: list[tuple[str | None, str, object]]
    #: Ids of the calls this message's tool results answer.
    results: list[str]
    media: int


def _user_content(content: object, out: Billed) -> int:
    """Add a user prompt's content to ``out``; return the media items found."""
    if isinstance(content, str):
        if content:
            out.texts.append(content)
        return 0
    media = 0
    if isinstance(content, (list, tuple)):
        for item in content:
            if isinstance(item, str):
                if item:
                    out.texts.append(item)
                continue
            kind = getattr(item, "kind", None)
            if kind in _TEXT_ITEMS:
                text = getattr(item, "content", None)
                if isinstance(text, str) and text:
                    out.texts.append(text)
            elif kind in _MEDIA_ITEMS:
                media += 1
    return media


def billed(message: object) -> Billed:
    """Text, tool calls, answered ids and media of a PydanticAI message."""
    out = Billed([], [], [], [], 0)
    media = 0
    for part in _parts(message):
        kind = getattr(part, "part_kind", None)
        content = getattr(part, "content", None)
        if kind == "user-prompt":
            media += _user_content(content, out)
        elif kind in ("tool-call", "builtin-tool-call"):
            name = getattr(part, "tool_name", None)
            out.calls.append(
                (
                    _as_id(getattr(part, "tool_call_id", None)),
                    name if isinstance(name, str) else "",
                    getattr(part, "args", None),
                )
            )
        elif kind in ("tool-return", "builtin-tool-return", "retry-prompt", "retry-feedback"):
            if _answers(part):
                ident = _as_id(getattr(part, "tool_call_id", None))
                if ident is not None:
                    out.results.append(ident)
            if isinstance(content, str):
                if content:
                    out.texts.append(content)
            elif content is not None:
                out.values.append(content)
        elif kind == "speech":
            transcript = getattr(part, "transcript", None)
            if isinstance(transcript, str) and transcript:
                out.texts.append(transcript)
        elif kind == "file":
            media += 1
        elif isinstance(content, str) and content:  # system prompt, text, thinking, compaction
            out.texts.append(content)
    return out._replace(media=media)


def kinds(message: object) -> tuple[str, ...]:
    """One kind per part sent to a model, as :func:`~agentstate_reducer.messages.content_kinds`
    names them (``"text"``, ``"blank"``, ``"tool_use"``, ``"tool_result"``, ``"media"``,
    ``"reasoning"``, ``"other"``); records never sent (deltas, baselines) give none."""
    out: list[str] = []
    for part in _parts(message):
        kind = getattr(part, "part_kind", None)
        content = getattr(part, "content", None)
        if _answers(part):
            out.append("tool_result")
        elif kind == "tool-call":
            out.append("tool_use")
        elif kind == "file":
            out.append("media")
        elif kind == "user-prompt" and not isinstance(content, str):
            scratch = Billed([], [], [], [], 0)
            media = _user_content(content, scratch)
            texts = [t for t in scratch.texts if t.strip()]
            out.extend(["text"] * len(texts) + ["media"] * media)
            if not texts and not media:
                out.append("blank")
        elif kind == "thinking":
            out.append("reasoning")
        elif kind in ("system-prompt", "user-prompt", "text", "retry-prompt"):
            out.append("text" if isinstance(content, str) and content.strip() else "blank")
        elif kind in ("retry-feedback", "compaction", "speech"):
            out.append("text")
        elif kind in ("builtin-tool-call", "builtin-tool-return"):
            out.append("other")
    return tuple(out)


def reasoning(message: object) -> tuple[int, ...]:
    """Positions of the ``thinking`` parts among a message's parts."""
    return tuple(
        i for i, p in enumerate(_parts(message)) if getattr(p, "part_kind", None) == "thinking"
    )


def state(message: object) -> list[Any]:
    """Everything the reader reads from a PydanticAI message, as one comparable value.

    The class, then each part as ``[class, *fields]``, then the message's other fields;
    parts are shared objects, so the lists keep a later copy independent of edits.
    """
    fields = getattr(message, "__dict__", None)
    if not isinstance(fields, dict):
        return [type(message), [[type(p), p] for p in _parts(message)]]
    parts = [
        [type(p), *vars(p).values()] if isinstance(getattr(p, "__dict__", None), dict) else p
        for p in _parts(message)
    ]
    return [type(message), parts, *(v for k, v in fields.items() if k != "parts")]


#: ``(path, kind, call id, tool name, value)``: one part context editing may replace.
Editable = tuple[tuple[str | int, ...], str, str | None, str | None, Any]


#: The tool parts context editing may replace: their field, and the kind of edit.
_EDITABLE_TOOL_PARTS = {
    "tool-return": ("content", "tool_result"),
    "tool-call": ("args", "tool_args"),
}


def editable(message: object) -> list[Editable]:
    """The parts of a message context editing may replace, by path from the message.

    A ``tool-return`` part's ``content`` (kind ``"tool_result"``), a ``tool-call``
    part's ``args`` (``"tool_args"``), and text: a ``text`` part's content, a user
    prompt's string content or the strings of its content list (``"text"``). System
    prompts, thinking, retries and the provider's own tools give nothing.
    """
    out: list[Editable] = []
    for j, part in enumerate(_parts(message)):
        kind = getattr(part, "part_kind", None)
        tool = _EDITABLE_TOOL_PARTS.get(kind) if type(kind) is str else None
        if tool is not None:
            field, edit = tool
            name = getattr(part, "tool_name", None)
            out.append(
                (
                    ("parts", j, field),
                    edit,
                    _as_id(getattr(part, "tool_call_id", None)),
                    name if isinstance(name, str) and name else None,
                    getattr(part, field, None),
                )
            )
        elif kind in ("text", "user-prompt"):
            content = getattr(part, "content", None)
            if isinstance(content, str):
                out.append((("parts", j, "content"), "text", None, None, content))
            elif kind == "user-prompt" and isinstance(content, (list, tuple)):
                for k, item in enumerate(content):
                    if isinstance(item, str):
                        out.append((("parts", j, "content", k), "text", None, None, item))
    return out


def with_values(
    message: Any,
    values: Mapping[tuple[str | int, ...], object],
    note: Mapping[str, Any] | None,
    note_key: str,
) -> Any:
    """A new message of the same class (``dataclasses.replace``) with each path of
    :func:`editable` set to its value; every other field, and every other part, as it was.

    ``("parts",)`` replaces the whole list; ``("id",)`` sets an ``id`` attribute (the
    key an ``on_prune`` hook stores an edited original under). ``note`` goes in the
    message's ``metadata`` under ``note_key`` (never sent to a model). Values are
    copied; ``message`` and its parts are never mutated.
    """
    parts = list(_parts(message))
    ident: object = None
    for path, value in values.items():
        value = copy.deepcopy(value)
        if path == ("id",):
            ident = value
        elif path == ("parts",):
            parts = list(value)  # type: ignore[call-overload]
        elif len(path) in (3, 4) and path[0] == "parts" and isinstance(path[1], int):
            part = parts[path[1]]
            name = str(path[2])
            if len(path) == 4:
                items = list(getattr(part, name))
                items[path[3]] = value  # type: ignore[index]
                value = items
            parts[path[1]] = dataclasses.replace(part, **{name: value})
        else:
            raise ConfigError(f"no editable part of a PydanticAI message at {path!r}")
    changes: dict[str, Any] = {"parts": parts}
    if note is not None:
        metadata = getattr(message, "metadata", None)
        changes["metadata"] = {**(metadata or {}), note_key: dict(note)}
    copied = dataclasses.replace(message, **changes)
    if ident is not None:
        copied.id = ident
    return copied


def marker(message: object, key: str) -> object:
    """The value under ``key`` in a message's ``metadata`` (never sent to a model), or ``None``."""
    metadata = getattr(message, "metadata", None)
    return metadata.get(key) if isinstance(metadata, Mapping) else None


def synthetic_results(
    issuer: object,
    call_ids: tuple[str, ...],
    content: str,
    make_fallback: Callable[[], list[Any]],
) -> list[Any]:
    """One ``ModelRequest`` of ``tool-return`` parts (``outcome="interrupted"``) answering
    ``call_ids`` of the response ``issuer``, built from the classes of the issuer's own
    module; ``make_fallback()`` when that module does not define them."""
    module = sys.modules.get(type(issuer).__module__)
    request_cls = getattr(module, "ModelRequest", None)
    return_cls = getattr(module, "ToolReturnPart", None)
    if not callable(request_cls) or not callable(return_cls):
        return make_fallback()
    names = {
        _as_id(getattr(p, "tool_call_id", None)): getattr(p, "tool_name", "")
        for p in _parts(issuer)
        if getattr(p, "part_kind", None) == "tool-call"
    }
    parts = [
        return_cls(
            tool_name=names.get(call) or "",
            content=content,
            tool_call_id=call,
            outcome="interrupted",
        )
        for call in call_ids
    ]
    return [request_cls(parts=parts)]


def text_message(
    sample: object, response: bool, text: str, metadata: Mapping[str, Any] | None
) -> Any:
    """A ``ModelResponse`` (``response``) or ``ModelRequest`` of one text part holding
    ``text``, built from the classes of ``sample``'s own module, with ``metadata``."""
    module = sys.modules.get(type(sample).__module__)
    if response:
        cls, part = getattr(module, "ModelResponse"), getattr(module, "TextPart")  # noqa: B009
    else:
        cls, part = getattr(module, "ModelRequest"), getattr(module, "UserPromptPart")  # noqa: B009
    return cls(parts=[part(text)], metadata=None if metadata is None else dict(metadata))


def instructions(parts: Any) -> str | None:
    """The text of a request's instruction parts (each part's ``content``), joined by
    blank lines; ``None`` when there is none."""
    if not parts:
        return None
    texts = [getattr(p, "content", None) for p in parts]
    text = "\n\n".join(t for t in texts if isinstance(t, str) and t)
    return text or None


class _PydanticAIShape(Shape):
    """PydanticAI ``ModelRequest`` / ``ModelResponse``."""

    name = "pydantic-ai"

    def read(self, message: object, index: int) -> MessageRecord | None:
        if not is_message(message):
            return None
        role, calls, answers = read(message)
        bill = billed(message)
        extras = Extras(
            None,
            (*bill.texts, *map(_json, bill.values)),
            _unique_calls(bill.calls),
            None,
            tuple(bill.results),
            bill.media,
            (),
            _COMPACTED if role == "assistant" and _compacted(message) else self,
        )
        return MessageRecord(_ALIASES[role], None, calls, answers, None, extras)

    def kinds(self, message: object, record: MessageRecord) -> tuple[str, ...]:
        return kinds(message)

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        return tuple(EditablePart(*part) for part in editable(message))

    def editable_size(self, message: object, record: MessageRecord) -> int:
        parts = editable(message)
        return sum(_value_size(part[4]) for part in parts if part[1] != TOOL_ARGS_PART)

    def reasoning(self, message: object, record: MessageRecord) -> tuple[ReasoningPart, ...]:
        # A ThinkingPart keeps its signature; PydanticAI sends it back as each model needs.
        return tuple(ReasoningPart("thinking", i, True) for i in reasoning(message))


class _PydanticAICompacted(_PydanticAIShape):
    """A ``ModelResponse`` holding a provider's ``CompactionPart`` (Anthropic's summary,
    OpenAI's encrypted item): a boundary nothing before survives, never edited."""

    group = GROUP_BOUNDARY

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        return ()

    def editable_size(self, message: object, record: MessageRecord) -> int:
        return 0


_COMPACTED = _PydanticAICompacted()


def _compacted(message: object) -> bool:
    """Whether a response holds a compaction part a provider wrote (it names itself)."""
    return any(
        getattr(part, "part_kind", None) == "compaction"
        and getattr(part, "provider_name", None) is not None
        for part in _parts(message)
    )


register(_PydanticAIShape())
