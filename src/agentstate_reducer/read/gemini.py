"""Gemini ``contents``, read into records: by the reader, never by anything else.

A content is ``{"role": "user" | "model", "parts": [...]}``; a part holds one of
``text`` (``thought: true`` marks reasoning), ``functionCall`` ``{"id"?, "name", "args"}``,
``functionResponse`` ``{"id"?, "name", "response"}``, ``inlineData`` / ``fileData``
(media), ``executableCode`` / ``codeExecutionResult``; any part may carry a
``thoughtSignature``. The REST spelling (``functionCall``) and the Python SDK's
(``function_call``) are both read.

Call ids: a call or response with an ``id`` uses it; one without is named
``"<name>#<k>"``, ``k`` counting the parts of that name in its content (``#`` never
appears in a Gemini function name). A response content answers its calls by name
and order, so ``get#0``, ``get#1`` of a model turn are answered by the first and
second ``get`` response of the next user turn, and the plan's link (latest earlier
issuer of an id) pairs a turn repeated later with its own responses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ._field import FieldError, as_id
from ._field import kind as kind_of
from .fields import _ALIASES, AI, HUMAN, _fields, _json, _payload, _value_size, normalize_role
from .record import (
    BLANK_PART,
    MEDIA_PART,
    OTHER_PART,
    REASONING_PART,
    TEXT_PART,
    TOOL_RESULT_PART,
    TOOL_USE_PART,
    EditablePart,
    Extras,
    MessageRecord,
    ReasoningPart,
    Shape,
    _turn_kinds,
    _turn_links,
    register,
)

__all__ = (
    "CALL",
    "CODE",
    "MEDIA",
    "OUTPUT_KEY",
    "OTHER",
    "REQUEST_LIST",
    "SYSTEM_KEYS",
    "RESPONSE",
    "TEXT",
    "THOUGHT",
    "billed",
    "call_entries",
    "editable",
    "is_content",
    "kinds",
    "links",
    "part_kind",
    "request_system",
    "signature",
    "signed_calls",
    "system_value",
    "stored",
    "synthetic",
    "text_content",
)

# Kinds of part, as part_kind() names them.
TEXT = "text"
THOUGHT = "thought"
CALL = "call"
RESPONSE = "response"
MEDIA = "media"
CODE = "code"
OTHER = "other"

_CALL_KEYS = ("functionCall", "function_call")
_RESPONSE_KEYS = ("functionResponse", "function_response")
_SIGNATURE_KEYS = ("thoughtSignature", "thought_signature")
_MEDIA_KEYS = ("inlineData", "inline_data", "fileData", "file_data")
_CODE_KEYS = ("executableCode", "executable_code", "codeExecutionResult", "code_execution_result")


def is_content(message: Mapping[str, Any]) -> bool:
    """Whether a dict message is a Gemini content (``parts``, and no ``content``)."""
    return "content" not in message and isinstance(message.get("parts"), list)


def _first(part: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, Any] | None:
    for key in keys:
        value = part.get(key)
        if value is not None:
            return key, value
    return None


def part_kind(part: object) -> str:
    """:data:`TEXT`, :data:`THOUGHT`, :data:`CALL`, :data:`RESPONSE`, :data:`MEDIA`,
    :data:`CODE` or :data:`OTHER` (a part with nothing the package reads)."""
    if not isinstance(part, Mapping):
        return OTHER
    if "text" in part:  # a part holds one kind of data: text is never a call as well
        return THOUGHT if part.get("thought") is True else TEXT
    if _first(part, _CALL_KEYS) is not None:
        return CALL
    if _first(part, _RESPONSE_KEYS) is not None:
        return RESPONSE
    if _first(part, _MEDIA_KEYS) is not None:
        return MEDIA
    if _first(part, _CODE_KEYS) is not None:
        return CODE
    if part.get("thought") is True:
        return THOUGHT  # a thought part whose text was not returned (only a signature)
    return OTHER


def signature(part: object) -> str | None:
    """The ``thoughtSignature`` a part carries, or ``None``."""
    if not isinstance(part, Mapping):
        return None
    found = _first(part, _SIGNATURE_KEYS)
    return found[1] if found is not None and isinstance(found[1], str) else None


def _as_id(value: object) -> str | None:
    return as_id(value)  # read once by links(), which names the field of a bad one


def call_entries(parts: list[Any], kind: str) -> list[tuple[int, str, str, str, Any]]:
    """``(part index, id, name, key, body)`` of each :data:`CALL` or :data:`RESPONSE` part.

    ``key`` is the part's key (``"functionCall"``, ``"function_response"``, ...) and
    ``body`` the value under it; ids follow the module's naming (its docstring).
    """
    keys = _CALL_KEYS if kind == CALL else _RESPONSE_KEYS
    seen: dict[str, int] = {}
    out: list[tuple[int, str, str, str, Any]] = []
    for i, part in enumerate(parts):
        if not isinstance(part, Mapping) or part_kind(part) != kind:
            continue
        found = _first(part, keys)
        assert found is not None
        key, body = found
        raw = body.get("name") if isinstance(body, Mapping) else None
        name = raw if isinstance(raw, str) else ""
        k = seen.get(name, 0)
        seen[name] = k + 1
        given = _as_id(body.get("id")) if isinstance(body, Mapping) else None
        out.append((i, given if given is not None else f"{name}#{k}", name, key, body))
    return out


def links(parts: list[Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(calls issued, calls answered)`` by one content's parts, each id once, in order.

    One pass, named as :func:`call_entries` names them; a text part (the commonest, and
    never a call: a part holds one kind of data) costs one lookup.
    """
    calls: dict[str, None] = {}
    answers: dict[str, None] = {}
    seen: dict[tuple[bool, str], int] = {}
    for i, part in enumerate(parts):
        if type(part) is not dict and not isinstance(part, Mapping):
            raise FieldError(f".parts[{i}]", f"expected a part object, got {kind_of(part)}")
        if "text" in part:
            continue
        body = part.get("functionCall") or part.get("function_call")
        issued = body is not None
        if not issued:
            body = part.get("functionResponse") or part.get("function_response")
            if body is None:
                continue
        if not isinstance(body, Mapping):
            where = f".parts[{i}].{_key(part, issued)}"
            raise FieldError(where, f"expected an object, got {kind_of(body)}")
        raw = body.get("name")
        name = raw if isinstance(raw, str) else ""
        k = seen.get((issued, name), 0)
        seen[issued, name] = k + 1
        given = body.get("id")
        if type(given) is str or given is None:
            given = given or None
        else:
            given = as_id(given, f".parts[{i}].{_key(part, issued)}.id")
        (calls if issued else answers)[given if given is not None else f"{name}#{k}"] = None
    return tuple(calls), tuple(answers)


