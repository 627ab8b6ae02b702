"""Long-term memory: write each pruned message to a LangGraph ``BaseStore``."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Generator, Sequence
from datetime import datetime, timezone
from typing import Any, Literal

from langgraph.store.base import BaseStore, PutOp

from .._drivers import _adrive, _blocking, _Call, _drive
from ..errors import ConfigError, ConfigTypeError
from ..outbox.base import Outbox
from ..read import message_id, message_parts, package_note

__all__ = ("OriginalSource", "StoreHook", "afetch_original", "fetch_original", "store_hook")


def _as_namespace(value: object, name: str) -> tuple[str, ...]:
    if isinstance(value, str) and value:
        return (value,)
    if (
        isinstance(value, (tuple, list))
        and value
        and all(isinstance(label, str) and label for label in value)
    ):
        return tuple(value)
    raise ConfigError(
        f"{name} must be a non-empty string or a non-empty tuple of non-empty strings, "
        f"got {value!r}"
    )


def _record(message: object, pruned_at: str, index: int = 0) -> dict[str, Any]:
    """The store value for one pruned message: role, text, tool calls, time of pruning."""
    parts = message_parts(message, index)
    record: dict[str, Any] = {
        "role": parts.role,
        "content": "\n".join(parts.texts),
        "tool_calls": [{"name": name, "arguments": args} for name, args in parts.tool_calls],
        "tool_call_id": parts.tool_call_id,
        "name": parts.name,
        "pruned_at": pruned_at,
    }
    note = package_note(message)
    if note is not None and "edit" in note:
        # An original that context editing replaced: the key is its handle.
        record["edited"] = dict(note)
    return record


def _key(message: object, record: dict[str, Any]) -> str:
    ident = message_id(message)
    if ident is not None:
        return ident
    # No id: a digest of what was said, so a redelivery still overwrites.
    said = {k: v for k, v in record.items() if k != "pruned_at"}
    text = json.dumps(said, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256-" + hashlib.sha256(text.encode()).hexdigest()[:32]


class StoreHook:
    """An ``on_prune`` hook writing each pruned message to a LangGraph store.

    Build it with :func:`store_hook`. One call writes one batch of ``PutOp``.
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        default_namespace: str | tuple[str, ...],
        index: Literal[False] | list[str] | None,
    ) -> None:
        if not isinstance(store, BaseStore):
            raise ConfigTypeError(f"store must be a LangGraph BaseStore, got {store!r}")
        #: The store written to.
        self.store = store
        #: Namespace used when the reducer was given none.
        self.default_namespace = _as_namespace(default_namespace, "default_namespace")
        self.index = index

    def __repr__(self) -> str:
        return f"store_hook({self.store!r}, default_namespace={self.default_namespace!r})"

    def ops(self, pruned: list[Any], namespace: Any) -> list[PutOp]:
        """The ``PutOp`` batch for ``pruned`` under ``namespace`` (a string is one label)."""
        labels = (
            self.default_namespace
            if namespace is None
            else _as_namespace(namespace, "namespace")
        )
        now = datetime.now(timezone.utc).isoformat()
        ops = []
        for i, message in enumerate(pruned):
            record = _record(message, now, i)
            ops.append(PutOp(labels, _key(message, record), record, index=self.index))
        return ops

    def __call__(self, pruned: list[Any], namespace: Any = None) -> Awaitable[Any] | None:
        """Write ``pruned``; return an awaitable only for an async store on its own loop."""
        ops = self.ops(pruned, namespace)
        if not ops:
            return None
        try:
            self.store.batch(ops)
        except asyncio.InvalidStateError:
            # An async store (AsyncSqliteStore, AsyncPostgresStore) refuses sync calls
            # on its event loop before doing anything; areduce() awaits this instead.
            return self.store.abatch(ops)
        return None


def store_hook(
    store: BaseStore,
    *,
    default_namespace: str | tuple[str, ...] = ("memories",),
    index: Literal[False] | list[str] | None = None,
) -> StoreHook:
    """Return an ``on_prune`` hook that writes each pruned message to ``store``.

    Each message is put under the namespace the reducer forwards (a string becomes
    a one-element tuple; ``None`` uses ``default_namespace``), keyed by its id so a
    redelivery overwrites instead of duplicating (id-less messages are keyed by a
    digest of their content). The value holds ``role``, ``content`` (text),
    ``tool_calls`` (``name`` and JSON ``arguments``), ``tool_call_id``, ``name`` and
    ``pruned_at`` (ISO 8601, UTC). An original that context editing replaced is keyed
    by its handle and its value also holds ``edited`` (the kind of edit, the handle,
    the tool, the call id, the edited message's id, its size in tokens); read it back
    with :func:`fetch_original`.

    Sync and async: the hook writes synchronously with ``store.batch`` and returns
    ``None``, so it works with ``reduce()``. The one exception is an async store
    (``AsyncSqliteStore``, ``AsyncPostgresStore``) called on its own event loop, where
    a sync call would deadlock: there it returns ``store.abatch(...)``, which
    ``await reducer.areduce(...)`` awaits (``reduce()`` raises ``TypeError`` instead).
    Wrap it in :class:`~agentstate_reducer.Background` to move the writes off the
    caller's thread.

    Args:
        store: any LangGraph ``BaseStore`` (``InMemoryStore``, ``SqliteStore``,
            ``PostgresStore`` and their async twins).
        default_namespace: where messages go when ``reduce()`` got no namespace.
        index: passed to each ``PutOp`` (``False`` skips the store's embedding index).

    Raises:
        TypeError: ``store`` is not a ``BaseStore``.
        ValueError: ``default_namespace`` is not a string or tuple of strings.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> from agentstate_reducer import MessageReducer, ReducerConfig
        >>> store = InMemoryStore()
        >>> reducer = MessageReducer(config=ReducerConfig(
        ...     min_messages=1, max_messages=2, preserve_first=False,
        ...     on_prune=[store_hook(store)]))
        >>> history = [{"role": "user", "content": str(i), "id": f"m{i}"} for i in range(3)]
        >>> _ = reducer.reduce(history, namespace="alice")
        >>> sorted(item.key for item in store.search(("alice",)))
        ['m0', 'm1']
    """
    return StoreHook(store, default_namespace=default_namespace, index=index)


