"""Durable delivery of pruned messages: an outbox between ``reduce()`` and long-term memory.

``OutboxHook`` stores each pruned batch durably inside ``reduce()``; a ``Relay`` claims
the stored jobs and hands them to the real hook, acknowledging each after delivery.
Enqueue is idempotent per (namespace, message id), claims are exclusive while their
lease holds, and a job outlives the crash of either side.

Backends, one module each: ``SQLiteOutbox`` (stdlib), ``PostgresOutbox``
(``pip install "agentstate-reducer[postgres]"``), ``RedisOutbox``
(``pip install "agentstate-reducer[redis]"``). The server backends are imported on
first use, so this package needs only the standard library.
"""

from __future__ import annotations

__all__ = (
    "AsyncOutboxHook",
    "Job",
    "Outbox",
    "OutboxHook",
    "PostgresOutbox",
    "RedisOutbox",
    "Relay",
    "RelayRound",
    "SQLiteOutbox",
)

from typing import TYPE_CHECKING, Any

from .base import Job, Outbox
from .relay import AsyncOutboxHook, OutboxHook, Relay, RelayRound
from .sqlite import SQLiteOutbox

if TYPE_CHECKING:
    from .postgres import PostgresOutbox
    from .redis import RedisOutbox

_LAZY = {"PostgresOutbox": "postgres", "RedisOutbox": "redis"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
