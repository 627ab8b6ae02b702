"""The reader: :func:`read_message` and :func:`read_messages`, the one fast path for the
common chat shapes (OpenAI, Anthropic, LangChain dicts and objects) and the general
reader that every other shape is dispatched from (its walk over a message's fields is
:mod:`.walk`, the errors naming the index and the field :mod:`.errors`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..errors import MessageFormatError
from ._field import FieldError as _FieldError
from ._field import as_id as _as_id
from .dicts import _read_dict, _read_fields, _read_message_item
from .errors import _cause, _unreadable, too_deep, too_deep_among
from .fields import (
    _ALIASES,
    _CHAT_TYPES,
    _EMPTY,
    _OBJECT_FIELDS,
    AI,
    HUMAN,
    TOOL,
    _dedupe,
    _get,
    _new_record,
    _payload,
    _reasoning_field,
    _unique_calls,
    normalize_role,
)
from .record import (
    _DICT_SHAPES,
    _SHAPES,
    CHAT,
    COMPACTED,
    NO_EXTRAS,
    Extras,
    MessageRecord,
)
from .walk import _field_calls, _Walk

__all__ = (
    "Records",
    "PLAIN_VIEWS",
    "Billed",
    "fast_biller",
    "fast_reader",
    "read_message",
    "read_messages",
    "read_records",
    "too_deep",
    "too_deep_among",
)


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


class Records(NamedTuple):
    """The records of a history (:func:`read_records`) and what the read saw of its
    structure on the way, so that no later pass over every record need find it."""

    records: list[MessageRecord]
    #: The indices of the messages issuing or answering tool calls, ascending.
    linking: list[int]
    #: Whether any record's :attr:`~MessageRecord.group` is not ``GROUP_NONE``.
    grouped: bool


def read_messages(messages: list[Any]) -> list[MessageRecord]:
    """Read every message, in order; errors name the offending index and field."""
    return read_records(messages).records


def read_records(messages: list[Any]) -> Records:
    """:func:`read_messages`, with the indices of the messages that issue or answer tool
    calls and whether any message groups with its neighbours."""
    try:
        return _read_all(messages)
    except Exception as exc:
        if isinstance(exc, MessageFormatError) and not isinstance(exc, _FieldError):
            raise  # it names its index already
        for i, m in enumerate(messages):  # which one: read again, one by one
            read_message(m, i)
        raise _unreadable(None, -1, exc) from _cause(exc)


def _read_all(messages: list[Any]) -> Records:
    """The record of each message: ``_read_dict(m)`` of a dict, the fast path of its
    class (:func:`fast_reader`) of anything else, else the general reader's. The
    commonest dicts (a role, text and maybe an id; a tool result answering one call; an
    ai message issuing one OpenAI call) are read inline, each as :func:`_read_dict`
    reads it, and the fast path is looked up once per class."""
    out: list[MessageRecord] = []
    append = out.append
    linking: list[int] = []
    link = linking.append
    grouped = False
    first, parts = _dispatch()
    lc_text, lc_ai, lc_tool = _read_langchain_text, _read_langchain_ai, _read_langchain_tool
    alias_of = _ALIASES
    new, alias, record, empty = _new_record, _ALIASES.get, MessageRecord, _EMPTY
    readers: dict[type, Callable[[Any], MessageRecord | None]] = {}
    for i, m in enumerate(messages):
        cls = type(m)
        if cls is dict:
            raw, content, ident = m.get("role"), m.get("content"), m.get("id")
            if type(raw) is str and (ident is None or type(ident) is str):
                role = alias(raw)
                # The keys but the id: the role, the content and what else is there.
                size = len(m) - (ident is not None)
                if type(content) is str and role is not None:
                    if size == 2:  # a role, text and maybe an id
                        append(new(record, (role, ident or None, empty, empty, content or None,
                                            NO_EXTRAS)))
                        continue
                    if size == 3 and role == TOOL:  # a tool result: the id it answers
                        call_id = m.get("tool_call_id")
                        if type(call_id) is str and call_id:
                            answered = (role, ident or None, empty, (call_id,), content or None,
                                        NO_EXTRAS)
                            append(new(record, answered))
                            link(i)
                            continue
                if size == 3 and role == AI and (type(content) is str or (
                    content is None and "content" in m
                )):  # one OpenAI call, as _read_dict reads it
                    found = m.get("tool_calls")
                    if type(found) is list and len(found) == 1:
                        call = found[0]
                        function = call.get("function") if type(call) is dict else None
                        if type(function) is dict:
                            cid, call_name = call.get("id"), function.get("name")
                            if type(cid) is str and cid and type(call_name) is str:
                                billed = ((call_name, function.get("arguments")),)
                                extras = new(Extras, (None, (), billed, None, (), 0, (), CHAT))
                                calling = (role, ident or None, (cid,), empty, content or None,
                                           extras)
                                append(new(record, calling))
                                link(i)
                                continue
                if content is None and "parts" in m:  # _read_dict leaves it to the shapes
                    read = parts(m, i) or _read(m, i)
                else:
                    read = _read_dict(m) or _read(m, i)
            elif raw is None and not (type(kind := m.get("type")) is str and kind in _ALIASES):
                read = first(m, i) or _read(m, i)  # _read_dict declines it: no role nor type
            else:
                read = _read_dict(m) or _read(m, i)
            append(read)
            if read[2] or read[3]:  # it issues or answers calls
                link(i)
            extras = read[5]
            if extras is not NO_EXTRAS and extras[7].group:
                grouped = True
        else:
            reader = readers.get(cls)
            if reader is None:
                reader = readers[cls] = fast_reader(cls)
            if reader is lc_text or reader is lc_ai or reader is lc_tool:
                # The LangChain shortcuts, inline: what each reader's first branch reads.
                fields = getattr(m, "__dict__", None)
                if type(fields) is dict and not m.__pydantic_extra__:
                    try:
                        content, raw, ident = fields["content"], fields["type"], fields["id"]
                        if (
                            type(content) is str
                            and type(raw) is str
                            and (ident is None or type(ident) is str)
                            and fields["name"] is None
                            and not fields["additional_kwargs"]
                        ):
                            if reader is lc_text:
                                if len(fields) == _TEXT_FIELDS and "response_metadata" in fields:
                                    plain = (alias_of[raw], ident or None, empty, empty,
                                             content or None, NO_EXTRAS)
                                    append(new(record, plain))
                                    continue
                            elif reader is lc_tool:
                                call_id = fields["tool_call_id"]
                                if (
                                    raw == "tool"
                                    and type(call_id) is str
                                    and call_id
                                    and len(fields) == _TOOL_FIELDS
                                    and "response_metadata" in fields
                                    and "artifact" in fields
                                    and "status" in fields
                                ):
                                    answered = (TOOL, ident or None, empty, (call_id,),
                                                content or None, NO_EXTRAS)
                                    append(new(record, answered))
                                    link(i)
                                    continue
                            elif (
                                raw == "ai"
                                and not fields["invalid_tool_calls"]
                                and len(fields) == _AI_FIELDS
                                and "response_metadata" in fields
                                and "usage_metadata" in fields
                            ):
                                found = fields["tool_calls"]
                                if not found:
                                    plain = (AI, ident or None, empty, empty, content or None,
                                             NO_EXTRAS)
                                    append(new(record, plain))
                                    continue
                                call = found[0] if type(found) is list and len(found) == 1 else None
                                if type(call) is dict and call.get("function") is None:
                                    cid, call_name = call.get("id"), call.get("name")
                                    if type(cid) is str and cid and type(call_name) is str:
                                        billed = ((call_name, call.get("args")),)
                                        extras = new(
                                            Extras, (None, (), billed, None, (), 0, (), CHAT)
                                        )
                                        calling = (AI, ident or None, (cid,), empty,
                                                   content or None, extras)
                                        append(new(record, calling))
                                        link(i)
                                        continue
                    except KeyError:  # a declared field is not there, or the type is no role
                        pass
            read = reader(m) or _read(m, i)
            append(read)
            if read[2] or read[3]:
                link(i)
            extras = read[5]
            if extras is not NO_EXTRAS and extras[7].group:
                grouped = True
    return Records(out, linking, grouped)


def _no_shape(message: object, index: int) -> None:
    return None


def _dispatch() -> tuple[Callable[[Any, int], MessageRecord | None], ...]:
    """The shape readers :func:`_read` asks first of a dict :func:`_read_dict` declines:
    of one with no role and no LangChain type, the first dict shape; of one with a role
    and ``parts`` (and no content), the Gemini shape when only Responses comes before it
    (which declines every dict with a role)."""
    shapes = _DICT_SHAPES
    first: Callable[[Any, int], MessageRecord | None] = shapes[0].read if shapes else _no_shape
    parts: Callable[[Any, int], MessageRecord | None] = _no_shape
    for shape in shapes:
        if shape.name == "gemini":
            parts = shape.read
            break
        if shape.name != "openai-responses":
            break
    return first, parts


# The one fast path (_read_dict for a dict, _read_object for anything else): the record of a
# message of a common shape, or None. The shapes: a dict with a role (or a LangChain
# type), or a LangChain-style object keeping its fields in __dict__, whose role is a known
# alias as written, whose content is a string or None (so no block, no media, no
# tool_result), and whose tool calls, if any, are dicts in tool_calls. It gives exactly
# what _read gives; any other message, or any doubt, gives None.


def fast_reader(cls: type) -> Callable[[Any], MessageRecord | None]:
    """The fast path for messages of class ``cls``, for a loop that reads many messages:
    a function giving the record of a message of a common shape (exactly what
    :func:`read_message` gives), else ``None``, and that may raise for a malformed one;
    :func:`read_message` then reads it and names the error."""
    if cls is dict:
        return _read_dict
    kind = _PLAIN_CLASSES.get(cls)
    return _BY_KIND[_plain_class(cls) if kind is None else kind]


def _read_object(message: object) -> MessageRecord | None:
    """The fast path of an object: its fields read from ``__dict__``."""
    kind = _PLAIN_CLASSES.get(type(message))
    if kind is None:
        kind = _plain_class(type(message))
    return _BY_KIND[kind](message)


def _read_nothing(message: object) -> None:
    """A message of a class the fast path leaves to the general reader."""
    return None


def _read_plain_object(message: object) -> MessageRecord | None:
    """The fast path of an object whose fields all live in its ``__dict__``."""
    fields = getattr(message, "__dict__", None)
    return _read_object_fields(fields) if type(fields) is dict else None


def _read_pydantic(message: object) -> MessageRecord | None:
    """The fast path of a pydantic model: its ``__dict__`` when no undeclared field is set."""
    fields = getattr(message, "__dict__", None)
    if type(fields) is not dict or message.__pydantic_extra__:  # type: ignore[attr-defined]
        return None  # undeclared fields, which getattr() would read
    return _read_object_fields(fields)


def _read_object_fields(fields: dict[str, Any]) -> MessageRecord | None:
    """The fast path of an object's ``__dict__``."""
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


