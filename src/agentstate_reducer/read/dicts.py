"""The chat dict reader: an OpenAI, Anthropic or LangChain dict message read into its
record (:func:`_read_dict`, the fast path's dict half), its content blocks and calls,
and a Responses ``message`` item read as a chat message. :mod:`.chat` reads through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._field import as_id as _as_id
from .fields import (
    _ALIASES,
    _EMPTY,
    _TEXT_BLOCKS,
    AI,
    HUMAN,
    TOOL,
    _dedupe,
    _new_record,
    _unique_calls,
)
from .record import (
    _DICT_SHAPES,
    CHAT,
    NO_EXTRAS,
    Extras,
    MessageRecord,
)

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


def _read_fields(get: Callable[[str], Any], raw: object) -> MessageRecord | None:
    """The fast path of the fields ``get`` reads (an object's, or a LangChain dict's)."""
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
    return _chat_record(role, ident, content, found, name, call_id)


def _read_dict(message: dict[str, Any]) -> MessageRecord | None:
    """The fast path of a dict. With a ``role``, each key is read once, and the keys
    that rule the fast path out are looked up only when the dict has keys not read yet."""
    raw = message.get("role")
    if raw is None:
        if "data" in message or "kwargs" in message:
            return None  # messages_to_dict / dumpd shapes keep fields one level down
        kind = message.get("type")
        if type(kind) is not str or kind not in _ALIASES:
            return None  # what _read_fields would find (a Responses item, say)
        return _read_fields(message.get, kind)
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
        if "parts" in message:
            return None  # a Gemini content: its reader decides (the keys below would)
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
                    extras = _new_record(Extras, (None, (), billed, None, (), 0, (), CHAT))
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
    return _chat_record(role, ident, content, found, name, call_id)


def _chat_record(
    role: str, ident: str | None, content: str | None, found: Any, name: str | None,
    call_id: str | None,
) -> MessageRecord | None:
    """The record of a chat message whose fields the fast path checked: its calls read
    from ``found``, a tool result's ``call_id`` as what it answers."""
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


#: The text blocks of the fast path: Anthropic's (OpenAI's ``input_text`` and
#: ``output_text`` are left to the general reader, see :func:`_read_message_item`).
_TEXT = frozenset({"text"})


#: Keys of a Responses message item the general reader reads as it reads a chat dict.
_ITEM_KEYS = frozenset({"role", "content", "id", "type", "status"})


def _read_message_item(message: dict[str, Any]) -> MessageRecord | None:
    """The general reader's record of a dict of a known role, content blocks, maybe an id
    and a Responses message's ``{"type": "message", "status"}`` (its commonest output item),
    or ``None``: keys and blocks as :func:`_read_blocks` reads them, any text block."""
    get = message.get
    content = get("content")
    if type(content) is not list:
        return None
    raw, ident, kind = get("role"), get("id"), get("type")
    role = _ALIASES.get(raw) if type(raw) is str else None
    if (
        role is None
        or (ident is not None and type(ident) is not str)
        or (kind is not None and (type(kind) is not str or kind != "message"))
        or not _ITEM_KEYS.issuperset(message)
    ):
        return None
    return _read_blocks(role, ident or None, content, _TEXT_BLOCKS)


def _read_blocks(
    role: str, ident: str | None, content: list[Any], text: frozenset[str] = _TEXT
) -> MessageRecord | None:
    """The fast path of a dict of a role, a list of Anthropic content blocks and maybe
    an id: text blocks (of a type in ``text``), ``tool_use``, ``tool_result`` (string
    content), ``thinking`` and ``redacted_thinking`` blocks whose fields are strings; any
    other block gives ``None``. What it finds, in order, is what :class:`_Walk` finds."""
    if len(content) == 1:  # one text block: the commonest answer
        block = content[0]
        if type(block) is dict and block.get("type") in text:
            value = block.get("text")
            if type(value) is str:
                extras = NO_EXTRAS
                if value:
                    extras = _new_record(Extras, (None, (value,), (), None, (), 0, (), CHAT))
                return _new_record(MessageRecord, (role, ident, _EMPTY, _EMPTY, None, extras))
    texts: list[str] = []
    calls: list[tuple[str | None, str, object]] = []
    ids: list[str] = []
    results: list[str] = []
    reasoning: list[int] = []
    for i, block in enumerate(content):
        if type(block) is not dict:
            return None
        kind = block.get("type")
        if kind in text:
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
    extras = _new_record(Extras, (None, (), billed, None, (), 0, (), CHAT))
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