def _key(part: Mapping[str, Any], issued: bool) -> str:
    """The key :func:`links` read a call (``issued``) or a response under (errors only)."""
    first, second = _CALL_KEYS if issued else _RESPONSE_KEYS
    return first if part.get(first) else second


def billed(
    parts: list[Any],
) -> tuple[list[str], list[tuple[str, Any]], list[Any], int]:
    """What a content bills: ``(texts, (name, args) per call, responses, media count)``.

    Texts include thought text (sent back, it is input like any other text) and code;
    a ``thoughtSignature`` is an opaque token the API resolves, not text, so it is not
    counted. ``responses`` are the ``response`` values of function responses.
    """
    texts: list[str] = []
    calls: list[tuple[str, Any]] = []
    responses: list[Any] = []
    media = 0
    for part in parts:
        kind = part_kind(part)
        if kind in (TEXT, THOUGHT):
            text = part.get("text")
            if isinstance(text, str) and text:
                texts.append(text)
        elif kind == CALL:
            body = _first(part, _CALL_KEYS)[1]  # type: ignore[index]
            name = body.get("name") if isinstance(body, Mapping) else None
            args = body.get("args") if isinstance(body, Mapping) else None
            calls.append((name if isinstance(name, str) else "", args or {}))
        elif kind == RESPONSE:
            body = _first(part, _RESPONSE_KEYS)[1]  # type: ignore[index]
            if isinstance(body, Mapping):
                responses.append(body.get("response"))
                name = body.get("name")
                if isinstance(name, str) and name:
                    texts.append(name)
        elif kind == MEDIA:
            media += 1
        elif kind == CODE:
            body = _first(part, _CODE_KEYS)[1]  # type: ignore[index]
            if isinstance(body, Mapping):
                for key in ("code", "output"):
                    value = body.get(key)
                    if isinstance(value, str) and value:
                        texts.append(value)
    return texts, calls, responses, media