# The commonest LangChain messages, read from their fields at once: an instance of a class
# declaring exactly the fields of one of LangChain's message classes (_LANGCHAIN_CLASSES)
# and no more, with text content, no name and nothing in additional_kwargs; an ai message
# with no call or one LangChain call, a tool message answering one call. Each field is
# looked up once and every other field its class declares is checked to be there, so no
# field the fast path reads (reasoning_content, function_call, ...) can hide in __dict__.
# Any other such message goes on to _read_pydantic; what they give is what it gives.


def _text_fields(message: Any) -> tuple[str, str, str | None] | None:
    """``(content, role, id)`` of a LangChain human, system or function message of the
    common form (its class's declared fields, text content, no name, nothing in
    ``additional_kwargs``), else ``None``."""
    fields = getattr(message, "__dict__", None)
    if type(fields) is dict and not message.__pydantic_extra__:
        try:
            content, raw, ident = fields["content"], fields["type"], fields["id"]
            if (
                type(content) is str
                and type(raw) is str
                and (ident is None or type(ident) is str)
                and fields["name"] is None
                and not fields["additional_kwargs"]
                and len(fields) == _TEXT_FIELDS
                and "response_metadata" in fields
            ):
                return content, _ALIASES[raw], ident
        except KeyError:  # a declared field is not there, or the type is no role
            pass
    return None


