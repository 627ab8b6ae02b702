"""MessageReducer: the adapter, the pure plan, then the effects (summary, hooks), sync or async.

The face: the settings, ``plan``, the two drivers ``reduce`` / ``areduce`` and the LangGraph
reducer. The stages it extends are in :mod:`agentstate_reducer.reducing`, one module a stage
(counts, prepare: read, edit and plan, summaries, handover, flow: the one core).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Generic, cast, overload

from ._drivers import _adrive, _drive
from ._merge import PrunedIds, merge_messages, require
from .config import (
    MessageT,
    PinLike,
    ReducerResult,
    RememberFn,
    SummarizeFn,
    SummaryFactory,
    TokenCounterLike,
    agent_config,
)
from .edit import EditOption
from .errors import ConfigTypeError
from .plan import Plan
from .plan.types import ladder_done, over_causes
from .reducing.flow import _Core, reduce_flow
from .reducing.lists import (
    _T,
    OneMessage,
    _message_list,
    as_message_list,
    hard_message_limit,
)
from .reducing.memory import _needs_add_messages
from .reducing.repair import repair_dangling_calls

__all__ = ("MessageReducer", "as_message_list", "hard_message_limit", "repair_dangling_calls")

logger = logging.getLogger("agentstate_reducer")
#: Per reducer, the threads already warned about going over their budget.
_over_budget: weakref.WeakKeyDictionary[MessageReducer, set[str]] = weakref.WeakKeyDictionary()
_over_budget_lock = threading.Lock()
#: Threads remembered per reducer; beyond it, the oldest may be warned about again.
_WARNED_THREADS = 10_000


class _Setting(Generic[_T]):
    """A read-only attribute that reads the reducer's ``config`` field of the same name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type) -> _Setting[_T]: ...
    @overload
    def __get__(self, instance: MessageReducer, owner: type) -> _T: ...
    def __get__(self, instance: MessageReducer | None, owner: type) -> _T | _Setting[_T]:
        if instance is None:
            return self
        value = getattr(instance.config, self.name)
        # A copy, so appending to ``reducer.on_prune`` cannot change the hooks behind its back.
        return cast(_T, list(value) if isinstance(value, list) else value)

    def __set__(self, instance: MessageReducer, value: object) -> None:
        raise AttributeError(
            f"MessageReducer.{self.name} is read-only; build a new reducer with "
            f"MessageReducer(config=ReducerConfig(..., {self.name}={value!r}))"
        )


