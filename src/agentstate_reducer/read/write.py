"""Writing messages: new ones in a shape, edited copies (by path, whatever the shape),
synthetic tool results, LangGraph updates, and the state a cache compares.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from . import agent_framework as _agent_framework
from . import bedrock as _bedrock
from . import gemini as _gemini
from . import pydantic_ai as _pydantic_ai
from . import responses as _responses
from ._field import as_id as _as_id
from .bedrock import _converse
from .chat import read_message
from .fields import (
    _ANTHROPIC_CALL_BLOCKS,
    _M,
    _OBJECT_FIELDS,
    AI,
    HUMAN,
    SYSTEM,
    TOOL,
    _fields,
    _get,
    _json,
    _payload,
)
from .gemini import _GEMINI
from .markers import INJECTED_KEY, PACKAGE_NOTE, _marker
from .record import GROUP_REASONING, MessageRecord
from .responses import item_type
from .walk import _Walk

__all__ = (
    "INTERRUPTED_RESULT",
    "copy_state",
    "message_state",
    "part_text",
    "write_message",
    "synthetic_results",
    "with_results",
    "as_update",
    "is_removal",
    "match_shape",
    "text_block",
    "with_content",
    "with_parts",
    "with_text_appended",
    "without_reasoning",
)


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
    if _agent_framework.is_message(message):
        return _agent_framework.without(message, blocks)  # type: ignore[no-any-return]
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


def is_merge_update(message: object) -> bool:
    """True for what only LangGraph's ``add_messages`` reads as an update, not a message.

    A ``("user", "hi")`` tuple, a bare string, or a removal (:func:`is_removal`).
    """
    return isinstance(message, (str, tuple)) or is_removal(message)


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
    if _agent_framework.is_message(message):
        return _agent_framework.state(message)
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
    if _agent_framework.is_message(message):
        return _agent_framework.with_values(message, values, note, PACKAGE_NOTE)  # type: ignore[no-any-return]
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
        if _agent_framework.is_message(issuer):
            return _agent_framework.synthetic_results(issuer, call_ids, content)
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


def with_results(
    messages: list[Any],
    records: list[MessageRecord],
    dead: tuple[tuple[int, tuple[str, ...]], ...],
) -> tuple[list[Any], list[Any], list[MessageRecord]]:
    """``(messages, results, records)``: ``messages`` with the :func:`synthetic_results`
    answering each ``dead`` ``(index, call ids)`` right after the message at that index,
    those results, and the records of the list returned (``records``, of ``messages``,
    with the results' read in)."""
    out: list[Any] = []
    added: list[Any] = []
    read: list[MessageRecord] = []
    at = 0
    for index, calls in dead:
        out.extend(messages[at : index + 1])
        read.extend(records[at : index + 1])
        results = synthetic_results(messages[index], calls)
        out.extend(results)
        added.extend(results)
        read.extend(read_message(m) for m in results)
        at = index + 1
    out.extend(messages[at:])
    read.extend(records[at:])
    return out, added, read


def match_shape(block: list[Any], sample: object) -> list[Any]:
    """OpenAI-style dicts (``role`` ``user``/``assistant``) in the shape of ``sample``.

    LangChain messages become ``HumanMessage``/``AIMessage`` carrying the package's
    marker (:data:`INJECTED_KEY`) in ``additional_kwargs``; PydanticAI messages become a
    ``ModelRequest`` / ``ModelResponse`` of one text part, the marker in ``metadata``
    (never sent to a model); Agent Framework messages become a ``Message`` of one text
    content, the marker in ``additional_properties``; Gemini contents become contents of
    one text part (role ``user`` or ``model``, the other keys kept); dicts using LangChain role
    names (``human``/``ai``, as ``role`` or ``type``) get those; anything else is left
    as it is. A Converse sample gives Converse messages (one text block; the shape has no
    message id, so ``id`` is left off, the other fields, the marker among them, stay).
    """
    native = _native(sample)
    if native is not None:
        return [native(m) for m in block]
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
    if _agent_framework.is_message(sample):
        out = []
        for message in block:
            record, mark = read_message(message), _marker(message)
            properties = {INJECTED_KEY: dict(mark)} if mark is not None else None
            role = "assistant" if record.role == AI else "user"
            text = "\n".join(record.texts)
            out.append(_agent_framework.text_message(
                sample, role, text, message.get("id"), properties))
        return out
    if not isinstance(sample, Mapping):
        return block
    if _gemini.is_content(_payload(sample)[0]):
        return [_gemini.text_content(m) for m in block]
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


def _native(sample: object) -> Callable[[Mapping[str, Any]], dict[str, Any]] | None:
    """How :func:`match_shape` writes an OpenAI-style dict in the shape of ``sample`` when
    that is Converse's, else ``None``."""
    if not isinstance(sample, Mapping):
        return None
    fields = _payload(sample)[0]
    if _bedrock.is_message(fields.get("content")):
        return _as_converse
    return None


def _rest(message: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in ("role", "content", "id")}


def _as_converse(message: Mapping[str, Any]) -> dict[str, Any]:
    role = "user" if message["role"] in ("user", HUMAN) else "assistant"
    return {"role": role, "content": [{"text": message["content"]}], **_rest(message)}


def with_text_appended(message: _M, text: str, *, key: str, data: Mapping[str, Any]) -> _M:
    """A copy of the dict ``message`` with ``text`` after its content (a text block at the
    end of a list, else a new paragraph of a string) and ``data`` under ``key`` among its
    fields; for a provider that takes no two user messages in a row (Converse)."""
    source: Any = message
    content = _payload(source)[0].get("content")
    if isinstance(content, list):
        merged: object = [*content, {"text": text}]
    else:
        merged = f"{content or ''}\n\n{text}" if content else text
    copied: Any = with_content(message, merged)
    target: Any = _payload(copied)[0]
    target[key] = dict(data)
    return copied  # type: ignore[no-any-return]


#: How an OpenAI chat dict spells each canonical role.
_CHAT_ROLES = {HUMAN: "user", AI: "assistant", SYSTEM: "system", TOOL: "tool"}


def write_message(role: str, content: object, **fields: Any) -> dict[str, Any]:
    """A new message as an OpenAI chat dict: ``role`` (canonical, e.g. :data:`HUMAN`, or as
    spelled), then ``content``, then ``fields`` in order. Put it in a conversation's own
    shape with :func:`match_shape`."""
    return {"role": _CHAT_ROLES.get(role, role), "content": content, **fields}
