"""A reducer's state and its counts: the token-count cache, the request overhead, the
calibration learned from reported usage, and the budgets they leave for the messages."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ..config import ReducerConfig, ReducerResult
from ..edit import AppendRule
from ..errors import ConfigError, ConfigTypeError
from ..hooks import DeliveryLedger, HandoffLedger, is_async_callable, namespace_key
from ..read import AI, GROUP_BOUNDARY, MessageRecord, reported_input_tokens
from ..summary import Summarizer, default_summary_messages_factory
from ..tokens import (
    REPLY_PRIMING_TOKENS,
    Calibration,
    TokenCountCache,
    request_overhead,
    resolve_token_counter,
)
from ..tokens.count import _text_counter
from .chains import _Chain
from .lists import _message_list, _rebuilt, as_message_list

#: How far back from the end of a history the latest ai message is looked for, for the
#: usage it reports (past tool results and a new question).
_USAGE_LOOKBACK = 8
#: Threads (namespaces) whose calibration is remembered, and ai messages remembered as
#: observed, at most; the oldest are forgotten first.
_MAX_CALIBRATIONS = 1024
_MAX_OBSERVED = 4096


class _Counting:
    """The state of a :class:`~agentstate_reducer.MessageReducer` and its counting."""

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
        #: ``cache_aware``: per namespace, the first message kept after the latest cut,
        #: as ``(its id, the message)``.
        self._anchors: dict[Any, tuple[Any, Any]] = {}
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
        overhead; each ai message, by id, is observed once. A reply holding a provider's
        compaction is not observed: its usage is the input after the provider compacted.
        """
        n = len(views)
        for i in range(n - 1, max(n - _USAGE_LOOKBACK, 0) - 1, -1):
            if views[i].role != AI:
                continue
            ident = views[i].id
            reported = reported_input_tokens(messages[i]) if ident is not None else None
            if reported is None or i == 0 or views[i].group == GROUP_BOUNDARY:
                return  # a reply that compacted reports the compacted request's input
            if not self._first_sight(ident):
                return
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
            # Not dataclasses.replace: validating every field again (and copying its
            # lists) cost more than planning the append that asked; 1 <= low <= high.
            budget = object.__new__(ReducerConfig)
            budget.__dict__.update(config.__dict__, max_tokens=high, target_tokens=low)
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

    def _part_counter(self) -> Callable[[str], int] | None:
        """How context editing counts a part of a message in token mode: the counter's
        text counter when it is a built-in one (else editing estimates from the message)."""
        return _text_counter(self._cache().counter) if self.config.token_mode else None

    def _count_one(self, message: Any) -> int:
        """One message (an edited copy) counted, and remembered, with this reducer's counter."""
        return self._cache().counts([message])[0]

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
            if reported is None or i == 0 or views[k].group == GROUP_BOUNDARY:
                return  # a reply that compacted reports the compacted request's input
            if not self._first_sight(ident):
                return
            estimated = before + sum(counts[:k]) + self._overhead + REPLY_PRIMING_TOKENS
            self.calibration(namespace).observe(estimated, reported)
            return

    def _first_sight(self, ident: str) -> bool:
        """Whether the ai message ``ident`` is observed for the first time (then it is
        remembered as observed; the oldest of ``_MAX_OBSERVED`` are forgotten first)."""
        with self._calibration_lock:
            if ident in self._observed:
                return False
            self._observed[ident] = None
            if len(self._observed) > _MAX_OBSERVED:
                del self._observed[next(iter(self._observed))]
            return True

    def _said(
        self, result: ReducerResult[Any], namespace: Any, block: int, cause: str
    ) -> ReducerResult[Any]:
        """``result`` with ``over_budget`` and ``over_target`` saying what its survivors
        are: their tokens (``tokens_after``, plus the ``block`` tokens of an injected
        summary) against the budget of ``namespace``, or their number against
        ``max_messages``; ``cause`` joins ``over_because`` when it put them over."""
        config = self.config
        if config.token_mode:
            if result.tokens_after is None:
                return result
            budget = self._budget(namespace)
            assert budget.max_tokens is not None and budget.effective_target_tokens is not None
            kept = result.tokens_after + block
            over, above = kept > budget.max_tokens, kept > budget.effective_target_tokens
        else:
            most = config.max_messages
            over = above = most is not None and result.messages_after > most
        because = result.over_because if above else ()
        if (above and not result.over_target) or (over and not result.over_budget):
            because = (*because, cause) if cause not in because else because
        if (over, above, because) == (result.over_budget, result.over_target, result.over_because):
            return result
        return _rebuilt(result, over_budget=over, over_target=above, over_because=because)
