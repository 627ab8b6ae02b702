"""MessageReducer: the adapter, the pure plan, then the effects (summary, hooks), sync or async."""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast, overload

from .config import (
    ReducerConfig,
    ReducerResult,
    RememberFn,
    SummarizeFn,
    SummaryFactory,
    TokenCounterLike,
)
from .errors import OutboxError
from .hooks import DeliveryLedger, is_async_callable
from .messages import is_merge_update, message_id, read_messages
from .plan import Plan, make_plan
from .summary import default_summary_messages_factory, match_shape
from .tokens import TokenCountCache, resolve_token_counter

__all__ = ("MessageReducer", "as_message_list")

logger = logging.getLogger("agentstate_reducer")


def as_message_list(value: Any) -> list[Any]:
    """``None`` -> ``[]``, a list or tuple -> a new list, anything else -> a one-item list.

    A lone dict is one message, never a sequence of its keys.
    """
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


_T = TypeVar("_T")


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


class MessageReducer:
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

    def __init__(
        self,
        min_messages: int = 0,
        max_messages: int | None = None,
        *,
        config: ReducerConfig | None = None,
    ) -> None:
        if config is None:
            config = ReducerConfig(min_messages=min_messages, max_messages=max_messages)
        elif not isinstance(config, ReducerConfig):
            raise TypeError(f"config must be a ReducerConfig, got {config!r}")
        self.config = config
        # Token mode resolves its counter now, so a missing extra for "tiktoken" fails
        # here; count mode resolves one only if count_tokens() is called.
        self._token_counts: TokenCountCache | None = (
            TokenCountCache(resolve_token_counter(config.token_counter))
            if config.token_mode
            else None
        )
        self._token_counts_lock = threading.Lock()
        self._ledger = DeliveryLedger(config.dedupe_window) if config.dedupe_on_prune else None
        # reduce() runs on every state update: find async callables once, not per call.
        named = [(f"on_prune[{i}]", hook) for i, hook in enumerate(config.on_prune)]
        self._async_callable = next(
            (
                (name, fn)
                for name, fn in [("summarize_fn", config.summarize_fn), *named]
                if fn is not None and is_async_callable(fn)
            ),
            None,
        )

    def __repr__(self) -> str:
        return f"MessageReducer(config={self.config!r})"

    # -- the pure part -----------------------------------------------------------

    def plan(self, messages: list[Any]) -> Plan:
        """Plan a reduce of ``messages`` without running any effect."""
        cache = self._token_counts
        if self.config.token_mode and cache is not None:
            # Views and counts of messages seen before come from the cache, so an append
            # loop reads and counts only the new messages.
            views, counts = cache.read(messages)
            return make_plan(views, self.config, counts)
        return make_plan(read_messages(messages), self.config, None)

    def count_tokens(self, messages: list[Any]) -> list[int]:
        """Per-message token counts with this reducer's counter.

        Counts are remembered across calls (see :class:`~agentstate_reducer.tokens.
        TokenCountCache`): a message seen before and not edited since is not counted
        again, and the counter runs at most once per message per call.
        """
        cache = self._token_counts
        if cache is None:
            with self._token_counts_lock:
                if self._token_counts is None:
                    self._token_counts = TokenCountCache(
                        resolve_token_counter(self.config.token_counter)
                    )
                cache = self._token_counts
        return cache.counts(messages)

    def _prepare(self, existing: Any, new: Any) -> tuple[list[Any], list[Any], list[Any], Plan]:
        messages = as_message_list(existing) + as_message_list(new)
        plan = self.plan(messages)
        if not plan.pruned:
            return messages, messages, [], plan
        gone = set(plan.pruned)
        surviving = [m for i, m in enumerate(messages) if i not in gone]
        return messages, surviving, [messages[i] for i in plan.pruned], plan

    def _check_sync(self) -> None:
        if self._async_callable is not None:
            name, fn = self._async_callable
            raise TypeError(
                f"{name} is async ({fn!r}); call 'await reducer.areduce(...)' instead of "
                "reduce()"
            )

    def _inject(self, surviving: list[Any], pruned: list[Any], plan: Plan, text: str) -> list[Any]:
        factory = self.config.summary_message_factory
        if factory is None:
            block = match_shape(default_summary_messages_factory(text, len(pruned)), pruned[0])
        else:
            block = list(factory(text, len(pruned)))
        at = plan.insert_at
        return surviving[:at] + block + surviving[at:]

    def _to_deliver(self, pruned: list[Any]) -> list[Any]:
        if self._ledger is None:
            return list(pruned)
        return self._ledger.claim(pruned)

    # -- sync --------------------------------------------------------------------

    def reduce(self, existing: Any = None, new: Any = None, namespace: Any = None) -> ReducerResult:
        """Concatenate ``existing + new`` and prune if over the threshold.

        Args:
            existing: the current history (a list, one message, or ``None``).
            new: messages to append (a list, one message, or ``None``).
            namespace: forwarded unchanged to every ``on_prune`` hook.

        Returns:
            A :class:`ReducerResult`; the inputs are never mutated.

        Raises:
            MessageFormatError: a message cannot be read (a ``TypeError`` naming its index).
            TypeError: ``summarize_fn`` or a hook is async; use :meth:`areduce`.
            OutboxError: a durable hook could not store the pruned messages. Other
                hook errors are logged and skipped.
        """
        self._check_sync()
        messages, surviving, pruned, plan = self._prepare(existing, new)
        if not pruned:
            return ReducerResult(messages, [], None)
        summary = None
        if self.config.summarize_fn is not None:
            summary = self._summarize(self.config.summarize_fn, pruned)
        if summary is not None and self.config.inject_summary:
            surviving = self._inject(surviving, pruned, plan, summary)
        if self.config.on_prune:
            deliver = self._to_deliver(pruned)
            if deliver:
                try:
                    for i, hook in enumerate(self.config.on_prune):
                        self._run_hook(i, hook, deliver, namespace)
                except OutboxError:
                    self._release(deliver)
                    raise
        return ReducerResult(surviving, pruned, summary)

    def _release(self, deliver: list[Any]) -> None:
        # Nothing was stored durably: let the retried reduce() hand these over again.
        if self._ledger is not None:
            self._ledger.release(deliver)

    @staticmethod
    def _summarize(fn: Callable[[list[Any]], Any], pruned: list[Any]) -> str | None:
        try:
            text = fn(list(pruned))
        except Exception:
            logger.exception("agentstate-reducer: summarize_fn failed; no summary this time")
            return None
        _refuse_awaitable(text, "summarize_fn")
        return _as_summary(text)

    @staticmethod
    def _run_hook(i: int, hook: Callable[..., Any], pruned: list[Any], namespace: Any) -> None:
        try:
            result = hook(list(pruned), namespace)
        except OutboxError:
            raise
        except Exception:
            logger.exception("agentstate-reducer: on_prune[%d] failed; skipped", i)
            return
        _refuse_awaitable(result, f"on_prune[{i}]")

    # -- async -------------------------------------------------------------------

    async def areduce(
        self, existing: Any = None, new: Any = None, namespace: Any = None
    ) -> ReducerResult:
        """Async :meth:`reduce`: the same plan, awaiting async ``summarize_fn`` and hooks."""
        messages, surviving, pruned, plan = self._prepare(existing, new)
        if not pruned:
            return ReducerResult(messages, [], None)
        summary = None
        fn = self.config.summarize_fn
        if fn is not None:
            try:
                text = fn(list(pruned))
                if inspect.isawaitable(text):
                    text = await text
                summary = _as_summary(text)
            except Exception:
                logger.exception("agentstate-reducer: summarize_fn failed; no summary this time")
        if summary is not None and self.config.inject_summary:
            surviving = self._inject(surviving, pruned, plan, summary)
        if self.config.on_prune:
            deliver = self._to_deliver(pruned)
            if deliver:
                for i, hook in enumerate(self.config.on_prune):
                    try:
                        result = hook(list(deliver), namespace)
                        if inspect.isawaitable(result):
                            await result
                    except OutboxError:
                        self._release(deliver)
                        raise
                    except Exception:
                        logger.exception("agentstate-reducer: on_prune[%d] failed; skipped", i)
        return ReducerResult(surviving, pruned, summary)

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
            left = as_message_list(existing)
            # add_messages' reading: a ("user", "hi") tuple is one message.
            right = [new] if isinstance(new, tuple) else as_message_list(new)
            if not _needs_add_messages(left, right):
                return self.reduce(left, right).surviving
            if merge is None:
                merge = _add_messages_merge(self)
            return merge(left, right)

        reduce_messages.__name__ = "agentstate_reducer"
        return reduce_messages


def _needs_add_messages(left: list[Any], right: list[Any]) -> bool:
    if any(is_merge_update(m) for m in right):
        return True
    new_ids = {message_id(m) for m in right}
    new_ids.discard(None)
    return bool(new_ids) and any(message_id(m) in new_ids for m in left)


def _add_messages_merge(reducer: MessageReducer) -> Callable[[list[Any], list[Any]], list[Any]]:
    """LangGraph's merge then ``reducer``; removing an id it pruned is a no-op (lazy import)."""
    try:
        from .langgraph._graph import PrunedIds, merge_messages
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


def _refuse_awaitable(value: object, name: str) -> None:
    """reduce() cannot await: close the coroutine (no 'never awaited' warning) and say so."""
    if inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if close is not None:
            close()
        raise TypeError(f"{name} returned an awaitable; call 'await reducer.areduce(...)' instead")


def _as_summary(text: object) -> str | None:
    if text is None:
        return None
    if isinstance(text, str):
        return text
    content = getattr(text, "content", None)  # a chat model's message
    return content if isinstance(content, str) else str(text)
