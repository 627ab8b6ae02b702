"""Calibration from reported usage, and what a request adds besides its messages.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..read import (
    SYSTEM,
    write_message,
)
from .count import TokenCounter

__all__ = (
    "REPLY_PRIMING_TOKENS",
    "Calibration",
    "request_overhead",
)


#: Tokens a chat API adds to every request to prime the reply (``<|start|>assistant``).
REPLY_PRIMING_TOKENS = 3


class Calibration:
    """A correction factor for a counter's estimates, learned from reported input tokens.

    Each observation is one request: what the counter estimated for it and what the
    provider reported. The factor is the ratio of the reported to the estimated tokens
    summed over the requests seen, each new request halving the weight of those before
    it (``decay``), so it follows a drift within a few requests; each request's ratio is
    first bounded to ``bounds`` (and so is the factor), so one odd report cannot move it
    far. Until the first observation the factor is 1. Thread-safe.
    """

    def __init__(self, *, decay: float = 0.5, bounds: tuple[float, float] = (0.5, 2.0)) -> None:
        if not 0 <= decay < 1:
            raise ConfigError(f"decay must be in [0, 1), got {decay!r}")
        low, high = bounds
        if not 0 < low <= 1 <= high:
            raise ConfigError(
                f"bounds must be (low, high) with 0 < low <= 1 <= high, got {bounds!r}"
            )
        self.decay = decay
        self.bounds = (float(low), float(high))
        self._lock = threading.Lock()
        self._reported = 0.0
        self._estimated = 0.0
        #: The current factor: multiply an estimate by it.
        self.factor = 1.0
        #: Requests observed so far.
        self.observations = 0
        #: The most a request's messages and overhead may count (the counter's tokens,
        #: as ``max_tokens``), learned from a provider's refusal (:meth:`cap`); ``None``:
        #: no such bound.
        self.ceiling: int | None = None

    def observe(self, estimated: int, reported: int) -> float:
        """Learn from one request; return the new factor.

        Raises:
            ConfigError: ``estimated`` or ``reported`` is not a positive int.
        """
        for name, value in (("estimated", estimated), ("reported", reported)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive int of tokens, got {value!r}")
        low, high = self.bounds
        ratio = min(max(reported / estimated, low), high)
        with self._lock:
            self._reported = self.decay * self._reported + ratio * estimated
            self._estimated = self.decay * self._estimated + estimated
            self.factor = min(max(self._reported / self._estimated, low), high)
            self.observations += 1
            return self.factor

    def cap(self, tokens: int) -> int:
        """Lower :attr:`ceiling` to ``tokens`` (never raise it); return the ceiling.

        Raises:
            ConfigError: ``tokens`` is not a positive int.
        """
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
            raise ConfigError(f"tokens must be a positive int, got {tokens!r}")
        with self._lock:
            self.ceiling = tokens if self.ceiling is None else min(self.ceiling, tokens)
            return self.ceiling

    def __repr__(self) -> str:
        return (
            f"Calibration(factor={self.factor:.4f}, observations={self.observations}, "
            f"ceiling={self.ceiling})"
        )


def _tool_schema(tool: Any) -> Any:
    """A tool as the provider receives it: a dict as is, anything else as LangChain converts it."""
    if isinstance(tool, Mapping):
        return dict(tool)
    try:
        from langchain_core.utils.function_calling import convert_to_openai_tool
    except ImportError as exc:
        raise ConfigError(
            f"tools: {tool!r:.60} is not a dict schema, and converting it needs langchain_core "
            '(pip install "agentstate-reducer[langgraph]")'
        ) from exc
    try:
        return convert_to_openai_tool(tool)
    except Exception as exc:
        raise ConfigError(
            f"tools: cannot convert {tool!r:.60} to a tool schema ({exc}); pass a dict"
        ) from exc


def request_overhead(
    counter: TokenCounter, *, tools: Sequence[Any] = (), system_prompt: str | None = None
) -> int:
    """Tokens every request adds to its messages: the system prompt and the tool schemas.

    Each is counted with ``counter`` as a system message (a tool as its JSON schema);
    a tool that is not a dict is converted as LangChain binds it
    (``convert_to_openai_tool``). Together with :data:`REPLY_PRIMING_TOKENS` this is
    what a budget must leave room for besides the messages.

    Raises:
        ConfigError: a tool cannot be turned into a schema.
    """
    total = 0
    if system_prompt:
        total += int(counter(write_message(SYSTEM, system_prompt)))
    for tool in tools:
        schema = _tool_schema(tool)
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"), default=str)
        total += int(counter(write_message(SYSTEM, text)))
    return total
