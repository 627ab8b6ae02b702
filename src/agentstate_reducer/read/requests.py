"""Provider requests: where a request keeps its messages and system prompt, reading and
writing one, and what a whole list of messages is serialised as.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..errors import MessageFormatError
from . import bedrock as _bedrock
from . import gemini as _gemini
from . import pydantic_ai as _pydantic_ai
from . import responses as _responses
from .chat import read_message
from .fields import _ANTHROPIC_BLOCKS, _fields, message_content
from .parts import native_provider

__all__ = (
    "read_request",
    "Request",
    "write_request",
    "reply_text",
    "is_serialisation_stub",
    "request_instructions",
    "has_anthropic_blocks",
    "looks_like_message",
    "serialisation",
)


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
