"""Token counters: the user's callable, exact tiktoken counts offline, or a character heuristic."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .errors import ConfigError
from .messages import message_parts

__all__ = ("TokenCounter", "approximate_token_count", "resolve_token_counter")

logger = logging.getLogger("agentstate_reducer")

#: A per-message token counter.
TokenCounter = Callable[[Any], int]

_MESSAGE_OVERHEAD = 4
_MEDIA_TOKENS = 85


def _approx_text(text: str) -> int:
    return (len(text) + 3) // 4


def approximate_token_count(message: Any) -> int:
    """Estimate the tokens of one message without a tokenizer."""
    parts = message_parts(message)
    total = _MESSAGE_OVERHEAD + parts.media * _MEDIA_TOKENS
    for text in parts.texts:
        total += _approx_text(text)
    for name, args in parts.tool_calls:
        total += _approx_text(name) + _approx_text(args) + 3
    if parts.name:
        total += _approx_text(parts.name) + 1
    if parts.tool_call_id:
        total += _approx_text(parts.tool_call_id)
    return total


def _from_chat_model(model: Any) -> TokenCounter:
    def count(message: Any) -> int:
        return int(model.get_num_tokens_from_messages([message]))

    return count


def resolve_token_counter(token_counter: Any = None) -> TokenCounter:
    """Return the effective per-message counter: the user's callable, else tiktoken, else heuristic.

    Also accepts ``"approximate"`` (the heuristic) and a chat model with
    ``get_num_tokens_from_messages``.
    """
    if token_counter is None or token_counter == "approximate":
        return approximate_token_count
    if callable(getattr(token_counter, "get_num_tokens_from_messages", None)):
        return _from_chat_model(token_counter)
    if callable(token_counter):
        return token_counter  # type: ignore[no-any-return]
    raise ConfigError(
        f"token_counter must be a callable, 'approximate' or a chat model, got {token_counter!r}"
    )
