"""agentstate-reducer: bound an agent's message history without breaking tool-call pairs."""

from __future__ import annotations

__all__ = (
    "Background",
    "ClearToolResults",
    "ConfigError",
    "ConfigTypeError",
    "ContextEdit",
    "DEFAULT_NAMESPACE_KEY",
    "InvalidHistoryError",
    "JobDecodeError",
    "MessageFormatError",
    "MessageReducer",
    "Offload",
    "OutboxError",
    "Problem",
    "Recovery",
    "ReducerConfig",
    "ReducerError",
    "ReducerResult",
    "RememberFn",
    "Summarizer",
    "UnstorableError",
    "UpdateError",
    "agent_config",
    "check_history",
    "classify_error",
    "default_summary_messages_factory",
    "resolve_token_counter",
    "summarize_with",
    "trim_messages",
    "validate_history",
)

import logging as _logging

from ._recover import Recovery
from ._version import __version__ as __version__
from .config import (
    DEFAULT_NAMESPACE_KEY,
    ReducerConfig,
    ReducerResult,
    RememberFn,
    agent_config,
)
from .edit import ClearToolResults, ContextEdit, Offload
from .errors import (
    ConfigError,
    ConfigTypeError,
    JobDecodeError,
    MessageFormatError,
    OutboxError,
    ReducerError,
    UnstorableError,
    UpdateError,
)
from .hooks import Background
from .recovery import classify_error
from .reducer import MessageReducer
from .summary import Summarizer, default_summary_messages_factory, summarize_with
from .tokens import resolve_token_counter
from .trim import trim_messages
from .validate import InvalidHistoryError, Problem, check_history, validate_history

# A library's logger: quiet unless the application configures logging (no lastResort output).
_logging.getLogger("agentstate_reducer").addHandler(_logging.NullHandler())