def kinds(parts: list[Any]) -> tuple[str, ...]:
    """The kind of each part (see :func:`part_kind`), with ``"blank"`` for empty text."""
    return _turn_kinds(parts, part_kind)


def editable(
    parts: list[Any],
) -> list[tuple[tuple[str | int, ...], str, str | None, str | None, Any]]:
    """``(path, kind, call id, tool, value)`` of the parts context editing may replace.

    ``kind`` is ``"text"`` (a text part; thought parts never), ``"tool_result"`` (a
    function response's ``response``; ``{"output": text}`` reads as ``text``) or
    ``"tool_args"`` (a call's ``args``). A signature stays where it is: only the value
    under the path changes (written with :func:`stored`).
    """
    out: list[tuple[tuple[str | int, ...], str, str | None, str | None, Any]] = []
    calls = {e[0]: e for e in call_entries(parts, CALL)}
    responses = {e[0]: e for e in call_entries(parts, RESPONSE)}
    for i, part in enumerate(parts):
        if i in calls:
            _, ident, name, key, body = calls[i]
            if isinstance(body, Mapping):
                value = body.get("args")
                out.append((("parts", i, key, "args"), "tool_args", ident, name or None, value))
        elif i in responses:
            _, ident, name, key, body = responses[i]
            if isinstance(body, Mapping) and "response" in body:
                value = _unwrap(body["response"])
                out.append(
                    (("parts", i, key, "response"), "tool_result", ident, name or None, value)
                )
        elif part_kind(part) == TEXT and isinstance(part.get("text"), str):
            out.append((("parts", i, "text"), "text", None, None, part["text"]))
    return out


def signed_calls(parts: list[Any]) -> tuple[bool, tuple[tuple[str, int, bool], ...]]:
    """``(any part signed, (call id, part index, signed) per call)`` of one content."""
    any_signed = any(signature(p) is not None for p in parts)
    calls = tuple(
        (e[1], e[0], signature(parts[e[0]]) is not None) for e in call_entries(parts, CALL)
    )
    return any_signed, calls


#: The key a string written into a function response is kept under (a ``response`` must be
#: a JSON object; Gemini's documentation names ``output`` for a function's output).
OUTPUT_KEY = "output"


def _unwrap(response: object) -> object:
    """A response ``{"output": text}`` reads as ``text``, so edits see the text they wrote."""
    if isinstance(response, Mapping) and len(response) == 1:
        text = response.get(OUTPUT_KEY)
        if isinstance(text, str):
            return text
    return response


def stored(path: tuple[str | int, ...], value: object) -> object:
    """What to store at ``path`` (from :func:`editable`) for ``value``: a string written as
    a function response becomes ``{"output": value}``, anything else stays as it is."""
    if isinstance(value, str) and len(path) == 4 and path[3] == "response":
        return {OUTPUT_KEY: value}
    return value


def synthetic(
    issuer: Mapping[str, Any], call_ids: tuple[str, ...], content: str
) -> dict[str, Any] | None:
    """One user content answering ``call_ids`` of the model content ``issuer``, or ``None``
    when a call is not one of its calls. Each response names its call (and repeats its
    ``id`` when the call has one); the result is ``{"error": content}``."""
    entries = {e[1]: e for e in call_entries(issuer.get("parts") or [], CALL)}
    if not all(c in entries for c in call_ids):
        return None
    key = (
        "functionResponse"
        if any(e[3] == "functionCall" for e in entries.values())
        else ("function_response")
    )
    parts = []
    for call in call_ids:
        _, _, name, _, body = entries[call]
        response: dict[str, Any] = {}
        if isinstance(body, Mapping) and _as_id(body.get("id")) is not None:
            response["id"] = body["id"]
        response["name"] = name
        response["response"] = {"error": content}
        parts.append({key: response})
    return {"role": "user", "parts": parts}


