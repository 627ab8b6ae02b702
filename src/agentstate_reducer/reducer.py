"""MessageReducer: the adapter, the pure plan, then the effects (summary, hooks), sync or async."""

from __future__ import annotations

import bisect
import dataclasses
import inspect
import logging
import operator
import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable, Generator, Hashable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from itertools import compress, repeat
from typing import Any, Generic, NamedTuple, NoReturn, Protocol, TypeVar, cast, overload

from ._merge import PrunedIds, merge_messages, require
from ._replay import needs_input, replay_survivors
from .config import (
    MessageT,
    PinLike,
    ReducerConfig,
    ReducerResult,
    RememberFn,
    SummarizeFn,
    SummaryFactory,
    TokenCounterLike,
    agent_config,
)
from .edit import (
    CLEARED,
    CLEARED_INPUT,
    AppendRule,
    ContextEdit,
    EditOption,
    edit_messages,
    turn_note,
)
from .errors import ConfigError, ConfigTypeError, MessageFormatError, OutboxError, UnstorableError
from .hooks import (
    NOT_DELIVERED,
    DeliveryLedger,
    HandoffLedger,
    context_keys,
    delivery_key,
    is_async_callable,
    namespace_key,
)
from .plan import (
    SUMMARY_BLOCK,
    UNSTORED_ORIGINAL,
    WINDOW,
    Plan,
    Settled,
    dangling_calls,
    make_plan,
    plan_append,
    settle,
)
from .read import (
    AI,
    MessageRecord,
    copy_state,
    is_injected,
    is_merge_update,
    message_id,
    message_state,
    raw_message_id,
    read_messages,
    reply_text,
    reported_input_tokens,
    synthetic_results,
    too_deep_among,
)
from .reasoning import KEEP
from .summary import (
    DEFAULT_SUMMARY_TOKENS,
    Summarizer,
    check_summary,
    covered,
    default_summary_messages_factory,
    match_shape,
    summary_key,
)
from .tokens import (
    REPLY_PRIMING_TOKENS,
    Calibration,
    TokenCountCache,
    request_overhead,
    resolve_token_counter,
)
from .tokens.cache import LazyCounts
from .tokens.count import _text_counter

__all__ = ("MessageReducer", "as_message_list", "hard_message_limit", "repair_dangling_calls")

logger = logging.getLogger("agentstate_reducer")
#: Per reducer, the threads already warned about going over their budget.
_over_budget: weakref.WeakKeyDictionary[MessageReducer, set[str]] = weakref.WeakKeyDictionary()
_over_budget_lock = threading.Lock()
#: Threads remembered per reducer; beyond it, the oldest may be warned about again.
_WARNED_THREADS = 10_000

#: How far back from the end of a history the latest ai message is looked for, for the
#: usage it reports (past tool results and a new question).
_USAGE_LOOKBACK = 8
#: Threads (namespaces) whose calibration is remembered, and ai messages remembered as
#: observed, at most; the oldest are forgotten first.
_MAX_CALIBRATIONS = 1024
_MAX_OBSERVED = 4096


def as_message_list(value: Any) -> list[Any]:
    """``None`` -> ``[]``, a list or tuple -> a new list, anything else -> a one-item list.

    A lone dict is one message, never a sequence of its keys.
    """
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _message_list(value: Any, name: str) -> list[Any]:
    """``value`` as a list of messages, or the error naming ``name``'s argument."""
    if type(value) is list:
        return value
    if isinstance(value, tuple):
        return list(value)
    # The type only: a message's repr quotes its content.
    raise ConfigTypeError(
        f"{name}(messages): messages must be a list of messages, got a "
        f"{type(value).__name__}; a single message goes in a list"
    )


def hard_message_limit(max_messages: int) -> int:
    """Count mode's hard limit while summaries fail: twice ``max_messages`` messages
    (the summary block included), plus the preserved first message and pinned ones."""
    return 2 * max_messages


def _kept_flags(size: int, pruned: Sequence[int]) -> bytearray:
    """One flag per message, 1 where it stays; built at C speed."""
    flags = bytearray(b"\x01") * size
    for _ in map(flags.__setitem__, pruned, repeat(0)):
        pass
    return flags


def _split(messages: list[Any], pruned: Sequence[int]) -> tuple[list[Any], list[Any]]:
    if pruned and pruned[-1] - pruned[0] == len(pruned) - 1:  # one block: slices
        first, end = pruned[0], pruned[-1] + 1
        return messages[:first] + messages[end:], messages[first:end]
    flags = _kept_flags(len(messages), pruned)
    return list(compress(messages, flags)), list(map(messages.__getitem__, pruned))


def _survivors(items: Sequence[_T], pruned: Sequence[int]) -> list[_T]:
    """The items at the indices ``pruned`` (ascending) does not hold."""
    if not pruned:
        return list(items)
    if pruned[-1] - pruned[0] == len(pruned) - 1:
        return [*items[: pruned[0]], *items[pruned[-1] + 1 :]]
    flags = _kept_flags(len(items), pruned)
    if type(items) is list:
        return list(compress(items, flags))
    return list(map(items.__getitem__, compress(range(len(items)), flags)))  # lazy: no iter


def _rebuilt(result: ReducerResult[Any], **changes: Any) -> ReducerResult[Any]:
    """``dataclasses.replace(result, **changes)`` without the frozen ``__init__``: its
    setattr per field cost more than the rest of an append step. ``changes`` must hold
    a new value for every mutable field the new result should not share."""
    new = object.__new__(ReducerResult)
    new.__dict__.update(result.__dict__, **changes)
    return new


#: The fields of a reduce that pruned nothing, before its figures.
_NOTHING_PRUNED: ReducerResult[Any] = ReducerResult([], [], None)


def _concat(existing: Any, new: Any) -> list[Any]:
    """``as_message_list(existing) + as_message_list(new)`` with one copy in the common case."""
    if type(existing) is list:
        if new is None:
            return existing.copy()
        if type(new) is list:
            return existing + new
    return as_message_list(existing) + as_message_list(new)


_REASON = operator.itemgetter(0)

#: The views and counts a full plan read, kept to remember the list it returns.
_Memo = tuple[list[MessageRecord], "Sequence[int] | None"]

#: How many recent outputs a reducer remembers: one per conversation it serves at once.
_CHAINS = 8


class _Chain(NamedTuple):
    """A list a reduce returned, remembered so that the next reduce of it (or of equal
    copies of it) reads only the new messages."""

    #: ``id()`` of the list handed out. Not the list itself, which its owner frees when
    #: done; if the id is reused, comparing with the prints tells.
    returned: int
    #: Its messages as returned, in ``snapshot[:size]`` (the caller may edit the list it
    #: got in place). Never handed out: an append extends it in place, so a chain of
    #: appends shares one list; a second branch from the same state copies.
    snapshot: list[Any]
    size: int
    #: :func:`_print` of each message of ``snapshot`` when it was remembered, extended
    #: and copied along with it: what a later list is compared with.
    prints: list[Any]
    #: The class of each message, or ``None`` when every one was a plain dict.
    kinds: list[type] | None
    #: Whether every message's fields are its ``__dict__`` (:func:`_by_dict`).
    by_dict: bool
    #: Views and counts of ``snapshot`` when the plan had them, to settle it lazily.
    views: list[MessageRecord] | None
    counts: list[int] | None
    #: The plan's state of ``snapshot``, once computed; ``None`` before.
    settled: Settled | None
    #: ``message id -> (index, message)`` of the snapshot, built when first asked for
    #: and shared along a chain of appends like the snapshot (an entry counts only
    #: while the snapshot holds that message at that index; ids never leave it).
    ids: dict[str, tuple[int, Any]] | None = None