def _tool_fields(message: Any) -> tuple[str, str | None, str] | None:
    """``(content, id, call id)`` of a LangChain tool message of the common form
    answering one call, else ``None``."""
    fields = getattr(message, "__dict__", None)
    if type(fields) is dict and not message.__pydantic_extra__:
        try:
            content, raw, ident = fields["content"], fields["type"], fields["id"]
            call_id = fields["tool_call_id"]
            if (
                type(content) is str
                and type(raw) is str
                and raw == "tool"  # another alias of the role: as any pydantic model
                and (ident is None or type(ident) is str)
                and type(call_id) is str
                and call_id
                and fields["name"] is None
                and not fields["additional_kwargs"]
                and len(fields) == _TOOL_FIELDS
                and "response_metadata" in fields
                and "artifact" in fields
                and "status" in fields
            ):
                return content, ident, call_id
        except KeyError:
            pass
    return None


def _ai_fields(message: Any) -> tuple[str, str | None, tuple[str, str, Any] | None] | None:
    """``(content, id, call)`` of a LangChain ai message of the common form issuing no
    call (``call`` ``None``) or one LangChain call (``(id, name, args)``), else ``None``."""
    fields = getattr(message, "__dict__", None)
    if type(fields) is dict and not message.__pydantic_extra__:
        try:
            content, raw, ident, found = (
                fields["content"], fields["type"], fields["id"], fields["tool_calls"]
            )
            if (
                type(content) is str
                and type(raw) is str
                and raw == "ai"
                and (ident is None or type(ident) is str)
                and fields["name"] is None
                and not fields["additional_kwargs"]
                and not fields["invalid_tool_calls"]
                and len(fields) == _AI_FIELDS
                and "response_metadata" in fields
                and "usage_metadata" in fields
            ):
                if not found:
                    return content, ident, None
                call = found[0] if type(found) is list and len(found) == 1 else None
                if type(call) is dict and call.get("function") is None:
                    cid, name = call.get("id"), call.get("name")
                    if type(cid) is str and cid and type(name) is str:
                        return content, ident, (cid, name, call.get("args"))
        except KeyError:
            pass
    return None


