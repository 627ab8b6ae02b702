"""The one core of a reduce: a generator of effects that ``reduce()`` and ``areduce()`` only
drive, and the result it returns with its figures."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from typing import Any, NoReturn

from ..config import ReducerResult
from ..edit import CLEARED, CLEARED_INPUT, ContextEdit
from ..plan import SUMMARY_BLOCK, SUMMARY_FAILED, UNSTORED_ORIGINAL, WINDOW, Plan
from ..read import too_deep_among
from ..summary import check_summary
from .chains import _Memo
from .effects import _Flow, _Refused
from .handover import _HandingOver, _Places
from .lists import _NOTHING_PRUNED, _REASON, _concat, _rebuilt


def _too_deep(existing: Any, new: Any) -> NoReturn:
    """Re-raise the ``RecursionError`` being handled as the error naming the message too
    deep to read, count, copy or edit (or as it is, when no message is that deep)."""
    error = too_deep_among(_concat(existing, new))
    if error is None:
        raise  # the RecursionError being handled
    raise error from None


class _Core(_HandingOver):
    """The core of a reduce: from the prepared plan to the result, effects yielded."""

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
        if kept_tokens is not None and len(result.pruned) != len(plan.pruned):
            # A fail-closed summary pruned less than the plan (whose total may be unknown:
            # it counted lazily); the note was not written then.
            counts = self.count_tokens(messages)  # cached
            at = {id(m): i for i, m in enumerate(messages)}
            kept_tokens = sum(counts) - sum(counts[at[id(m)]] for m in result.pruned)
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
        # What the summary did (a block, a fail-closed keep, a previous block kept) is
        # past the plan's figures.
        result = self._said(
            result, namespace, block, SUMMARY_FAILED if result.summary_failed else SUMMARY_BLOCK
        )
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
            unstored = self._unstored(result, messages, edits, namespace)
            if unstored is not result:
                result = self._said(unstored, namespace, block, UNSTORED_ORIGINAL)
        return result

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
            # The turn's figures count the placeholders that stay: a cleared result of a
            # step dropped afterwards is one of the steps dropped.
            body = plan.turn.body
            gone = set(plan.pruned) if plan.dropped_steps else ()
            stay = [e.kind for e in edits if e.index >= body and e.index not in gone]
            result = _rebuilt(
                result,
                edited=edits,
                turn_results_cleared=stay.count(CLEARED),
                turn_inputs_cleared=stay.count(CLEARED_INPUT),
                turn_steps_dropped=plan.dropped_steps,
            )
        if not self.config.on_prune or not (result.pruned or edits):
            return result, []
        # An edited original travels under its handle (its id), marked as edited.
        return result, [*result.pruned, *(e.original for e in edits if e.delivers)]