class MessageReducer(_Core):
    """Bound a message history by count or tokens without splitting tool calls from results.

    Laws, for a reducer without summary injection (tested):

    * ``reduce(existing, new).surviving + pruned`` is an order-preserving partition of
      ``existing + new``;
    * ``reduce(reduce(xs).surviving).pruned == []`` (idempotence);
    * with ``cascade_tool_messages``, no surviving tool result lacks its call.

    Args:
        min_messages: messages to keep after a count-mode prune.
        max_messages: prune when there are more messages than this (``None``: never).
        config: a :class:`ReducerConfig`; overrides ``min_messages``/``max_messages``.

    Example:
        >>> reducer = MessageReducer(min_messages=2, max_messages=4)
        >>> history = [{"role": "system", "content": "be brief"}] + [
        ...     {"role": "user", "content": str(i)} for i in range(5)]
        >>> [m["content"] for m in reducer.reduce(existing=history).surviving]
        ['be brief', '3', '4']
    """

    #: Every :class:`ReducerConfig` field, read-only (``reducer.max_messages``...).
    min_messages: _Setting[int] = _Setting()
    max_messages: _Setting[int | None] = _Setting()
    max_tokens: _Setting[int | None] = _Setting()
    target_tokens: _Setting[int | None] = _Setting()
    token_counter: _Setting[TokenCounterLike | None] = _Setting()
    preserve_first: _Setting[bool] = _Setting()
    cascade_tool_messages: _Setting[bool] = _Setting()
    summarize_fn: _Setting[SummarizeFn | None] = _Setting()
    inject_summary: _Setting[bool] = _Setting()
    summary_message_factory: _Setting[SummaryFactory | None] = _Setting()
    on_prune: _Setting[list[RememberFn]] = _Setting()
    namespace_key: _Setting[str] = _Setting()
    dedupe_on_prune: _Setting[bool] = _Setting()
    dedupe_window: _Setting[int] = _Setting()
    start_on: _Setting[str | None] = _Setting()
    model: _Setting[Any] = _Setting()
    context_window: _Setting[int | str | None] = _Setting()
    tools: _Setting[tuple[Any, ...]] = _Setting()
    system_prompt: _Setting[str | None] = _Setting()
    calibrate_from_usage: _Setting[bool] = _Setting()
    pin: _Setting[PinLike | None] = _Setting()
    context_edits: _Setting[tuple[EditOption, ...]] = _Setting()
    repair_dangling_calls: _Setting[bool] = _Setting()
    turn_ladder: _Setting[bool] = _Setting()
    reasoning: _Setting[str] = _Setting()
    cache_aware: _Setting[bool] = _Setting()


    def __repr__(self) -> str:
        return f"MessageReducer(config={self.config!r})"

    # -- the pure part -----------------------------------------------------------

    def plan(self, messages: list[Any], *, namespace: Any = None) -> Plan:
        """Plan a reduce of ``messages`` without running any effect.

        In token mode every message is counted, so the plan's ``total_tokens`` is exact
        (``reduce()`` counts lazily and may not know it). The budgets are what
        ``max_tokens`` / ``target_tokens`` leave once the request overhead
        (``system_prompt``, ``tools``) is set aside, divided by the calibration factor of
        ``namespace`` (see :meth:`calibrate`); usage reported on the latest ai message is
        learned first.
        """
        messages = _message_list(messages, "plan")
        return self._plan(
            messages, self.config, [], reserve=self._reserve(), namespace=namespace
        )[0]


    # -- the two drivers ---------------------------------------------------------

    @overload
    def reduce(
        self, existing: Sequence[MessageT], new: Sequence[MessageT] | None = None,
        namespace: Any = None,
    ) -> ReducerResult[MessageT]: ...
    @overload
    def reduce(
        self, existing: None, new: Sequence[MessageT], namespace: Any = None
    ) -> ReducerResult[MessageT]: ...
    @overload
    def reduce(
        self, *, new: Sequence[MessageT], namespace: Any = None
    ) -> ReducerResult[MessageT]: ...
    @overload
    def reduce(
        self, existing: Sequence[MessageT], new: OneMessage, namespace: Any = None
    ) -> ReducerResult[MessageT]: ...
    @overload
    def reduce(
        self, existing: OneMessage, new: Sequence[Any] | OneMessage | None = None,
        namespace: Any = None,
    ) -> ReducerResult[Any]: ...
    @overload
    def reduce(
        self, existing: None = None, new: OneMessage | None = None, namespace: Any = None
    ) -> ReducerResult[Any]: ...
    def reduce(
        self, existing: Any = None, new: Any = None, namespace: Any = None
    ) -> ReducerResult[Any]:
        """Concatenate ``existing + new`` and prune if over the threshold.

        With ``inject_summary``, a failing or timed-out ``summarize_fn`` prunes nothing
        (``summary_failed`` says so) unless keeping everything would pass the hard
        limit: ``max_tokens``, or twice ``max_messages`` in count mode.

        Args:
            existing: the current history (a list, one message, or ``None``).
            new: messages to append (a list, one message, or ``None``).
            namespace: forwarded unchanged to every ``on_prune`` hook.

        Returns:
            A :class:`ReducerResult`; the inputs are never mutated.

        Raises:
            MessageFormatError: a message cannot be read (a ``TypeError`` naming its index).
            ConfigTypeError: ``summarize_fn`` or a hook is async; use :meth:`areduce`.
            OutboxError: a durable hook could not store the pruned messages (also
                :class:`UnstorableError`, for a message or namespace it cannot store).
                Other hook errors are logged and skipped. Either way the batch is
                released from the dedupe ledger, so a retried step hands it over again.
        """
        if self._async_callable is not None:
            self._check_sync()
        return _drive(reduce_flow(self, existing, new, namespace))

    @overload
    async def areduce(
        self, existing: Sequence[MessageT], new: Sequence[MessageT] | None = None,
        namespace: Any = None,
    ) -> ReducerResult[MessageT]: ...
    @overload
    async def areduce(
        self, existing: None, new: Sequence[MessageT], namespace: Any = None
    ) -> ReducerResult[MessageT]: ...
    @overload
    async def areduce(
        self, *, new: Sequence[MessageT], namespace: Any = None
    ) -> ReducerResult[MessageT]: ...
    @overload
    async def areduce(
        self, existing: Sequence[MessageT], new: OneMessage, namespace: Any = None
    ) -> ReducerResult[MessageT]: ...
    @overload
    async def areduce(
        self, existing: OneMessage, new: Sequence[Any] | OneMessage | None = None,
        namespace: Any = None,
    ) -> ReducerResult[Any]: ...
    @overload
    async def areduce(
        self, existing: None = None, new: OneMessage | None = None, namespace: Any = None
    ) -> ReducerResult[Any]: ...
    async def areduce(
        self, existing: Any = None, new: Any = None, namespace: Any = None
    ) -> ReducerResult[Any]:
        """Async :meth:`reduce`: the same core, awaiting async ``summarize_fn`` and hooks.

        A :class:`~agentstate_reducer.summary.Summarizer` is awaited through its
        ``acall`` (the model's ``ainvoke``)."""
        return await _adrive(reduce_flow(self, existing, new, namespace))

    # -- LangGraph ---------------------------------------------------------------

    def as_langgraph_reducer(self) -> Callable[[Any, Any], list[Any]]:
        """Return ``(existing, new) -> surviving`` for ``Annotated[list, fn]`` state fields.

        Either argument may be ``None``, one message or a list, and messages are
        concatenated. An update that only LangGraph's ``add_messages`` understands (a
        ``("user", "hi")`` tuple, a string, ``RemoveMessage``, a message whose id is
        already in the list) is merged by ``add_messages`` first, as
        ``agentstate_reducer.langgraph.reducing_add_messages`` does; that needs the
        ``[langgraph]`` extra. For a LangChain agent's state prefer
        ``reducing_add_messages``, which always merges that way.
        """
        merge: Callable[[list[Any], list[Any]], list[Any]] | None = None

        def reduce_messages(existing: Any, new: Any) -> list[Any]:
            nonlocal merge
            left = existing if type(existing) is list else as_message_list(existing)
            # add_messages' reading: a ("user", "hi") tuple is one message.
            right = [new] if isinstance(new, tuple) else as_message_list(new)
            try:
                if not _needs_add_messages(self, left, right):
                    return self.reduce(left, right).surviving
            finally:
                self._checked.list = None  # valid for this call only
            if merge is None:
                merge = _add_messages_merge(self)
            return merge(left, right)

        reduce_messages.__name__ = "agentstate_reducer"
        return reduce_messages


