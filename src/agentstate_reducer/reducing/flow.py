"""The one core of a reduce: the stages in order, as a generator of effects that
``reduce()`` and ``areduce()`` only drive."""

from __future__ import annotations

from typing import Any, NoReturn

from ..read import too_deep_among
from .effects import _Flow, _Refused
from .handover import _HandingOver, hand_over
from .lists import _concat
from .prepare import prepare
from .replay import replay
from .result import result
from .summaries import summarise


def reduce_flow(reducer: _Core, existing: Any, new: Any, namespace: Any) -> _Flow:
    """One reduce, stage by stage: ``existing + new`` repaired, read, edited and planned
    (:func:`~.prepare.prepare`), the summary (:func:`~.summaries.summarise`), the result
    (:func:`~.result.result`), the hand-over to the hooks (:func:`~.handover.hand_over`),
    the reasoning replay policy on the survivors (:func:`~.replay.replay`).

    Every decision and no I/O: it yields "summarise this batch" and "hand this batch to
    hook i", is sent each effect's value (or thrown its error), and returns the result.
    """
    inputs = _concat(existing, new)
    try:
        prepared = prepare(reducer, existing, inputs, namespace)
    except RecursionError:
        _too_deep(inputs)
    records = None if prepared.memo is None else prepared.memo[0]
    summary = yield from summarise(
        reducer, prepared.messages, prepared.plan, namespace, records
    )
    done, handed = result(reducer, prepared, summary, namespace)
    done = yield from hand_over(
        reducer, done, handed, inputs, prepared, summary.block, namespace
    )
    return replay(reducer, done, inputs, namespace)


def _too_deep(inputs: list[Any]) -> NoReturn:
    """Re-raise the ``RecursionError`` being handled as the error naming the message too
    deep to read, count, copy or edit (or as it is, when no message is that deep)."""
    error = too_deep_among(inputs)
    if error is None:
        raise  # the RecursionError being handled
    raise error from None


class _Core(_HandingOver):
    """The last class of the chain: what both drivers check before they run the core."""

    def _check_sync(self) -> None:
        if self._async_callable is not None:
            name, fn = self._async_callable
            raise _Refused(
                f"{name} is async ({fn!r}); call 'await reducer.areduce(...)' instead of "
                "reduce()"
            )