#: An object message's top-level fields, read at C speed.
_FIELDS = operator.attrgetter("__dict__")


def _print(message: Any) -> Any:
    """What a message is recognised by later: a shallow copy of its top-level fields (a
    dict's items, an object's ``__dict__``), sharing every value; for an object without
    ``__dict__``, a :func:`copy_state` of what the reader reads."""
    if isinstance(message, dict):
        return message.copy()
    fields = getattr(message, "__dict__", None)
    if type(fields) is dict:
        return fields.copy()
    return copy_state(message_state(message))


def _fields(message: Any) -> Any:
    """The live side of :func:`_print`, compared with ``==`` against it."""
    if isinstance(message, dict):
        return message
    fields = getattr(message, "__dict__", None)
    if type(fields) is dict:
        return fields
    return message_state(message)


def _kinds(messages: list[Any]) -> list[type] | None:
    """The class of each message, or ``None`` when every one is a plain dict."""
    kinds = list(map(type, messages))
    return None if all(kind is dict for kind in kinds) else kinds


def _by_dict(messages: list[Any]) -> bool:
    """Whether every message is an object (no mapping) whose fields are its ``__dict__``."""
    return all(
        not isinstance(m, dict) and type(getattr(m, "__dict__", None)) is dict for m in messages
    )


def _unchanged(seen: list[Any], chain: _Chain) -> bool:
    """Whether ``seen`` (``chain.size`` messages) holds the chain's messages: the same
    or equal top-level fields, message by message, of the same classes. Plain dicts:
    one C-level list comparison; objects: their classes, then their ``__dict__``, the
    same way."""
    size = chain.size
    prints = chain.prints if len(chain.prints) == size else chain.prints[:size]
    kinds = chain.kinds
    try:
        if kinds is None:
            return bool(seen == prints)
        if list(map(type, seen)) != (kinds if len(kinds) == size else kinds[:size]):
            return False
        return bool(list(map(_FIELDS if chain.by_dict else _fields, seen)) == prints)
    except Exception:  # a field whose == raises (an array, say)
        return False


def _last_unchanged(seen: list[Any], chain: _Chain) -> bool:
    """:func:`_unchanged` of the last message only: which chains are worth comparing."""
    last = chain.size - 1
    kinds = chain.kinds
    message = seen[last]
    try:
        if kinds is not None and type(message) is not kinds[last]:
            return False
        return bool(_fields(message) == chain.prints[last])
    except Exception:
        return False


class _Appended(Sequence[Any]):
    """A chain's messages followed by the new ones, for :func:`plan.plan_append`: it
    asks whether the message that issued a call is still at its index, which holds for
    the chain's own objects, not for the equal copies ``messages`` may hold."""

    def __init__(self, snapshot: list[Any], size: int, messages: list[Any]) -> None:
        self._snapshot, self._size, self._messages = snapshot, size, messages

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._messages)))]
        if 0 <= index < self._size:
            return self._snapshot[index]
        return self._messages[index]


_T = TypeVar("_T")


class _HasContent(Protocol):
    @property
    def content(self) -> Any: ...


class _HasParts(Protocol):
    @property
    def parts(self) -> Any: ...