#: Where an edited original can be read back from: the store a :func:`store_hook` writes
#: to (or the hook), or the outbox an ``OutboxHook`` writes to.
OriginalSource = BaseStore | StoreHook | Outbox


def original_sources(value: object) -> list[OriginalSource]:
    """`value` as a list of sources (one, or a non-empty list), checked."""
    if isinstance(value, (BaseStore, StoreHook, Outbox)):
        return [value]
    if isinstance(value, (list, tuple)) and value:
        bad = [v for v in value if not isinstance(v, (BaseStore, StoreHook, Outbox))]
        if not bad:
            return list(value)
        value = bad[0]
    raise ConfigTypeError(
        "store must be a LangGraph BaseStore, a store_hook, an Outbox or a non-empty list "
        f"of them, got {value!r}"
    )


def _labels(store: BaseStore | StoreHook, namespace: Any) -> tuple[BaseStore, tuple[str, ...]]:
    if isinstance(store, StoreHook):
        return store.store, store.default_namespace if namespace is None else _as_namespace(
            namespace, "namespace"
        )
    return store, ("memories",) if namespace is None else _as_namespace(namespace, "namespace")


def _original_text(value: Any) -> str | None:
    """The text of a stored record of an edited original (see ``original_text``, which
    reads the message the record was made from the same way)."""
    if not isinstance(value, dict) or "edited" not in value:
        return None
    content = value.get("content")
    if content:
        return str(content)
    calls = value.get("tool_calls") or []
    return "\n".join(str(call.get("arguments", "")) for call in calls) or ""


def _check_handle(handle: object) -> str:
    if not isinstance(handle, str) or not handle:
        raise ConfigTypeError(f"handle must be a non-empty string, got {handle!r}")
    return handle


def fetch_original(
    store: OriginalSource | Sequence[OriginalSource], handle: str, *, namespace: Any = None
) -> str | None:
    """The original text of a part context editing replaced, read back by its handle.

    Reads where the reducer's hooks put it: a LangGraph store (what :func:`store_hook`
    writes, directly or as the delivery target of an outbox ``Relay``), or an outbox
    (what ``OutboxHook`` stored: pending, delivered or dead-lettered, until purged).
    Given a list, each source is asked in turn, so ``[store, outbox]`` finds an
    original the relay has not delivered yet and one already purged from the outbox.

    Args:
        store: a ``BaseStore``, a :func:`store_hook` (its ``default_namespace`` then
            applies when ``namespace`` is ``None``), an ``Outbox``, or a list of them.
        handle: the ``ctx_...`` handle a placeholder or preview names.
        namespace: the namespace the reduce ran under (for a store, a string is one
            label and ``None`` is the hook's default, ``("memories",)`` for a bare store;
            an outbox takes it as the reduce forwarded it).

    Returns:
        The original's text (for cleared call arguments, their JSON), or ``None`` when
        nothing edited is stored under ``handle`` in any source (not delivered yet, say).

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> fetch_original(InMemoryStore(), "ctx_0123456789abcdef") is None
        True
    """
    return _drive(_fetching(store, handle, namespace))


async def afetch_original(
    store: OriginalSource | Sequence[OriginalSource], handle: str, *, namespace: Any = None
) -> str | None:
    """Async :func:`fetch_original`: ``store.aget`` for stores, an outbox read in a
    worker thread (its clients are synchronous)."""
    return await _adrive(_fetching(store, handle, namespace))


def _fetching(
    store: OriginalSource | Sequence[OriginalSource], handle: str, namespace: Any
) -> Generator[_Call, Any, str | None]:
    """What :func:`fetch_original` does, yielding each read of a source."""
    _check_handle(handle)
    for source in original_sources(store):
        text: str | None
        if isinstance(source, Outbox):
            text = yield _blocking(source.original, handle, namespace)
        else:
            base, labels = _labels(source, namespace)
            item = yield _Call(base.get, base.aget, labels, handle)
            text = None if item is None else _original_text(item.value)
        if text is not None:
            return text
    return None