def text_content(message: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI-style ``{"role": "user" | "assistant", "content": text, ...}`` written
    as a Gemini content of one text part; its other keys (an id, a marker) are kept."""
    role = "model" if message.get("role") == "assistant" else "user"
    rest = {k: v for k, v in message.items() if k not in ("role", "content")}
    return {"role": role, "parts": [{"text": message.get("content") or ""}], **rest}


# -- the request: {"contents": [...], "systemInstruction": {...}, ...} ---------------

#: The key of a ``generateContent`` request holding its contents.
REQUEST_LIST = "contents"
#: The keys holding its system instruction (REST spelling, then the Python SDK's).
SYSTEM_KEYS = ("systemInstruction", "system_instruction")


def request_system(document: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """``(key, system instruction as a content with role "system")`` of a request, or
    ``None`` when it has none; a string instruction reads as one text part.

    Raises:
        ValueError: the instruction is neither a string nor a content with ``parts``.
    """
    key = next((k for k in SYSTEM_KEYS if k in document), None)
    if key is None:
        return None
    instruction = document[key]
    if isinstance(instruction, str):
        instruction = {"parts": [{"text": instruction}]}
    if not isinstance(instruction, dict) or not isinstance(instruction.get("parts"), list):
        raise ConfigError(f'"{key}" must be a content with "parts", got {instruction!r:.60}')
    return key, {**instruction, "role": "system"}


def system_value(message: Mapping[str, Any]) -> dict[str, Any]:
    """The ``systemInstruction`` value of a changed system content (its role dropped)."""
    return {k: v for k, v in message.items() if k != "role"}


class _GeminiShape(Shape):
    """Gemini contents: ``{"role": "user" | "model", "parts": [...]}``."""

    name = "gemini"
    dicts = True

    def read(self, message: object, index: int) -> MessageRecord | None:
        if type(message) is dict:
            plain = _read_plain(self, message)
            if plain is not None:
                return plain
        elif not isinstance(message, Mapping):
            return None
        fields, raw = _payload(message)
        if not is_content(fields):
            return None
        role = normalize_role(raw) or HUMAN  # a content without a role is the user's
        ident = _as_id(fields.get("id"))
        parts = fields["parts"]
        calls, answers = links(parts)
        texts, billed_calls, responses, media = billed(parts)
        texts.extend(_json(r) for r in responses if r is not None)
        calls, answers = _turn_links(role, calls, answers)
        # The arguments as stored, made JSON text when billed (args_text), as a chat
        # message's are: a reduce by count never needs them as text.
        extras = Extras(None, tuple(texts), tuple(billed_calls), None, answers, media, (), self)
        return MessageRecord(role, ident, calls, answers, None, extras)

    def kinds(self, message: object, record: MessageRecord) -> tuple[str, ...]:
        return tuple(_GEMINI_KINDS[k] for k in kinds(_fields(message)["parts"]))

    def editable(self, message: object, record: MessageRecord) -> tuple[EditablePart, ...]:
        return tuple(EditablePart(*part) for part in editable(_fields(message)["parts"]))

    def editable_size(self, message: object, record: MessageRecord) -> int:
        return _value_size(_fields(message)["parts"])

    def reasoning(self, message: object, record: MessageRecord) -> tuple[ReasoningPart, ...]:
        # Gemini checks signatures on the calls (call_signatures), never on a thought part.
        found = kinds(_fields(message)["parts"])
        return tuple(ReasoningPart("thought", i, True) for i, k in enumerate(found)
                     if k == THOUGHT)


def _read_plain(shape: Shape, content: dict[str, Any]) -> MessageRecord | None:
    """The record :meth:`_GeminiShape.read` gives a content with a known role, a string
    id or none, and parts that are text, function calls and function responses (REST
    spelling, non-empty objects, string names and ids or none); ``None`` for any other.
    What it finds, in order, is what :func:`links` and :func:`billed` find."""
    raw, parts = content.get("role"), content.get("parts")
    if type(raw) is not str or type(parts) is not list or "content" in content:
        return None
    role = _ALIASES.get(raw)
    ident = content.get("id")
    if role is None or (ident is not None and type(ident) is not str):
        return None
    if len(parts) == 1:  # the commonest: one text, one call or one response
        part = parts[0]
        if type(part) is not dict:
            return None
        if "text" in part:
            text = part["text"]
            if type(text) is not str:
                return None
            extras = _new(Extras, (None, (text,) if text else (), (), None, (), 0, (), shape))
            return _new(MessageRecord, (role, ident or None, (), (), None, extras))
        return _one_part(shape, role, ident or None, part)
    texts: list[str] = []
    found: list[tuple[bool, str | None, str, dict[str, Any]]] = []
    for part in parts:
        if type(part) is not dict:
            return None
        if "text" in part:
            text = part["text"]
            if type(text) is not str:
                return None
            if text:
                texts.append(text)
            continue
        got = _call_part(part)
        if got is None:
            return None
        call, given, name, body = got
        found.append((call, given, name or "", body))
        if not call and name:
            texts.append(name)
    calls: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()
    billed_calls: tuple[tuple[str, object], ...] = ()
    if len(found) == 1:  # one call or one response: no name counted twice
        call, given, name, body = found[0]
        key = given or f"{name}#0"
        if call:
            billed_calls = ((name, body.get("args") or {}),)
            calls = (key,) if role == AI else ()
        else:
            response = body.get("response")
            if response is not None:
                texts.append(_response_json(response))
            answers = (key,) if role == HUMAN else ()
    elif found:
        issued: dict[str, None] = {}
        answered: dict[str, None] = {}
        seen: dict[tuple[bool, str], int] = {}
        for call, given, name, _ in found:
            k = seen.get((call, name), 0)
            seen[call, name] = k + 1
            (issued if call else answered)[given or f"{name}#{k}"] = None
        # JSON in read()'s order: the responses, then the arguments.
        texts.extend([_response_json(b.get("response")) for c, _, _, b in found
                      if not c and b.get("response") is not None])
        billed_calls = tuple([(n, b.get("args") or {}) for c, _, n, b in found if c])
        if role == AI:
            calls = tuple(issued)
        elif role == HUMAN:
            answers = tuple(answered)
    extras = _new(Extras, (None, tuple(texts), billed_calls, None, answers, 0, (), shape))
    return _new(MessageRecord, (role, ident or None, calls, answers, None, extras))


def _call_part(
    part: dict[str, Any],
) -> tuple[bool, str | None, str | None, dict[str, Any]] | None:
    """``(is a call, its id, its name, its body)`` of a part that is one function call or
    one function response, REST spelling (a non-empty object, a string name and id or
    none), else ``None``."""
    body = part.get("functionCall")
    call = body is not None
    if not call:
        body = part.get("functionResponse")
        if body is None or "function_call" in part:
            return None
    if type(body) is not dict or not body:
        return None
    name, given = body.get("name"), body.get("id")
    if (name is not None and type(name) is not str) or (
        given is not None and type(given) is not str
    ):
        return None
    return call, given, name, body


def _one_part(
    shape: Shape, role: str, ident: str | None, part: dict[str, Any]
) -> MessageRecord | None:
    """:func:`_read_plain` of a content whose one part is no text: one function call or
    one function response (its name and ``response`` billed), else ``None``."""
    got = _call_part(part)
    if got is None:
        return None
    call, given, name, body = got
    get = body.get
    key = given or f"{name or ''}#0"
    if call:
        billed = ((name or "", get("args") or {}),)
        extras = _new(Extras, (None, (), billed, None, (), 0, (), shape))
        return _new(MessageRecord, (role, ident, (key,) if role == AI else (), (), None, extras))
    response = get("response")
    texts: tuple[str, ...]
    if response is None:
        texts = (name,) if name else ()
    else:
        text = _response_json(response)
        texts = (name, text) if name else (text,)
    answers = (key,) if role == HUMAN else ()
    extras = _new(Extras, (None, texts, (), None, answers, 0, (), shape))
    return _new(MessageRecord, (role, ident, (), answers, None, extras))


_quote = json.encoder.encode_basestring


def _response_json(response: object) -> str:
    """``_json(response)``; a response of one text (``{"output": text}``, the commonest)
    written without the encoder."""
    if type(response) is dict and len(response) == 1:
        [(key, value)] = response.items()
        if type(key) is str and type(value) is str:
            return f"{{{_quote(key)}:{_quote(value)}}}"
    return _json(response)


_new = tuple.__new__
_GEMINI = _GeminiShape()

_GEMINI_KINDS = {
    TEXT: TEXT_PART,
    "blank": BLANK_PART,
    THOUGHT: REASONING_PART,
    CALL: TOOL_USE_PART,
    RESPONSE: TOOL_RESULT_PART,
    MEDIA: MEDIA_PART,
    CODE: OTHER_PART,
    OTHER: OTHER_PART,
}


register(_GEMINI)