def _add_messages_merge(reducer: MessageReducer) -> Callable[[list[Any], list[Any]], list[Any]]:
    """LangGraph's merge then ``reducer``; removing an id it pruned is a no-op."""
    try:
        require()
    except ImportError as exc:
        raise ImportError(
            "as_langgraph_reducer() merges tuples, strings and RemoveMessage updates with "
            'LangGraph\'s add_messages; install it with pip install "agentstate-reducer[langgraph]"'
        ) from exc
    pruned = PrunedIds(reducer.config.dedupe_window)

    def merge_and_reduce(left: list[Any], right: list[Any]) -> list[Any]:
        result = reducer.reduce(merge_messages(left, right, pruned))
        pruned.add(result.pruned)
        return result.surviving

    return merge_and_reduce


def reducer_or_recipe(reducer: object) -> MessageReducer:
    """``reducer``, or for ``None`` a new reducer of the agent recipe
    (:func:`~agentstate_reducer.agent_config`): what an integration given no reducer runs,
    so its requests stay valid for every provider from the first line."""
    if reducer is None:
        return MessageReducer(config=agent_config())
    if not isinstance(reducer, MessageReducer):
        raise ConfigTypeError(f"reducer must be a MessageReducer, got {reducer!r}")
    return reducer


def warn_once_over_budget(
    reducer: MessageReducer, result: ReducerResult[Any], thread: object
) -> None:
    """Log one warning the first time ``thread`` goes over the budget of ``reducer``.

    The integrations call it after each reduce: ``thread`` is the conversation's key
    (a LangGraph thread id, a session id, a namespace); ``None`` is one thread too.
    """
    if not result.over_budget:
        return
    key = "" if thread is None else str(thread)
    with _over_budget_lock:
        warned = _over_budget.setdefault(reducer, set())
        if key in warned:
            return
        if len(warned) >= _WARNED_THREADS:
            warned.clear()
        warned.add(key)
    settings = reducer.config
    if settings.max_tokens is not None:
        size = f"{result.tokens_after} tokens kept, budget {settings.max_tokens}"
    else:
        size = f"{result.messages_after} messages kept, budget {settings.max_messages}"
    done = ladder_done(
        result.turn_results_cleared, result.turn_inputs_cleared, result.turn_steps_dropped
    )
    logger.warning(
        "agentstate-reducer: thread %r went over its budget (%s): %s%s; requests may exceed "
        "the budget (warned once per thread)",
        key or None,
        size,
        over_causes(result.over_because),
        f"; {done}" if done else "",
    )