#: One message where a list is expected (``reduce(history, message)``), as typed: a dict,
#: or an object with ``content`` or ``parts``. Never a list or tuple, so that a list of
#: dicts with ``Any`` values types the result by its messages rather than as ``Any``.
OneMessage = Mapping[str, Any] | _HasContent | _HasParts


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
            raise ConfigTypeError(f"config must be a ReducerConfig, got {config!r}")
        self.config = config
        # Token mode resolves its counter now, so a missing extra for "tiktoken" fails
        # here; count mode resolves one only if count_tokens() is called.
        self._token_counts: TokenCountCache | None = (
            TokenCountCache(resolve_token_counter(config.counter)) if config.token_mode else None
        )
        self._token_counts_lock = threading.Lock()
        # What every request adds to the history (system prompt, tool schemas), counted
        # once; the middleware may add what it sees the agent send.
        self._overhead = (
            request_overhead(
                self._token_counts.counter, tools=config.tools, system_prompt=config.system_prompt
            )
            if self._token_counts is not None
            else 0
        )
        self._calibrations: dict[Any, Calibration] = {}
        self._observed: dict[str, None] = {}
        self._budgets: dict[tuple[int, int | None], ReducerConfig] = {}
        self._calibration_lock = threading.Lock()
        self._summary_reserve: int | None = None
        self._chains: OrderedDict[int, _Chain] = OrderedDict()
        self._chains_lock = threading.Lock()
        #: ``list``: ``(existing, chain)`` that ``as_langgraph_reducer()`` just matched.
        self._checked = threading.local()
        self._ledger = DeliveryLedger(config.dedupe_window) if config.dedupe_on_prune else None
        self._handoffs = HandoffLedger(config.dedupe_window)
        self._edits_append = AppendRule(config) if config.context_edits else None
        # reduce() runs on every state update: find async callables once, not per call.
        named = [(f"on_prune[{i}]", hook) for i, hook in enumerate(config.on_prune)]
        self._async_callable = next(
            (
                (name, fn)
                for name, fn in [("summarize_fn", config.summarize_fn), *named]
                if fn is not None
                and (is_async_callable(fn) or (isinstance(fn, Summarizer) and fn.async_only))
            ),
            None,
        )

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

    def _plan(
        self,
        messages: list[Any],
        config: ReducerConfig,
        keep: list[int],
        *,
        reserve: int,
        namespace: Any = None,
        lazy: bool = False,
        read: tuple[list[MessageRecord], Sequence[int] | None] | None = None,
    ) -> tuple[Plan, list[MessageRecord], Sequence[int] | None]:
        """The plan, with the views and counts it used; ``lazy``: in token mode, messages
        that cannot survive are not counted; ``read``: the views and counts to use. With
        ``self.config``, token mode plans against the budget of ``namespace`` (overhead
        and calibration, see :meth:`plan`)."""
        cache = self._token_counts
        counts: Sequence[int] | None
        if read is not None:  # what the edit step read and counted
            views, counts = read
        elif config.token_mode and cache is not None and lazy:
            views = read_messages(messages)
            counts = LazyCounts.of(cache, messages, views)
        elif config.token_mode and cache is not None:
            # Views and counts of messages seen before come from the cache.
            views, counts = cache.read(messages)
        else:
            views, counts = read_messages(messages), None
        if config.token_mode and counts is not None and config is self.config:
            if config.calibrate_from_usage:
                self._learn(messages, views, counts, namespace)
            config = self._budget(namespace)
        plan = make_plan(views, config, counts, pinned=keep, reserve=reserve)
        if plan.triggered and config.pin is not None:
            # Pins matter only once the threshold is passed: ask the predicate only then.
            pin = config.pin
            if callable(pin):
                pinned = [i for i, m in enumerate(messages) if pin(m)]
            else:
                pinned = [i for i, v in enumerate(views) if v.id is not None and v.id in pin]
            if pinned:
                plan = make_plan(views, config, counts, pinned=[*keep, *pinned], reserve=reserve)
        return plan, views, counts

    # -- budgets and calibration -------------------------------------------------

    def calibration(self, namespace: Any = None) -> Calibration:
        """The :class:`~agentstate_reducer.tokens.Calibration` of ``namespace`` (per thread)."""
        key = namespace_key(namespace)
        with self._calibration_lock:
            found = self._calibrations.get(key)
            if found is None:
                found = self._calibrations[key] = Calibration()
                if len(self._calibrations) > _MAX_CALIBRATIONS:
                    del self._calibrations[next(iter(self._calibrations))]
            return found

    def calibrate(self, messages: Any, reported: Any, *, namespace: Any = None) -> float:
        """Learn from one request: the messages sent and the input tokens the provider reported.

        ``reported`` is the count of input tokens, a usage record (``{"input_tokens": n}``,
        ``{"prompt_tokens": n}``), a raw response carrying one, or the ai message that
        came back (its ``usage_metadata``). The estimate compared with it is the count of
        ``messages`` plus the request overhead (``system_prompt``, ``tools``) and the
        reply priming. Returns the new correction factor of ``namespace``.

        Raises:
            ConfigError: no positive input-token count can be read from ``reported``.
        """
        tokens = reported_input_tokens(reported)
        if tokens is None:
            raise ConfigError(
                "reported must be a positive count of input tokens, a usage record or a "
                f"message with usage_metadata, got {reported!r:.80}"
            )
        return self.calibration(namespace).observe(self.request_tokens(messages), tokens)

    def request_tokens(self, messages: Any) -> int:
        """The estimate of a request holding ``messages``: their counts, the request
        overhead (``system_prompt``, ``tools``) and the reply priming, in the counter's
        tokens (before calibration)."""
        counts = self.count_tokens(as_message_list(messages))
        return sum(counts) + self._overhead + REPLY_PRIMING_TOKENS

    def set_request_overhead(self, *, tools: Any = (), system_prompt: str | None = None) -> int:
        """Count what each request sends besides the history, replacing the config's.

        For integrations that see the request (the agent middleware); returns the tokens.
        """
        cache = self._token_counts
        counter = cache.counter if cache is not None else resolve_token_counter(self.config.counter)
        overhead = request_overhead(
            counter,
            tools=[*self.config.tools, *(tools or ())],
            system_prompt=system_prompt if system_prompt is not None else self.config.system_prompt,
        )
        with self._calibration_lock:
            self._overhead = overhead
        return overhead

    def _learn(
        self, messages: list[Any], views: list[Any], counts: Sequence[int], namespace: Any
    ) -> None:
        """Observe the usage the latest ai message reports for the request that produced it.

        That request held the messages before it (as the reducer left them), plus the
        overhead; each ai message, by id, is observed once.
        """
        n = len(views)
        for i in range(n - 1, max(n - _USAGE_LOOKBACK, 0) - 1, -1):
            if views[i].role != AI:
                continue
            ident = views[i].id
            reported = reported_input_tokens(messages[i]) if ident is not None else None
            if reported is None or i == 0:
                return
            with self._calibration_lock:
                if ident in self._observed:
                    return
                self._observed[ident] = None
                if len(self._observed) > _MAX_OBSERVED:
                    del self._observed[next(iter(self._observed))]
            estimated = sum(counts[:i]) + self._overhead + REPLY_PRIMING_TOKENS
            self.calibration(namespace).observe(estimated, reported)
            return

    def _budget(self, namespace: Any) -> ReducerConfig:
        """The config with its token budgets for the messages alone, in the counter's units."""
        config = self.config
        found = self._calibrations.get(namespace_key(namespace))
        factor = found.factor if found is not None else 1.0
        ceiling = found.ceiling if found is not None else None
        overhead = self._overhead
        if factor == 1.0 and not overhead and ceiling is None:
            return config
        assert config.max_tokens is not None
        whole = config.max_tokens / factor
        share = 1.0 if ceiling is None or ceiling >= whole else ceiling / whole
        high = max(1, int(whole * share) - overhead)
        target = config.target_tokens
        low = (
            None if target is None
            else min(high, max(1, int(target / factor * share) - overhead))
        )
        key = (high, low)
        budget = self._budgets.get(key)
        if budget is None:
            budget = dataclasses.replace(config, max_tokens=high, target_tokens=low)
            if len(self._budgets) > 64:
                self._budgets.clear()
            self._budgets[key] = budget
        return budget

    def _reserve(self) -> int:
        """Tokens kept free for the summary block: the built-in summariser's cap plus
        the block's framing (token mode with ``inject_summary``)."""
        if self._summary_reserve is None:
            fn = self.config.summarize_fn
            cache = self._token_counts
            reserve = 0
            if self.config.inject_summary and isinstance(fn, Summarizer) and cache is not None:
                reserve = fn.max_tokens
                if self.config.summary_message_factory is None:
                    block = default_summary_messages_factory("", 1)
                else:
                    block = list(self.config.summary_message_factory("", 1))
                reserve += sum(cache.counter(m) for m in block)
            self._summary_reserve = reserve
        return self._summary_reserve

    def count_tokens(self, messages: list[Any]) -> list[int]:
        """Per-message token counts with this reducer's counter.

        Counts are remembered across calls (see :class:`~agentstate_reducer.tokens.
        TokenCountCache`): a message seen before and not edited since is not counted
        again, and the counter runs at most once per message per call.
        """
        return self._cache().counts(_message_list(messages, "count_tokens"))

    def _cache(self) -> TokenCountCache:
        cache = self._token_counts
        if cache is None:
            with self._token_counts_lock:
                if self._token_counts is None:
                    self._token_counts = TokenCountCache(
                        resolve_token_counter(self.config.counter)
                    )
                cache = self._token_counts
        return cache

    def _prepare(
        self, existing: Any, new: Any, namespace: Any = None
    ) -> tuple[list[Any], Plan, _Memo | None, tuple[ContextEdit, ...], list[Any]]:
        """``(messages, plan, memo, edits, added)``: ``messages`` holds the synthetic
        results ``added`` for dead calls (``repair_dangling_calls``), right after their
        calls, and the copies context editing made in place of the originals."""
        messages = _concat(existing, new)
        added: list[Any] = []
        if self.config.repair_dangling_calls:
            messages, added = repair_dangling_calls(messages)
        if not added:
            fast = self._append(existing, messages, namespace)
            if fast is not None:
                return messages, fast, None, (), added
        if self.config.context_edits or (self.config.turn_ladder and self.config.token_mode):
            edited, plan, memo, edits = self._prepare_edited(messages, namespace)
            return edited, plan, memo, edits, added
        plan, views, counts = self._plan(
            messages, self.config, [], reserve=self._reserve(), namespace=namespace, lazy=True
        )
        return messages, plan, (views, counts), (), added

    def _part_counter(self) -> Callable[[str], int] | None:
        """How context editing counts a part of a message in token mode: the counter's
        text counter when it is a built-in one (else editing estimates from the message)."""
        return _text_counter(self._cache().counter) if self.config.token_mode else None

    def _count_one(self, message: Any) -> int:
        """One message (an edited copy) counted, and remembered, with this reducer's counter."""
        return self._cache().counts([message])[0]

    def _prepare_edited(
        self, messages: list[Any], namespace: Any = None
    ) -> tuple[list[Any], Plan, _Memo, tuple[ContextEdit, ...]]:
        """Edit first; the plan then sees the edited counts, so it prunes only what is
        still over the threshold. Both count lazily: what neither needs is never counted."""
        counts: Sequence[int] | None = None
        views = read_messages(messages)
        budget = self.config
        if budget.token_mode:
            counts = LazyCounts.of(self._cache(), messages, views)  # read once, not again
            if budget.calibrate_from_usage:
                self._learn(messages, views, counts, namespace)
            budget = self._budget(namespace)  # the edit step fires where the plan prunes
        outcome = edit_messages(
            messages, views, counts, budget, self._count_one, self._part_counter()
        )
        plan, _, _ = self._plan(
            outcome.messages,
            self.config,
            [],
            reserve=self._reserve(),
            namespace=namespace,
            read=(views, outcome.counts),
        )
        note = turn_note(outcome.messages, views, plan.turn, plan.dropped_steps, self.config)
        if note is not None:  # the turn ladder's last rung: one note for the dropped steps
            plan = replace(plan, note=note)
        return outcome.messages, plan, (views, outcome.counts), outcome.edits

    # -- the incremental path: a reduce of the list the last one returned -------------

    def _note(
        self, messages: list[Any], plan: Plan, memo: _Memo | None, result: ReducerResult[Any]
    ) -> None:
        """Remember the list a reduce returns, with the views and counts the plan read."""
        if memo is None:
            return  # the incremental path remembered it already
        views, counts = memo
        surviving = result.surviving
        if surviving is messages:
            if not plan.triggered:  # else over the threshold: the next reduce plans anyway
                self._remember(messages, views, None if counts is None else list(counts))
            return
        chosen = plan.pruned
        if (
            len(result.pruned) == len(chosen)
            and len(surviving) == len(messages) - len(chosen)  # no summary block went in
            and all(map(operator.is_, result.pruned, map(messages.__getitem__, chosen)))
        ):
            self._remember(
                surviving,
                _survivors(views, chosen),
                None if counts is None else _survivors(counts, chosen),
            )
            return
        self._remember(surviving, None, None)  # read again when next needed

    def _append(self, existing: Any, messages: list[Any], namespace: Any = None) -> Plan | None:
        """The plan of ``messages`` when they extend a list this reducer returned (or equal
        copies of it), else ``None``.

        The list must hold the same messages in the same order, each with the same or
        equal top-level fields (see :func:`_unchanged`), followed by the new ones. Then
        only the new messages are read and counted (see :func:`plan.plan_append`); usage
        one of them reports is learned here, and the plan uses the budget it leaves.
        """
        chain = self._match(existing, messages)
        if chain is None:
            return None
        config = self.config
        size, snapshot = chain.size, chain.snapshot
        cache = self._token_counts if config.token_mode else None
        budget = self._budget(namespace) if cache is not None else config
        settled = chain.settled
        if settled is None:
            settled = self._settle(chain, budget)
            if settled is None:
                return None
        new = messages[size:]
        try:
            # (count mode may have a cache too, for what editing counts: not used here)
            if cache is not None:
                new_views, new_counts = cache.read(new)
            else:
                new_views, new_counts = read_messages(new), None
        except MessageFormatError:
            return None  # the full path raises it, naming the index in the whole list
        if cache is not None:
            tokens = settled.tokens
            if config.calibrate_from_usage and new_counts is not None and tokens is not None:
                self._learn_new(tokens, size, new, new_views, new_counts, namespace)
            budget = self._budget(namespace)
            if budget is not config and self._edits_append is not None:
                return None  # the edit step's rule knows only the config's budget
        history = _Appended(snapshot, size, messages)
        got = plan_append(settled, history, new_views, budget, new_counts)
        if got is None:
            return None
        plan, settled = got
        rule = self._edits_append
        if rule is not None and not rule(
            settled.size, settled.tokens, new, new_counts, self._count_one, new_views
        ):
            return None
        ids = chain.ids
        prints, kinds, by_dict = chain.prints, chain.kinds, chain.by_dict
        new_kinds = _kinds(new)
        with self._chains_lock:
            if len(snapshot) == size and len(prints) == size:
                snapshot.extend(new)
                prints.extend(map(_print, new))
            else:  # another append from the same state extended them first
                snapshot = [*snapshot[:size], *new]
                prints = [*prints[:size], *map(_print, new)]
            if kinds is not None or new_kinds is not None:
                by_dict = (by_dict or not size) and _by_dict(new)
                kinds = [*(kinds[:size] if kinds is not None else [dict] * size),
                         *(new_kinds if new_kinds is not None else [dict] * len(new))]
            if ids is not None:
                for k, view in enumerate(new_views):
                    if view.id is not None:
                        ids[view.id] = (size + k, new[k])
        self._keep(
            _Chain(id(messages), snapshot, len(messages), prints, kinds, by_dict, None, None,
                   settled, ids)
        )
        return plan

    def _learn_new(
        self,
        before: int,
        size: int,
        new: list[Any],
        views: list[MessageRecord],
        counts: Sequence[int],
        namespace: Any,
    ) -> None:
        """:meth:`_learn` for an append: the history's ``size`` messages (``before``
        tokens) were learned from when they were new, so only the new ones can hold the
        latest ai message with usage not yet observed."""
        end = size + len(new)
        for k in range(len(new) - 1, -1, -1):
            i = size + k
            if i < end - _USAGE_LOOKBACK:
                return
            if views[k].role != AI:
                continue
            ident = views[k].id
            if ident is None:
                return
            reported = reported_input_tokens(new[k])
            if reported is None or i == 0:
                return
            with self._calibration_lock:
                if ident in self._observed:
                    return
                self._observed[ident] = None
                if len(self._observed) > _MAX_OBSERVED:
                    del self._observed[next(iter(self._observed))]
            estimated = before + sum(counts[:k]) + self._overhead + REPLY_PRIMING_TOKENS
            self.calibration(namespace).observe(estimated, reported)
            return

    def _match(self, existing: Any, messages: list[Any]) -> _Chain | None:
        """The remembered chain whose messages ``messages`` starts with, or ``None``.

        ``existing`` is looked up by identity first; else (a copy) each chain is tried,
        the latest first, those whose last message matches compared in full.
        """
        chains = self._chains
        if not chains:
            return None
        checked: tuple[list[Any], _Chain] | None = getattr(self._checked, "list", None)
        if checked is not None:
            self._checked.list = None
            seen, matched = checked
            if seen is existing and len(existing) == matched.size <= len(messages):
                return matched  # compared a moment ago, in this thread's same call
        with self._chains_lock:
            found = chains.get(id(existing))
            candidates = list(reversed(chains.values()))
        if found is not None:  # (or a list that took the id of one since freed)
            candidates.remove(found)
            candidates.insert(0, found)
        n = len(messages)
        whole = len(existing) if type(existing) is list else -1
        if whole >= 0:  # a chain holding all of existing first, then prefixes
            candidates.sort(key=lambda chain: chain.size != whole)
        fallback = None
        for chain in candidates:
            size = chain.size
            if n < size or (fallback is not None and size != whole):
                continue
            # existing itself in the common case: no copy
            seen = existing if size == whole else messages if n == size else messages[:size]
            if chain is not found and size and not _last_unchanged(seen, chain):
                continue
            if _unchanged(seen, chain):
                if size == whole or whole < 0:
                    return chain
                fallback = chain  # a prefix: a chain holding all of existing may follow
        return fallback

    def _holds_an_id(self, existing: list[Any], ids: set[Any]) -> bool:
        """Whether a message of ``existing`` has one of ``ids``: O(len(ids)) on a list this
        reducer returned (or a copy of it), through an index of its ids kept along its
        appends."""
        chain = self._match(existing, existing)
        if chain is None or chain.size != len(existing):
            return any(message_id(m) in ids for m in existing)
        index = chain.ids
        snapshot = chain.snapshot
        if index is None:
            index = {}
            for i in range(chain.size):
                ident = message_id(snapshot[i])
                if ident is not None:
                    index[ident] = (i, snapshot[i])
            chain = chain._replace(ids=index)
            self._keep(chain)
        # The reduce that follows in the same call need not compare the list again.
        self._checked.list = (existing, chain)
        for ident in ids:
            found = index.get(ident)
            if found is not None:
                at, message = found
                if at < chain.size and snapshot[at] is message:
                    return True
                # Overwritten by another branch from a shared state: ask the list itself.
                return any(message_id(m) in ids for m in existing)
        return False

    def _settle(self, chain: _Chain, budget: ReducerConfig) -> Settled | None:
        views, counts = chain.views, chain.counts
        token_mode = self.config.token_mode and self._token_counts is not None
        if views is None or (token_mode and counts is None):
            history = chain.snapshot[: chain.size]
            if token_mode and self._token_counts is not None:
                views, counts = self._token_counts.read(history)
            else:
                views = read_messages(history)
        settled = settle(views, chain.snapshot, budget, counts)
        rule = self._edits_append
        if settled is not None and rule is not None:
            # The append rule holds only for a history that editing leaves as it is.
            history = chain.snapshot[: chain.size]
            if not rule(settled.size, settled.tokens) or edit_messages(
                history, views, counts, self.config, self._count_one, self._part_counter()
            ).edits:
                return None
        if settled is not None:
            self._keep(chain._replace(views=None, counts=None, settled=settled))
        return settled

    def _remember(
        self, returned: list[Any], views: list[MessageRecord] | None, counts: list[int] | None
    ) -> None:
        kinds = _kinds(returned)
        self._keep(
            _Chain(
                id(returned),
                returned.copy(),
                len(returned),
                list(map(_print, returned)),
                kinds,
                kinds is not None and _by_dict(returned),
                views,
                counts,
                None,
            )
        )

    def _keep(self, chain: _Chain) -> None:
        key = chain.returned
        with self._chains_lock:
            chains = self._chains
            chains[key] = chain
            chains.move_to_end(key)
            while len(chains) > _CHAINS:
                chains.popitem(last=False)

    def _figures(
        self, result: ReducerResult[Any], messages: list[Any], plan: Plan, added: list[Any]
    ) -> ReducerResult[Any]:
        """``result`` with the figures of the reduce; synthetic results are never pruned."""
        pruned = result.pruned
        if added:
            synthetic = {id(m) for m in added}
            pruned = [m for m in pruned if id(m) not in synthetic]
            kept = {id(m) for m in result.surviving}
            added = [m for m in added if id(m) in kept]
        gone: Sequence[int]
        if len(pruned) == len(plan.pruned) and all(
            map(operator.is_, pruned, map(messages.__getitem__, plan.pruned))
        ):
            gone = plan.pruned  # the common case: what the plan chose, no index to build
            by_reason = dict(Counter(map(_REASON, plan.why.values()))) if plan.why else {}
        else:
            at = {id(m): i for i, m in enumerate(messages)} if pruned else {}
            gone = [at[id(m)] for m in pruned]
            by_reason = {}
            for i in gone:
                reason = plan.why.get(i, (WINDOW, None))[0]
                by_reason[reason] = by_reason.get(reason, 0) + 1
        kept_tokens = plan.kept_tokens
        if plan.total_tokens is not None and len(result.pruned) != len(plan.pruned):
            counts = self.count_tokens(messages)  # cached: a fail-closed summary pruned less
            at = {id(m): i for i, m in enumerate(messages)}
            kept_tokens = plan.total_tokens - sum(counts[at[id(m)]] for m in result.pruned)
        return _rebuilt(
            result,
            pruned=pruned,
            messages_before=len(messages) - len(added) - (len(result.pruned) - len(pruned)),
            messages_after=len(result.surviving),
            tokens_before=plan.total_tokens,
            tokens_after=kept_tokens,
            pruned_by_reason=by_reason,
            over_target=plan.over_target,
            over_budget=plan.over_budget,
            over_because=plan.over_because,
            repaired=added,
        )

    def _check_sync(self) -> None:
        if self._async_callable is not None:
            name, fn = self._async_callable
            raise _Refused(
                f"{name} is async ({fn!r}); call 'await reducer.areduce(...)' instead of "
                "reduce()"
            )

    # -- summaries: the decisions, no I/O ------------------------------------------------

    def _to_summarize(self, messages: list[Any], plan: Plan) -> list[Any] | None:
        """What ``summarize_fn`` gets, or ``None`` when this reduce needs no summary."""
        if self.config.summarize_fn is None or not plan.pruned:
            return None
        pruned = [messages[i] for i in plan.pruned]
        if self.config.inject_summary and all(is_injected(m) for m in pruned):
            return None  # only a previous summary would go: it is never re-summarised alone
        return pruned

    def _outcome(
        self, messages: list[Any], plan: Plan, text: str | None, failed: bool
    ) -> ReducerResult[Any]:
        """The result of a reduce whose summary (if any) is ``text``."""
        if not plan.pruned:
            return ReducerResult(messages, [], None)
        config = self.config
        if config.summarize_fn is not None and config.inject_summary:
            if failed:
                return self._fail_closed(messages, plan)
            if text is None:  # nothing to fold: the previous summary stays where it is
                return ReducerResult(messages, [], None)
        surviving, pruned = _split(messages, plan.pruned)
        if plan.note is not None:
            index, note, replaces = plan.note
            at = index - bisect.bisect_left(plan.pruned, index)
            surviving[at : at + replaces] = [note]
        if text is not None and config.inject_summary:
            at = plan.insert_at
            surviving[at:at] = self._block(text, pruned)
        return ReducerResult(surviving, pruned, text, failed)

    def _block(self, text: str, pruned: list[Any]) -> list[Any]:
        count = covered(pruned)
        factory = self.config.summary_message_factory
        if factory is not None:
            return list(factory(text, count))
        block = default_summary_messages_factory(text, count, key=summary_key(pruned))
        return match_shape(block, next((m for m in pruned if not is_injected(m)), pruned[0]))

    def _fail_closed(self, messages: list[Any], plan: Plan) -> ReducerResult[Any]:
        """The summary failed: keep everything unless that passes the hard limit, then
        prune only what the limit forces (never the previous summary), without one."""
        config = self.config
        keep = [i for i in plan.pruned if is_injected(messages[i])]
        if config.max_tokens is not None:
            hard = replace(config, target_tokens=None)
            limit = f"max_tokens={config.max_tokens}"
        else:
            assert config.max_messages is not None  # a count-mode prune happened
            bound = hard_message_limit(config.max_messages)
            if len(messages) - plan.start <= bound:
                return self._kept(messages, plan)
            # The summary block counts towards the bound; the preserved first adds one.
            rest = max(0, bound - len(keep))
            hard = replace(config, min_messages=rest, max_messages=rest)
            limit = f"{bound} messages"
        forced = self._plan(messages, hard, keep, reserve=0)[0]
        if not forced.pruned:
            return self._kept(messages, plan)
        logger.warning(
            "agentstate-reducer: no summary, and keeping everything would pass %s: pruned "
            "%d messages without a summary",
            limit,
            len(forced.pruned),
        )
        surviving, pruned = _split(messages, forced.pruned)
        return ReducerResult(surviving, pruned, None, summary_failed=True)

    @staticmethod
    def _kept(messages: list[Any], plan: Plan) -> ReducerResult[Any]:
        logger.warning(
            "agentstate-reducer: no summary; kept the %d messages it would have pruned "
            "(the next prune retries)",
            len(plan.pruned),
        )
        return ReducerResult(messages, [], None, summary_failed=True)

    def _claim(
        self, pruned: list[Any], namespace: Any, places: _Places
    ) -> tuple[list[Any], list[Hashable] | None]:
        """What of ``pruned`` was never delivered, claimed, with its ledger keys."""
        # A summary (or its acknowledgement) this package injected is not conversation:
        # long-term memory never receives it.
        conversation = [m for m in pruned if not is_injected(m)]
        if self._ledger is None or not conversation:
            return conversation, None
        keys = places.keys(conversation, namespace)
        fresh = self._ledger.claim(conversation, namespace, keys=keys)
        if len(fresh) == len(conversation):
            return fresh, keys
        taken = {id(m) for m in fresh}
        return fresh, [k for m, k in zip(conversation, keys, strict=True) if id(m) in taken]

    def _release(self, deliver: list[Any], namespace: Any, keys: list[Hashable] | None) -> None:
        # Not every hook took the batch: let a later reduce() hand it over again.
        if self._ledger is not None:
            self._ledger.release(deliver, namespace, keys=keys)

    # -- the one core: a generator of effects; reduce() and areduce() only drive it --

    def _start(self, existing: Any, new: Any, namespace: Any) -> ReducerResult[Any] | _Flow:
        """The result when the reduce has no effect to run, else the core that runs them."""
        try:
            messages, plan, memo, edits, added = self._prepare(existing, new, namespace)
        except RecursionError:
            _too_deep(existing, new)
        if not plan.pruned and not edits:
            return self._result(messages, plan, memo, edits, added, None, False)[0]
        return self._flow(existing, new, namespace, messages, plan, memo, edits, added)

    def _flow(
        self,
        existing: Any,
        new: Any,
        namespace: Any,
        messages: list[Any],
        plan: Plan,
        memo: _Memo | None,
        edits: tuple[ContextEdit, ...],
        added: list[Any],
    ) -> _Flow:
        """Every decision of a reduce with effects: it yields "summarise this batch" and
        "hand this batch to hook i", is sent each effect's value (or thrown its error),
        and returns the result. No I/O: the drivers run the effects."""
        text: str | None = None
        failed = False
        block = 0
        batch = self._to_summarize(messages, plan)
        if batch is not None:
            text = yield from self._summary(batch)
            if text is not None:
                text, block = self._fit(text, batch, plan, namespace)
            failed = text is None
        result, handed = self._result(messages, plan, memo, edits, added, text, failed)
        if (
            block
            and result.tokens_after is not None
            and result.tokens_after + block > self._budget(namespace).max_tokens
        ):
            because = (*result.over_because, SUMMARY_BLOCK)
            result = _rebuilt(result, over_budget=True, over_because=because)
        if text is not None and not result.summary_failed and batch is not None:
            check = check_summary(batch, text)
            if check:
                result = _rebuilt(
                    result, summary_missing=check.missing, summary_invented=check.invented
                )
        if handed:
            places = _Places(existing, new, edits, messages, added)
            yield from self._hand_over(handed, namespace, places, edits)
        if edits and self.config.on_prune:
            result = self._unstored(result, messages, edits, namespace)
        return result

    def _summary(self, batch: list[Any]) -> Generator[_Effect, Any, str | None]:
        """The summary of ``batch``, or ``None`` when ``summarize_fn`` failed: it raised,
        or its reply is no text (a string, or a message holding some) or blank; logged."""
        fn = self.config.summarize_fn
        assert fn is not None
        try:
            reply = yield _Summarise(fn, batch)
            text = reply_text(reply, strict=True)
        except _Refused:
            raise
        except Exception:
            logger.warning(
                "agentstate-reducer: summarize_fn failed; no summary this time", exc_info=True
            )
            return None
        if text is None or not text.strip():
            # The type only: the reply may quote the conversation.
            what = "blank text" if text is not None else f"a {type(reply).__name__}, not text"
            logger.warning(
                "agentstate-reducer: summarize_fn returned %s; no summary this time", what
            )
            return None
        return text

    def _fit(
        self, text: str, batch: list[Any], plan: Plan, namespace: Any
    ) -> tuple[str | None, int]:
        """``(text, tokens of its block)``, the text cut at a line break to the summary's
        share of ``max_tokens`` (token mode with ``inject_summary``), or ``None`` when no
        part of it fits. The share is what the survivors leave, and never less than the
        block's framing plus :data:`~agentstate_reducer.summary.DEFAULT_SUMMARY_TOKENS`
        (a quarter of a smaller budget): a summary beside an over-budget current turn
        still goes in, and the result then says ``over_budget``."""
        config = self.config
        if not (config.token_mode and config.inject_summary) or plan.kept_tokens is None:
            return text, 0
        budget = self._budget(namespace).max_tokens
        assert budget is not None
        counter = self._cache().counter

        def size(candidate: str) -> int:
            return sum(counter(m) for m in self._block(candidate, batch))

        tokens = size(text)
        if tokens <= budget - plan.kept_tokens:
            return text, tokens
        share = max(budget - plan.kept_tokens, size("") + min(DEFAULT_SUMMARY_TOKENS, budget // 4))
        if tokens <= share:
            return text, tokens
        # No token is longer than 16 characters in any counter here: a bound to start from.
        low, high = 0, min(len(text), 16 * share + 16)
        if size(text[:high]) <= share:
            low = high
        while high - low > 1:
            middle = (low + high) // 2
            if size(text[:middle]) <= share:
                low = middle
            else:
                high = middle
        cut = text[:low]
        if "\n" in cut.strip():
            cut = cut[: cut.rstrip().rindex("\n")]
        if not cut.strip():
            logger.warning(
                "agentstate-reducer: the summary block (%d tokens) has no room in its share "
                "of max_tokens (%d tokens); no summary this time",
                tokens,
                share,
            )
            return None, 0
        logger.warning(
            "agentstate-reducer: the summary block is %d tokens, its share of max_tokens "
            "%d: cut at a line break",
            tokens,
            share,
        )
        return cut, size(cut)

    def _hand_over(
        self,
        handed: list[Any],
        namespace: Any,
        places: _Places,
        edits: tuple[ContextEdit, ...],
    ) -> Generator[_Effect, Any, None]:
        """Hand what was not delivered before to every hook, in order: the pruned
        messages the ledger has not seen, the edited originals not pending or stored. A
        hook that raised is logged and skipped; an :class:`OutboxError` propagates.
        Unless every hook took the batch, it is released for a later reduce; a hook that
        returns a :class:`~concurrent.futures.Future` (``Background``) took it once that
        is done."""
        originals = {id(e.original) for e in edits}
        pruned = [m for m in handed if id(m) not in originals]
        deliver, keys = self._claim(pruned, namespace, places)
        fresh = self._handoffs.claim([e.original for e in edits], namespace) if edits else []
        batch = [*deliver, *(m for m, _ in fresh)]
        if not batch:
            return
        done = False
        receipts: list[Future[Any]] = []
        try:
            taken = True
            for i, hook in enumerate(self.config.on_prune):
                try:
                    got = yield _Hand(i, hook, batch, namespace)
                except UnstorableError as exc:
                    _raise_placed(exc, batch, places)
                except (OutboxError, _Refused):
                    raise
                except Exception as exc:
                    _log_hook_error(i, exc, batch)
                    taken = False
                else:
                    taken = taken and got is not NOT_DELIVERED
                    if isinstance(got, Future):
                        receipts.append(got)
            done = taken
        finally:
            # An OutboxError, Ctrl-C, a cancelled task, a hook that failed or dropped it.
            if not done:
                self._release(deliver, namespace, keys)
                self._handoffs.forget(fresh)
        if receipts:
            self._when_done(receipts, deliver, keys, fresh, namespace)
        else:
            self._handoffs.stored(fresh)

    def _when_done(
        self,
        receipts: list[Future[Any]],
        deliver: list[Any],
        keys: list[Hashable] | None,
        fresh: list[tuple[Any, Hashable]],
        namespace: Any,
    ) -> None:
        """Once every receipt is done: the originals are stored, or (one failed) the
        batch is released and its originals forgotten, for a later reduce."""
        left = [len(receipts), 0]  # receipts not done, failures
        lock = threading.Lock()

        def settle(receipt: Future[Any]) -> None:
            failed = receipt.cancelled() or receipt.exception() is not None
            with lock:
                left[0] -= 1
                left[1] += failed
                first_failure = failed and left[1] == 1
                all_stored = left[0] == 0 and left[1] == 0
            if first_failure:
                self._release(deliver, namespace, keys)
                self._handoffs.forget(fresh)
            elif all_stored:
                self._handoffs.stored(fresh)

        for receipt in receipts:
            receipt.add_done_callback(settle)

    def _unstored(
        self,
        result: ReducerResult[Any],
        messages: list[Any],
        edits: tuple[ContextEdit, ...],
        namespace: Any,
    ) -> ReducerResult[Any]:
        """``result`` with each surviving message whose edited original is not stored
        yet as it was before the edit: an edit never outlives its original. A later
        reduce edits it again, and hands the original over if it was not."""
        back: dict[int, Any] = {}
        for edit in edits:
            if not self._handoffs.is_stored(edit.original, namespace):
                back[id(messages[edit.index])] = edit._source
        if not back:
            return result
        surviving = [back.get(id(m), m) for m in result.surviving]
        restored = [(m, e) for m, e in zip(result.surviving, surviving, strict=True) if m is not e]
        if not restored:
            return result  # the edited copies were pruned: they leave the state anyway
        put_back = {id(m) for m, _ in restored}
        kept = tuple(e for e in result.edited if id(messages[e.index]) not in put_back)
        changes: dict[str, Any] = {"surviving": surviving, "edited": kept}
        if result.tokens_after is not None:
            grown = sum(self._count_one(old) - self._count_one(new) for new, old in restored)
            tokens = result.tokens_after + grown
            budget = self._budget(namespace)
            changes["tokens_after"] = tokens
            if tokens > budget.max_tokens and not result.over_budget:
                changes["over_budget"] = True
                changes["over_because"] = (*result.over_because, UNSTORED_ORIGINAL)
            target = budget.effective_target_tokens
            changes["over_target"] = result.over_target or (target is not None and tokens > target)
        self._remember(surviving, None, None)
        return _rebuilt(result, **changes)

    def _result(
        self,
        messages: list[Any],
        plan: Plan,
        memo: _Memo | None,
        edits: tuple[ContextEdit, ...],
        added: list[Any],
        text: str | None,
        failed: bool,
    ) -> tuple[ReducerResult[Any], list[Any]]:
        """The result of a reduce (remembered for the next append) and what the hooks get."""
        if memo is None and not (plan.pruned or edits or added):
            # An append the incremental path planned (and remembered): only figures.
            n = len(messages)
            unchanged = _rebuilt(
                _NOTHING_PRUNED,
                surviving=messages,
                pruned=[],
                messages_before=n,
                messages_after=n,
                tokens_before=plan.total_tokens,
                tokens_after=plan.kept_tokens,
                pruned_by_reason={},
                over_target=plan.over_target,
                over_budget=plan.over_budget,
                over_because=plan.over_because,
                repaired=[],
            )
            return unchanged, []
        if plan.pruned or edits:
            result = self._outcome(messages, plan, text, failed)
        else:
            result = _rebuilt(_NOTHING_PRUNED, surviving=messages, pruned=[])
        result = self._figures(result, messages, plan, added)
        self._note(messages, plan, memo, result)
        if edits or plan.dropped_steps:
            body = plan.turn.body
            result = _rebuilt(
                result,
                edited=edits,
                turn_results_cleared=sum(e.kind == CLEARED and e.index >= body for e in edits),
                turn_inputs_cleared=sum(e.kind == CLEARED_INPUT and e.index >= body for e in edits),
                turn_steps_dropped=plan.dropped_steps,
            )
        if not self.config.on_prune or not (result.pruned or edits):
            return result, []
        # An edited original travels under its handle (its id), marked as edited.
        return result, [*result.pruned, *(e.original for e in edits if e.delivers)]

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
        step = self._start(existing, new, namespace)
        result = step if isinstance(step, ReducerResult) else _drive(step)
        return self._replay(existing, new, result)

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
        step = self._start(existing, new, namespace)
        result = step if isinstance(step, ReducerResult) else await _adrive(step)
        return self._replay(existing, new, result)

    def _replay(self, existing: Any, new: Any, result: ReducerResult[Any]) -> ReducerResult[Any]:
        """``result`` with the survivors the ``reasoning`` policy sends (remembered for
        the next append, read again when next needed)."""
        config = self.config
        if config.reasoning == KEEP:
            return result
        messages = _concat(existing, new) if needs_input(config) else None
        count = self._cache().counts if config.token_mode else None
        replayed = replay_survivors(config, result, messages, count)
        if replayed is None:
            return result
        self._remember(replayed.surviving, None, None)
        return replayed

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


def _needs_add_messages(reducer: MessageReducer, left: list[Any], right: list[Any]) -> bool:
    if any(map(is_merge_update, right)):
        return True
    new_ids = set(map(message_id, right))
    new_ids.discard(None)
    return bool(new_ids) and reducer._holds_an_id(left, new_ids)


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


def _log_hook_error(i: int, exc: Exception, pruned: list[Any]) -> None:
    # Ids and types only: an error's text may quote message content.
    logger.error(
        "agentstate-reducer: on_prune[%d] failed on %d message(s) (ids %s): %s; skipped, "
        "released for the next reduce",
        i,
        len(pruned),
        [message_id(m) for m in pruned[:20]],
        type(exc).__name__,
    )


class _Places:
    """Where a message handed to the hooks sits in ``existing + new`` (asked on errors),
    and in the conversation (its ledger key)."""

    def __init__(
        self,
        existing: Any,
        new: Any,
        edits: tuple[ContextEdit, ...],
        messages: list[Any],
        added: list[Any],
    ) -> None:
        self._parts = existing, new, edits
        #: The list the plan saw (edited copies, synthetic results), and the synthetic ones.
        self._messages = messages
        self._added = added

    def of(self, message: object) -> int | None:
        existing, new, edits = self._parts
        for i, m in enumerate(_concat(existing, new)):
            if m is message:
                return i
        # An edited original travels as a copy: the index of the message it was made of.
        return next((e.index for e in edits if e.original is message), None)

    def keys(self, batch: list[Any], namespace: Any) -> list[Hashable]:
        """The ledger keys of ``batch`` (in conversation order, edited originals after):
        an id-less message is keyed by its place (:func:`~agentstate_reducer.hooks.
        context_keys`) among the messages as they were before any edit, reducer-made
        ones left out, so a key never changes with what editing or repair did."""
        if all(raw_message_id(m) is not None for m in batch):
            return [delivery_key(m, namespace) for m in batch]
        messages = self._messages
        positions: list[int | None] = []
        j = 0
        for m in batch:
            k = j
            if raw_message_id(m) is None:
                # The same object may sit at two places: the next one after the last found.
                while k < len(messages) and messages[k] is not m:
                    k += 1
            if k >= len(messages) or messages[k] is not m:
                positions.append(None)
                continue
            positions.append(k)
            j = k + 1
        conversation: list[Any] = list(messages)
        for edit in self._parts[2]:
            conversation[edit.index] = edit._source
        if self._added:
            made = {id(m) for m in self._added}
            conversation = [None if id(m) in made else m for m in conversation]
        wanted = sorted({p for p in positions if p is not None})
        found = dict(zip(wanted, context_keys(conversation, wanted, namespace), strict=True))
        return [
            delivery_key(m, namespace) if p is None else found[p]
            for m, p in zip(batch, positions, strict=True)
        ]


def _raise_placed(error: UnstorableError, batch: list[Any], places: _Places | None) -> NoReturn:
    """Raise ``error`` with the index of the message at fault in ``existing + new``, not
    in the batch the hook was given (which the dedupe ledger may have shortened)."""
    k = error.index
    where = None
    if places is not None and k is not None and 0 <= k < len(batch):
        where = places.of(batch[k])
    if where is None:
        raise error
    placed = UnstorableError(
        f"message at index {where} of existing + new (index {k} of the pruned batch), "
        f"{error.detail}"
    )
    placed.index, placed.detail = where, error.detail
    raise placed from error


def _too_deep(existing: Any, new: Any) -> NoReturn:
    """Re-raise the ``RecursionError`` being handled as the error naming the message too
    deep to read, count, copy or edit (or as it is, when no message is that deep)."""
    error = too_deep_among(_concat(existing, new))
    if error is None:
        raise  # the RecursionError being handled
    raise error from None


def repair_dangling_calls(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """``(repaired, added)``: a new list with a synthetic result right after each dead
    call's ai message (see :func:`~agentstate_reducer.plan.dangling_calls`), and those
    results; ``messages`` itself when there is no dead call."""
    dead = dangling_calls(read_messages(messages))
    if not dead:
        return messages, []
    out: list[Any] = []
    added: list[Any] = []
    at = 0
    for index, calls in dead:
        out.extend(messages[at : index + 1])
        results = synthetic_results(messages[index], calls)
        out.extend(results)
        added.extend(results)
        at = index + 1
    out.extend(messages[at:])
    return out, added


class _Refused(ConfigTypeError):
    """An async callable met the sync :meth:`MessageReducer.reduce`: never a failed summary
    or a skipped hook, always raised."""


def _refuse_awaitable(value: object, name: str) -> None:
    """reduce() cannot await: close the coroutine (no 'never awaited' warning) and say so."""
    if inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if close is not None:
            close()
        raise _Refused(
            f"{name} returned an awaitable; call 'await reducer.areduce(...)' instead"
        )


# -- effects and their drivers -------------------------------------------------------


class _Summarise(NamedTuple):
    """Effect: the reply of ``fn`` to a copy of ``batch``."""

    fn: SummarizeFn
    batch: list[Any]

    def call(self) -> Any:
        reply = self.fn(list(self.batch))
        _refuse_awaitable(reply, "summarize_fn")
        return reply

    async def acall(self) -> Any:
        if isinstance(self.fn, Summarizer):
            return await self.fn.acall(list(self.batch))
        reply = self.fn(list(self.batch))
        return (await reply) if inspect.isawaitable(reply) else reply


class _Hand(NamedTuple):
    """Effect: what ``on_prune[position]`` returns for a copy of ``batch``."""

    position: int
    hook: RememberFn
    batch: list[Any]
    namespace: Any

    def call(self) -> Any:
        got = self.hook(list(self.batch), self.namespace)
        _refuse_awaitable(got, f"on_prune[{self.position}]")
        return got

    async def acall(self) -> Any:
        got = self.hook(list(self.batch), self.namespace)
        return (await got) if inspect.isawaitable(got) else got


_Effect = _Summarise | _Hand
#: The core of a reduce: yields effects, is sent their values, returns the result.
_Flow = Generator[_Effect, Any, ReducerResult[Any]]


def _drive(flow: _Flow) -> ReducerResult[Any]:
    """The sync driver: run each effect; send back its value, or throw in its error
    (the core decides what an error means, and what propagates)."""
    try:
        effect = next(flow)
        while True:
            try:
                value = effect.call()
            except BaseException as exc:
                effect = flow.throw(exc)
            else:
                effect = flow.send(value)
    except StopIteration as stop:
        return cast(ReducerResult[Any], stop.value)


async def _adrive(flow: _Flow) -> ReducerResult[Any]:
    """The async driver: :func:`_drive`, awaiting each effect."""
    try:
        effect = next(flow)
        while True:
            try:
                value = await effect.acall()
            except BaseException as exc:
                effect = flow.throw(exc)
            else:
                effect = flow.send(value)
    except StopIteration as stop:
        return cast(ReducerResult[Any], stop.value)


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
    logger.warning(
        "agentstate-reducer: thread %r went over its budget (%s) because of: %s; requests "
        "may exceed the budget (warned once per thread)",
        key or None,
        size,
        ", ".join(result.over_because) or "messages that are never pruned",
    )
