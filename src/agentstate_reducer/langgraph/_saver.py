"""At persistence: reduce the messages channel of each checkpoint just before it is written."""

from __future__ import annotations

import builtins
import copy
import threading
from collections.abc import (
    AsyncIterator,
    Collection,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from .._drivers import _adrive, _Call, _drive
from ..config import ReducerResult
from ..errors import ConfigError, ConfigTypeError, MessageFormatError
from ..outbox.relay import staged
from ..read import read_message
from ..reducer import MessageReducer, reducer_or_recipe, warn_once_over_budget
from ._joint import Joint, joint_for
from ._retention import DeltaFloors, Retention, retention_for
from ._shared import share_locks
from ._ttl import Sweeper, ThreadTTL

__all__ = ("ReducingSaver", "aapply_reducer", "apply_reducer", "memory_namespace")

#: First label of the namespace used when the run config names none but has a thread id.
MEMORIES = "memories"

# Every storage method a saver may implement; the wrapper claims one only if its inner does.
_STORAGE_METHODS = (
    "put",
    "aput",
    "put_writes",
    "aput_writes",
    "get_tuple",
    "aget_tuple",
    "list",
    "alist",
    "delete_thread",
    "adelete_thread",
    "delete_for_runs",
    "adelete_for_runs",
    "copy_thread",
    "acopy_thread",
    "prune",
    "aprune",
    "get_delta_channel_history",
    "aget_delta_channel_history",
)
_ABSENT = object()
#: ``reducer`` left out: the agent recipe. An explicit ``None`` is refused, as in 0.5.0.
_RECIPE: Any = object()


def memory_namespace(reducer: MessageReducer, config: RunnableConfig | None) -> Any:
    """The namespace a run's pruned messages go to.

    ``config["configurable"][reducer.config.namespace_key]`` when set, else
    ``("memories", thread_id)`` when the run has a thread id, else ``None``.
    """
    configurable = (config or {}).get("configurable") or {}
    namespace = configurable.get(reducer.config.namespace_key)
    if namespace is not None:
        return namespace
    thread_id = configurable.get("thread_id")
    if thread_id is not None:
        return (MEMORIES, str(thread_id))
    return None


def warn_over_budget(
    reducer: MessageReducer, result: ReducerResult[Any], config: RunnableConfig | None
) -> None:
    """Log one warning the first time the thread of ``config`` goes over its budget."""
    if result.over_budget:
        configurable = (config or {}).get("configurable") or {}
        warn_once_over_budget(reducer, result, configurable.get("thread_id"))


def _replace_messages(
    checkpoint: Checkpoint, messages_key: str, result: ReducerResult[Any]
) -> Checkpoint:
    # Pruning, context editing and repairs are the only ways the list changes (an injected
    # summary replaces pruned messages): without any of them there is nothing new to store.
    if not result.pruned and not result.edited and not result.repaired:
        return checkpoint
    reduced = checkpoint.copy()
    reduced["channel_values"] = {
        **checkpoint["channel_values"],
        messages_key: result.surviving,
    }
    return reduced


def _messages_of(checkpoint: Checkpoint, messages_key: str) -> builtins.list[Any] | None:
    value = checkpoint["channel_values"].get(messages_key)
    if not isinstance(value, builtins.list) or (value and not any(map(_is_message, value))):
        # Another kind of list under the key (numbers, strings): not ours to reduce.
        return None
    return value


def _is_message(value: object) -> bool:
    try:
        read_message(value)
    except MessageFormatError:
        return False
    return True


def apply_reducer(
    reducer: MessageReducer,
    checkpoint: Checkpoint,
    config: RunnableConfig | None,
    messages_key: str = "messages",
) -> Checkpoint:
    """Return ``checkpoint`` with its messages channel reduced; the input is never mutated.

    For people writing their own saver: call it in ``put`` before storing. The
    namespace forwarded to the reducer's hooks is :func:`memory_namespace` of ``config``.

    Returns:
        ``checkpoint`` itself when nothing was pruned or edited (or the channel holds no
        list, or a list of which no item is a message, such as numbers or strings), else a
        shallow copy with a new ``channel_values`` holding the survivors.
    """
    messages = _messages_of(checkpoint, messages_key)
    if messages is None:
        return checkpoint
    result = reducer.reduce(messages, namespace=memory_namespace(reducer, config))
    warn_over_budget(reducer, result, config)
    return _replace_messages(checkpoint, messages_key, result)


async def aapply_reducer(
    reducer: MessageReducer,
    checkpoint: Checkpoint,
    config: RunnableConfig | None,
    messages_key: str = "messages",
) -> Checkpoint:
    """Async :func:`apply_reducer`: the same, through ``await reducer.areduce(...)``."""
    messages = _messages_of(checkpoint, messages_key)
    if messages is None:
        return checkpoint
    result = await reducer.areduce(messages, namespace=memory_namespace(reducer, config))
    warn_over_budget(reducer, result, config)
    return _replace_messages(checkpoint, messages_key, result)


def _where(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


_variants: dict[tuple[type, frozenset[str]], type] = {}
_variants_lock = threading.Lock()


def _variant(cls: type, inner_type: type) -> type:
    """``cls``, or a subclass that leaves the base version of each method ``inner_type`` lacks.

    Capability probes (the conformance suite's among them) compare a saver's methods
    with ``BaseCheckpointSaver``'s; this keeps them seeing what the inner saver can do.
    """
    missing = frozenset(
        name
        for name in _STORAGE_METHODS
        if getattr(inner_type, name, None) is getattr(BaseCheckpointSaver, name)
    )
    if not missing:
        return cls
    with _variants_lock:
        variant = _variants.get((cls, missing))
        if variant is None:
            attrs: dict[str, Any] = {name: getattr(BaseCheckpointSaver, name) for name in missing}
            attrs.update(
                __module__=cls.__module__, __qualname__=cls.__qualname__, __doc__=cls.__doc__
            )
            variant = type(cls.__name__, (cls,), attrs)
            _variants[(cls, missing)] = variant
    return variant


class ReducingSaver(BaseCheckpointSaver[Any]):
    """Wrap any checkpoint saver so the messages channel is reduced before each write.

    A thread's storage then grows linearly in turns (each checkpoint holds at most the
    window) instead of quadratically. The graph itself is unchanged: within one run it
    keeps the whole list in memory; the next run starts from the reduced checkpoint.

    Everything but ``put``/``aput`` is delegated. Optional capabilities (``copy_thread``,
    ``delete_for_runs``, ``prune``, ``get_delta_channel_history`` and their async twins,
    ``delete_thread``/``adelete_thread`` too) are implemented by the wrapper
    only when the inner saver implements them, so capability probes see the truth;
    other attributes (``setup``, ``conn``, ...) are read from the inner saver.

    A ``SqliteSaver`` (``AsyncSqliteSaver``) sharing its connection with a
    ``SqliteStore`` (``AsyncSqliteStore``) that a :func:`store_hook` of the reducer
    writes to is given one lock with that store, so a store write never opens its
    transaction inside a checkpoint's (see docs/langgraph.md).

    If the inner saver has a ``reducer`` attribute it reduces on its own: when that is
    ``None`` it is handed ``reducer``, and when it is ``reducer`` already, the wrapper
    passes everything through (:attr:`passthrough`).

    Args:
        inner: the saver that stores the checkpoints.
        reducer: the reducer applied to ``channel_values[messages_key]``; sync
            ``put`` calls ``reduce()``, ``aput`` calls ``areduce()``. Left out: the inner
            saver's own reducer if it holds one, else
            ``MessageReducer(config=agent_config())``, the agent recipe.
        messages_key: the state key of the message list.
        keep_checkpoints: after each write, keep only the newest this many checkpoints of
            the thread's namespace, with their writes and the blobs they reference, and
            delete the older ones through the inner saver's own connection (``None``:
            keep every checkpoint). See docs/langgraph.md for the supported savers.
            A checkpoint a kept one is rebuilt from (``DeltaChannel``) is kept too.
        ttl: time-based retention per thread (:class:`ThreadTTL`: ``idle`` and ``age``
            limits, ``"delete"`` or ``"keep_latest"``), applied by :meth:`sweep` or a
            background sweep, never on a run's path.

    Raises:
        ConfigTypeError: ``inner`` is not a ``BaseCheckpointSaver`` (a ``TypeError``).
        ConfigTypeError: ``reducer`` is not a ``MessageReducer`` (``None`` included); both a
            ``TypeError`` and a ``ValueError``, as 0.5.0 raised ``ValueError`` here.
        ConfigError: ``inner`` already holds a different reducer (two dedupe memories
            would deliver the same pruned messages twice), or ``messages_key`` is empty
            (a ``ValueError``).
        ConfigError: ``keep_checkpoints`` is not an int >= 1, or ``inner`` is a saver
            retention cannot delete from.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from agentstate_reducer import MessageReducer
        >>> saver = ReducingSaver(InMemorySaver(), MessageReducer(10, 20))
        >>> saver.passthrough
        False
    """

    #: The saver that stores the checkpoints.
    inner: BaseCheckpointSaver[Any]
    #: The reducer applied before each write (or handed to the inner saver).
    reducer: MessageReducer
    #: State key of the message list.
    messages_key: str
    #: True when the inner saver reduces on its own and the wrapper only delegates.
    passthrough: bool
    #: Checkpoints kept per thread and namespace (``None``: all of them).
    keep_checkpoints: int | None
    _retention: Retention | None
    _floors: DeltaFloors
    #: When threads expire and what a sweep does then (``None``: never).
    ttl: ThreadTTL | None
    _sweeper: Sweeper | None
    _joint: Joint | None

    def __new__(cls, *args: Any, **kwargs: Any) -> ReducingSaver:
        inner = args[0] if args else kwargs.get("inner")
        if isinstance(inner, BaseCheckpointSaver):
            cls = _variant(cls, type(inner))
        # copy.copy() calls __new__ with no arguments; the class is kept as it was.
        instance: ReducingSaver = object.__new__(cls)
        return instance

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        reducer: MessageReducer = _RECIPE,
        *,
        messages_key: str = "messages",
        keep_checkpoints: int | None = None,
        ttl: ThreadTTL | None = None,
    ) -> None:
        if not isinstance(inner, BaseCheckpointSaver):
            raise ConfigTypeError(f"inner must be a LangGraph BaseCheckpointSaver, got {inner!r}")
        if reducer is _RECIPE:
            held = getattr(inner, "reducer", None)
            reducer = held if isinstance(held, MessageReducer) else reducer_or_recipe(None)
        if not isinstance(reducer, MessageReducer):
            raise ConfigTypeError(f"reducer must be a MessageReducer, got {reducer!r}")
        if not isinstance(messages_key, str) or not messages_key:
            raise ConfigError(f"messages_key must be a non-empty string, got {messages_key!r}")
        held = getattr(inner, "reducer", _ABSENT)
        if held is not _ABSENT and held is not None and held is not reducer:
            raise ConfigError(
                f"inner saver {inner!r} already holds a different reducer ({held!r}); pass "
                "that reducer, since two dedupe memories would deliver pruned messages twice"
            )
        if keep_checkpoints is not None and (
            isinstance(keep_checkpoints, bool)
            or not isinstance(keep_checkpoints, int)
            or keep_checkpoints < 1
        ):
            raise ConfigError(
                f"keep_checkpoints must be None or an int >= 1, got {keep_checkpoints!r}"
            )
        retention = None if keep_checkpoints is None else retention_for(inner, keep_checkpoints)
        if ttl is not None and not isinstance(ttl, ThreadTTL):
            raise ConfigTypeError(f"ttl must be a ThreadTTL or None, got {ttl!r:.80}")
        sweeper = None if ttl is None else Sweeper(inner, ttl)
        if held is None:
            inner.reducer = reducer  # type: ignore[attr-defined]
        share_locks(inner, reducer)
        self.inner = inner
        self.reducer = reducer
        self.messages_key = messages_key
        self.passthrough = held is not _ABSENT
        self.keep_checkpoints = keep_checkpoints
        self._retention = retention
        self._floors = DeltaFloors()
        self.ttl = ttl
        self._sweeper = sweeper
        self._joint = None if self.passthrough else joint_for(inner, reducer)

    def __repr__(self) -> str:
        return (
            f"ReducingSaver(inner={self.inner!r}, reducer={self.reducer!r}, "
            f"messages_key={self.messages_key!r})"
        )

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes the wrapper lacks (setup, conn, ...).
        inner = self.__dict__.get("inner")
        if inner is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(inner, name)

    @property
    def serde(self) -> SerializerProtocol:
        """The inner saver's serializer."""
        return self.inner.serde

    @serde.setter
    def serde(self, value: SerializerProtocol) -> None:
        self.inner.serde = value

    @property
    def config_specs(self) -> builtins.list[Any]:
        return self.inner.config_specs

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> ReducingSaver:
        inner = self.inner.with_allowlist(extra_allowlist)
        if inner is self.inner:
            return self
        clone = copy.copy(self)
        clone.inner = inner
        if self.keep_checkpoints is not None:
            clone._retention = retention_for(inner, self.keep_checkpoints)
        if self.ttl is not None:
            clone._sweeper = Sweeper(inner, self.ttl)
        clone._joint = None if self.passthrough else joint_for(inner, self.reducer)
        return clone

    @property
    def joint_commit(self) -> bool | None:
        """Whether each checkpoint and the messages its reduce pruned are stored in one
        transaction (a ``PostgresSaver`` and a ``PostgresOutbox`` of the reducer's
        ``OutboxHook`` in one database; see docs/outbox.md). A sync saver answers at
        once (asking the database the first time); an ``AsyncPostgresSaver`` answers
        ``None`` until its first ``aput`` asked."""
        joint = self._joint
        if joint is None:
            return False
        if joint.is_async:
            return joint.known
        return joint.decided()

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)

    # -- writes: the only place the wrapper does anything ------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return _drive(self._putting(config, checkpoint, metadata, new_versions, is_async=False))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await _adrive(
            self._putting(config, checkpoint, metadata, new_versions, is_async=True)
        )

    def _putting(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        *,
        is_async: bool,
    ) -> Generator[_Call, Any, RunnableConfig]:
        """Every decision of :meth:`put` (``is_async``: :meth:`aput`), yielding each call to
        the sweeper, the reducer, the joint commit, the inner saver and retention."""
        sweeper, joint, inner = self._sweeper, self._joint, self.inner
        if sweeper is not None:
            metadata = yield _Call(sweeper.before_put, sweeper.abefore_put, config, metadata)
        stored: RunnableConfig
        if (
            joint is not None
            and joint.is_async == is_async
            and (yield _Call(joint.decided, joint.adecided))
        ):
            with staged(joint.outbox) as box:
                try:
                    checkpoint = yield self._reducing(checkpoint, config)
                    if box.rows:
                        stored = yield _Call(
                            joint.put, joint.aput, box, config, checkpoint, metadata, new_versions
                        )
                    else:
                        stored = yield _Call(
                            inner.put, inner.aput, config, checkpoint, metadata, new_versions
                        )
                except BaseException as exc:
                    box.settle(exc)  # the reducer releases the batch for a later reduce
                    raise
                box.settle()
        else:
            if not self.passthrough:
                checkpoint = yield self._reducing(checkpoint, config)
            stored = yield _Call(inner.put, inner.aput, config, checkpoint, metadata, new_versions)
        keep, retention = self.keep_checkpoints, self._retention
        if retention is not None and keep is not None:
            # Keep what a DeltaChannel is rebuilt from.
            parent = config["configurable"].get("checkpoint_id")
            floors = self._floors
            floor = yield from floors.noting(inner, stored, checkpoint, metadata, parent, keep)
            yield _Call(retention.keep_latest, retention.akeep_latest, *_where(stored), keep, floor)
        return stored

    def _reducing(self, checkpoint: Checkpoint, config: RunnableConfig) -> _Call:
        return _Call(
            apply_reducer, aapply_reducer, self.reducer, checkpoint, config, self.messages_key
        )

    # -- retention -------------------------------------------------------------------

    def sweep(self, now: float | None = None) -> builtins.list[str]:
        """Apply ``ttl`` to every stored thread now; returns the ids of the threads it
        deleted (or pruned to their latest checkpoint). ``now``: unix seconds.

        Raises:
            ConfigError: the saver has no ``ttl``.
        """
        return self._need_sweeper().sweep(now)

    async def asweep(self, now: float | None = None) -> builtins.list[str]:
        """Async :meth:`sweep`, through the inner saver's async methods."""
        return await self._need_sweeper().asweep(now)

    def _need_sweeper(self) -> Sweeper:
        if self._sweeper is None:
            raise ConfigError("sweep() needs ReducingSaver(..., ttl=ThreadTTL(...))")
        return self._sweeper

    # -- delegated -----------------------------------------------------------------

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.inner.put_writes(config, writes, task_id, task_path)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self.inner.aput_writes(config, writes, task_id, task_path)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.inner.get_tuple(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.inner.aget_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self.inner.list(config, filter=filter, before=before, limit=limit)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in self.inner.alist(config, filter=filter, before=before, limit=limit):
            yield item

    def delete_thread(self, thread_id: str) -> None:
        self.inner.delete_thread(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.inner.adelete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.inner.delete_for_runs(run_ids)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.inner.adelete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.inner.copy_thread(source_thread_id, target_thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.inner.acopy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.inner.prune(thread_ids, strategy=strategy)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self.inner.aprune(thread_ids, strategy=strategy)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self.inner.get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await self.inner.aget_delta_channel_history(config=config, channels=channels)
