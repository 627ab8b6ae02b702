"""Exceptions raised by agentstate-reducer.

    ReducerError
    ├── ConfigError(ReducerError, ValueError)      a ReducerConfig field is invalid
    └── MessageFormatError(ReducerError, TypeError) a message cannot be read

Each also inherits the matching built-in, so ``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = ("ConfigError", "MessageFormatError", "ReducerError")


class ReducerError(Exception):
    """Base class of every exception this package raises on purpose."""


class ConfigError(ReducerError, ValueError):
    """A configuration field is invalid; the message names the field."""


class MessageFormatError(ReducerError, TypeError):
    """A message cannot be read; the message names its index."""