def _read_langchain_text(message: Any) -> MessageRecord | None:
    """A human, system or function message (LangChain's text-message fields)."""
    got = _text_fields(message)
    if got is None:
        return _read_pydantic(message)
    content, role, ident = got
    return _new_record(MessageRecord, (role, ident or None, _EMPTY, _EMPTY, content or None,
                                       NO_EXTRAS))


def _read_langchain_tool(message: Any) -> MessageRecord | None:
    """A tool message answering one call (LangChain's tool-message fields)."""
    got = _tool_fields(message)
    if got is None:
        return _read_pydantic(message)
    content, ident, call_id = got
    return _new_record(MessageRecord, (TOOL, ident or None, _EMPTY, (call_id,), content or None,
                                       NO_EXTRAS))


def _read_langchain_ai(message: Any) -> MessageRecord | None:
    """An ai message issuing no call or one LangChain call (LangChain's ai-message fields)."""
    got = _ai_fields(message)
    if got is None:
        return _read_pydantic(message)
    return _ai_record(*got)


def _ai_record(content: str, ident: str | None, call: tuple[str, str, Any] | None) -> MessageRecord:
    """The record of what :func:`_ai_fields` gives."""
    if call is None:
        return _new_record(MessageRecord, (AI, ident or None, _EMPTY, _EMPTY, content or None,
                                           NO_EXTRAS))
    cid, name, args = call
    extras = _new_record(Extras, (None, (), ((name, args),), None, (), 0, (), CHAT))
    return _new_record(MessageRecord, (AI, ident or None, (cid,), _EMPTY, content or None,
                                       extras))


# A loop that only counts and links (tokens.count_back for trim_messages) needs no more of
# a plain text message than its role and its text: fast_biller gives those of LangChain's
# plain text messages without building their record, after the same checks as the readers
# above (held to them by tests/unit/read/test_fast_biller.py); any other message gets the
# reader's answer.

#: Per role, the view of a message that issues, answers and groups nothing: its role
#: alone (what linking and grouping read of it), shared.
PLAIN_VIEWS: dict[str, MessageRecord] = {
    role: MessageRecord(role, None, _EMPTY, _EMPTY, None, NO_EXTRAS)
    for role in sorted(set(_ALIASES.values()))
}
_PLAIN_AI = PLAIN_VIEWS[AI]

#: What :func:`fast_biller`'s functions give: a record, ``(plain view, text)``, ``(view,
#: text, call name, call arguments)``, or ``None``.
Billed = (
    MessageRecord
    | tuple[MessageRecord, str | None]
    | tuple[MessageRecord, str | None, str, object]
    | None
)


def fast_biller(cls: type) -> Callable[[Any], Billed]:
    """:func:`fast_reader` for a loop that only counts and links: the same function, except
    that a plain text message of LangChain's (a human, system or ai message issuing no
    call, with no name and nothing in ``additional_kwargs``) gives ``(view, text)``:
    :data:`PLAIN_VIEWS` of its record's role and its record's text, without the record;
    and such an ai message issuing one call gives ``(view, text, name, args)``: a view of
    its role and call id alone (``MessageRecord(AI, None, (id,), (), None, NO_EXTRAS)``,
    which links and groups as the record does), its text, and the call's name and
    arguments as the record bills them (``args_text`` makes them JSON)."""
    read = fast_reader(cls)
    return _BILLERS.get(read, read)


