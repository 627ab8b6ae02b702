"""The result of a reduce: the survivors and the pruned (with the summary block and the
turn note, :meth:`~.summaries._Summarising._outcome`), its figures and what they say of
the budget, the list remembered for the next append, and what the hooks get."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..config import ReducerResult
from ..edit import CLEARED, CLEARED_INPUT, ContextEdit
from ..plan import SUMMARY_BLOCK, SUMMARY_FAILED, WINDOW, Plan
from ..summary import check_summary
from .chains import _Memo
from .lists import _NOTHING_PRUNED, _REASON, _rebuilt
from .prepare import Prepared
from .summaries import _Summarising, _Summary


def result(
    reducer: _Summarising, prepared: Prepared, summary: _Summary, namespace: Any
) -> tuple[ReducerResult[Any], list[Any]]:
    """The result of a reduce whose summary is ``summary``, and what the hooks get."""
    messages, plan, memo, edits, added = prepared
    batch, text, failed, block = summary
    out, handed = _result(reducer, messages, plan, memo, edits, added, text, failed)
    if not (plan.pruned or edits):
        return out, handed  # no summary, nothing pruned or edited: the plan's figures stand
    # What the summary did (a block, a fail-closed keep, a previous block kept) is
    # past the plan's figures.
    out = reducer._said(
        out, namespace, block, SUMMARY_FAILED if out.summary_failed else SUMMARY_BLOCK
    )
    if text is not None and not out.summary_failed and batch is not None:
        check = check_summary(batch, text)
        if check:
            out = _rebuilt(out, summary_missing=check.missing, summary_invented=check.invented)
    return out, handed


def _figures(
    reducer: _Summarising,
    result: ReducerResult[Any],
    messages: list[Any],
    plan: Plan,
    added: list[Any],
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
        counts = reducer.count_tokens(messages)  # cached
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


def _result(
    reducer: _Summarising,
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
        result = reducer._outcome(messages, plan, text, failed)
    else:
        result = _rebuilt(_NOTHING_PRUNED, surviving=messages, pruned=[])
    result = _figures(reducer, result, messages, plan, added)
    reducer._note(messages, plan, memo, result)
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
    if not reducer.config.on_prune or not (result.pruned or edits):
        return result, []
    # An edited original travels under its handle (its id), marked as edited.
    return result, [*result.pruned, *(e.original for e in edits if e.delivers)]
