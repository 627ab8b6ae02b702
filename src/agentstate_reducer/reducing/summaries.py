"""Summaries, the decisions without I/O: what ``summarize_fn`` gets, what its reply means,
the block it goes in and its share of the budget, and the fail-closed rule."""

from __future__ import annotations

import bisect
import logging
from collections.abc import Generator, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ..config import ReducerResult
from ..plan import Plan
from ..read import (
    TURN_NOTE_KIND,
    MessageRecord,
    injected_kind,
    is_injected,
    reply_text,
    without_turn_note,
)
from ..summary import (
    DEFAULT_SUMMARY_TOKENS,
    covered,
    default_summary_messages_factory,
    match_shape,
    summary_key,
)
from .effects import _Effect, _Refused, _Summarise
from .lists import _split, hard_message_limit
from .prepare import _Preparing

logger = logging.getLogger("agentstate_reducer")


class _Summary(NamedTuple):
    """The summary of a reduce: what ``summarize_fn`` got (``None``: no summary was
    asked), its text once fitted, whether it failed, and the tokens of its block."""

    batch: list[Any] | None
    text: str | None
    failed: bool
    block: int


def summarise(
    reducer: _Summarising,
    messages: list[Any],
    plan: Plan,
    namespace: Any,
    records: Sequence[MessageRecord] | None = None,
) -> Generator[_Effect, Any, _Summary]:
    """The summary a reduce injects or reports: yields the effect that asks
    ``summarize_fn``, then fits its reply to the block's share of the budget.
    ``records``: the records the reduce read of ``messages``, when it holds them."""
    text: str | None = None
    block = 0
    batch = reducer._to_summarize(messages, plan, records)
    if batch is not None:
        text = yield from reducer._summary(batch)
        if text is not None:
            text, block = reducer._fit(text, batch, plan, namespace)
    return _Summary(batch, text, batch is not None and text is None, block)


class _Summarising(_Preparing):
    """The summary decisions of a reduce."""

    # -- summaries: the decisions, no I/O ------------------------------------------------

    def _to_summarize(
        self, messages: list[Any], plan: Plan, records: Sequence[MessageRecord] | None = None
    ) -> list[Any] | None:
        """What ``summarize_fn`` gets, or ``None`` when this reduce needs no summary."""
        if self.config.summarize_fn is None or not plan.pruned:
            return None
        # A turn note is never summarised: marked, read by its wording, or merged into
        # the question's message (which is summarised as it was asked).
        batch = []
        for i in plan.pruned:
            m = messages[i]
            if injected_kind(m) == TURN_NOTE_KIND:
                continue
            asked = (
                m if is_injected(m)
                else without_turn_note(m, None if records is None else records[i])
            )
            if asked is not None:
                batch.append(asked)
        if not batch or (self.config.inject_summary and all(map(is_injected, batch))):
            return None  # only a previous summary would go: it is never re-summarised alone
        return batch

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
