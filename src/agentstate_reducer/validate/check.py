"""The entry points: ``validate_history`` lists the problems, ``check_history`` raises on them."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..reducer import as_message_list
from .bedrock import _BedrockChecker
from .chat import _Checker
from .gemini import _GeminiChecker
from .responses import _check_responses
from .rules import PROVIDERS, InvalidHistoryError, Problem


def validate_history(messages: Any, *, provider: str = "openai") -> list[Problem]:
    """List every rule of ``provider`` that ``messages`` breaks; ``[]`` means the API accepts it.

    Args:
        messages: a list of messages of any shape the package reads (LangChain messages,
            OpenAI dicts, Anthropic dicts with content blocks, Gemini contents, Bedrock
            Converse messages, OpenAI Responses items); ``None`` is an empty list.
        provider: one of :data:`PROVIDERS` (``"openai"`` is chat completions).

    Returns:
        The problems in message order, each naming the index, the rule and a fix.

    Raises:
        ValueError: ``provider`` is not one of :data:`PROVIDERS`.
        MessageFormatError: a message cannot be read (a ``TypeError`` naming its index
            and the field).

    Example:
        >>> history = [
        ...     {"role": "user", "content": "weather?"},
        ...     {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ... ]
        >>> [p.rule for p in validate_history(history)]
        ['orphan-result']
    """
    if provider not in PROVIDERS:
        names = ", ".join(repr(p) for p in PROVIDERS)
        raise ConfigError(f"provider must be one of {names}, got {provider!r}")
    if provider == "gemini":
        return _GeminiChecker(as_message_list(messages)).run()
    if provider == "bedrock":
        return _BedrockChecker(as_message_list(messages)).run()
    if provider == "openai-responses":
        return _check_responses(as_message_list(messages))
    return _Checker(as_message_list(messages), provider == "anthropic").run()


def check_history(messages: Any, *, provider: str = "openai") -> Any:
    """Return ``messages`` unchanged if ``provider`` accepts them, else raise listing every problem.

    Raises:
        InvalidHistoryError: a ``ValueError`` whose ``problems`` lists what
            :func:`validate_history` found.
        ValueError: ``provider`` is not one of :data:`PROVIDERS`.
    """
    problems = validate_history(messages, provider=provider)
    if problems:
        raise InvalidHistoryError(provider, problems)
    return messages
