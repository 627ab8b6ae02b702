"""Exceptions raised by agentstate-reducer.

    ReducerError
    ├── ConfigError(ReducerError, ValueError)      a ReducerConfig field is invalid
    │   └── ConfigTypeError(ConfigError, TypeError) an argument has the wrong type
    ├── MessageFormatError(ReducerError, TypeError) a message cannot be read
    ├── OutboxError(ReducerError, RuntimeError)    a durable outbox could not store or update jobs
    │   ├── UnstorableError(OutboxError, MessageFormatError)  a message or namespace it
    │   │                                                      cannot store losslessly
    │   └── JobDecodeError(OutboxError, ValueError)  a stored job cannot be rebuilt
    ├── UpdateError(ReducerError, ValueError)      a state update cannot be applied
    └── InvalidHistoryError(ReducerError, ValueError)  check_history found problems
                                                       (defined in validate/rules.py)

Each also inherits the matching built-in, so ``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = (
    "ConfigError",
    "ConfigTypeError",
    "JobDecodeError",
    "MessageFormatError",
    "OutboxError",
    "ReducerError",
    "UnstorableError",
    "UpdateError",
)


class ReducerError(Exception):
    """Base class of every exception this package raises on purpose."""


class ConfigError(ReducerError, ValueError):
    """A configuration field is invalid; the message names the field."""


class ConfigTypeError(ConfigError, TypeError):
    """An argument has the wrong type (``None`` too): a ``ValueError`` and a ``TypeError``."""


class MessageFormatError(ReducerError, TypeError):
    """A message cannot be read; the message names its index."""


class UpdateError(ReducerError, ValueError):
    """A state update cannot be applied: LangGraph's ``add_messages`` refused it (a
    ``RemoveMessage`` for an id the list does not hold); its words are kept."""


class OutboxError(ReducerError, RuntimeError):
    """A durable outbox could not store or update jobs; the driver's error is chained.

    Unlike other hook errors, ``reduce()`` re-raises it from an ``on_prune`` hook, so
    the caller's state is not advanced past messages that were never stored.
    """


class UnstorableError(OutboxError, MessageFormatError):
    """A message or namespace the outbox cannot store losslessly; nothing was stored.

    An :class:`OutboxError`, so ``reduce()`` re-raises it and the caller's state keeps
    the messages; also a :class:`MessageFormatError` (a ``TypeError``), as it names the
    index and the field at fault. Raised through ``reduce()``, the index is the message's
    in ``existing + new``.
    """

    #: The index of the message at fault (``None`` for a namespace): in the batch the
    #: outbox was given, or, raised through ``reduce()``, in ``existing + new``.
    index: int | None = None
    #: What is wrong with it, without the index (``field ['content']: ...``).
    detail: str = ""


class JobDecodeError(OutboxError, ValueError):
    """A stored job cannot be rebuilt (a corrupted row); the decoder's error is chained.

    A ``ValueError`` too, as the JSON error it replaces was. A relay dead-letters such
    a job alone, with this error.
    """