def _bill_langchain_text(message: Any) -> Billed:
    """:func:`_read_langchain_text`, a hit given as ``(view, text)``."""
    got = _text_fields(message)
    if got is None:
        return _read_pydantic(message)
    return PLAIN_VIEWS[got[1]], got[0] or None


def _bill_langchain_ai(message: Any) -> Billed:
    """:func:`_read_langchain_ai`, a hit given as ``(view, text)`` or ``(view, text, name,
    args)``."""
    got = _ai_fields(message)
    if got is None:
        return _read_pydantic(message)
    content, _, call = got
    if call is None:
        return _PLAIN_AI, content or None
    cid, name, args = call
    view = (AI, None, (cid,), _EMPTY, None, NO_EXTRAS)
    return _new_record(MessageRecord, view), content or None, name, args


_BILLERS: dict[Callable[[Any], MessageRecord | None], Callable[[Any], Billed]] = {
    _read_langchain_text: _bill_langchain_text,
    _read_langchain_ai: _bill_langchain_ai,
}


def _read(message: object, index: int) -> MessageRecord:
    """The general reader: every shape, one walk over the fields and the content."""
    fields: Any
    if type(message) is dict or isinstance(message, Mapping):
        # No dict shape reads a dict with a role and typed content blocks.
        if type(message) is dict and type(message.get("content")) is list:
            plain = _read_message_item(message)
            if plain is not None:
                return plain
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
        COMPACTED if walk.compacted and role == AI else CHAT,
    )
    return MessageRecord(
        role, ident, calls, answers, text, NO_EXTRAS if extras == NO_EXTRAS else extras
    )


_PYDANTIC = 2
#: Pydantic classes declaring exactly the fields of LangChain's text messages (human,
#: system, function), of its ai messages, of its tool messages.
_LANGCHAIN_TEXT, _LANGCHAIN_AI, _LANGCHAIN_TOOL = 3, 4, 5
_LANGCHAIN_BASE = ("content", "additional_kwargs", "response_metadata", "type", "name", "id")
_LANGCHAIN_AI_FIELDS = (*_LANGCHAIN_BASE, "tool_calls", "invalid_tool_calls", "usage_metadata")
_LANGCHAIN_TOOL_FIELDS = (*_LANGCHAIN_BASE, "tool_call_id", "artifact", "status")
_LANGCHAIN_CLASSES = {
    frozenset(_LANGCHAIN_BASE): _LANGCHAIN_TEXT,
    frozenset(_LANGCHAIN_AI_FIELDS): _LANGCHAIN_AI,
    frozenset(_LANGCHAIN_TOOL_FIELDS): _LANGCHAIN_TOOL,
}
_TEXT_FIELDS, _AI_FIELDS, _TOOL_FIELDS = map(
    len, (_LANGCHAIN_BASE, _LANGCHAIN_AI_FIELDS, _LANGCHAIN_TOOL_FIELDS)
)
#: Per class: 0 when the fast path must not read its instances, 1 when every field it
#: reads lives in the instance ``__dict__``, :data:`_PYDANTIC` when undeclared fields
#: may also live elsewhere (pydantic models with ``extra="allow"``, as LangChain's are),
#: or one of the LangChain kinds above (pydantic too).
_PLAIN_CLASSES: dict[type, int] = {}
#: The fast path of each kind of class.
_BY_KIND: dict[int, Callable[[Any], MessageRecord | None]] = {
    0: _read_nothing,
    1: _read_plain_object,
    _PYDANTIC: _read_pydantic,
    _LANGCHAIN_TEXT: _read_langchain_text,
    _LANGCHAIN_AI: _read_langchain_ai,
    _LANGCHAIN_TOOL: _read_langchain_tool,
}


def _declared(cls: type) -> frozenset[str]:
    """The fields a pydantic class declares, or none."""
    try:
        fields = cls.model_fields  # type: ignore[attr-defined]
    except Exception:
        return frozenset()
    return frozenset(fields) if type(fields) is dict else frozenset()


def _plain_class(cls: type) -> int:
    if issubclass(cls, Mapping) or any(hasattr(cls, field) for field in _OBJECT_FIELDS):
        kind = 0  # a mapping, or a property or class attribute that only getattr() reads
    elif hasattr(cls, "__pydantic_extra__"):
        kind = _LANGCHAIN_CLASSES.get(_declared(cls), _PYDANTIC)
    elif hasattr(cls, "__getattr__") or cls.__getattribute__ is not object.__getattribute__:
        kind = 0  # attributes computed on access
    else:
        kind = 1
    _PLAIN_CLASSES[cls] = kind
    return kind
