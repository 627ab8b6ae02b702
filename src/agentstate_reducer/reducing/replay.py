"""The last stage of a reduce: the reasoning replay policy (:mod:`agentstate_reducer.
_replay`) on the survivors, and what they then say of the budget."""

from __future__ import annotations

from typing import Any

from .._replay import needs_input, replay_survivors
from ..config import ReducerResult
from ..plan import CURRENT_TURN
from ..reasoning import KEEP
from .prepare import _Preparing


def replay(
    reducer: _Preparing, result: ReducerResult[Any], inputs: list[Any], namespace: Any
) -> ReducerResult[Any]:
    """``result`` with the survivors the ``reasoning`` policy sends (remembered for the
    next append, read again when next needed); ``inputs`` is ``existing + new``."""
    config = reducer.config
    if config.reasoning == KEEP:
        return result
    count = reducer._cache().counts if config.token_mode else None
    replayed = replay_survivors(config, result, inputs if needs_input(config) else None, count)
    if replayed is None:
        return result
    reducer._remember(replayed.surviving, None, None)
    if count is not None and result.tokens_after is not None and result.over_target:
        # Lighter survivors may be under now; the block of a summary counts too.
        block = sum(count(result.surviving)) - result.tokens_after
        replayed = reducer._said(replayed, namespace, block, CURRENT_TURN)
    elif count is None and result.over_target:
        replayed = reducer._said(replayed, namespace, 0, CURRENT_TURN)
    return replayed
