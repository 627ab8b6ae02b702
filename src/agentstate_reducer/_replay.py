"""The reasoning replay policy applied to a reduce's survivors (:mod:`.reasoning`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .config import ReducerConfig, ReducerResult
from .reasoning import KEEP, MODEL, checks_prefix, replay_reasoning
from .tokens import model_name

__all__ = ("first_change", "needs_input", "replay_survivors")


def first_change(before: Sequence[Any], after: Sequence[Any]) -> int | None:
    """The first index where ``after`` holds another object than ``before``, or ``None``
    when ``after`` is ``before`` cut at its end."""
    for i, (a, b) in enumerate(zip(before, after, strict=False)):
        if a is not b:
            return i
    return None if len(after) <= len(before) else len(before)


def needs_input(config: ReducerConfig) -> bool:
    """Whether :func:`replay_survivors` compares the survivors with the reduce's input
    (the request's model checks the prefix of its thinking blocks)."""
    if config.reasoning != MODEL or config.model is None:
        return False
    name = model_name(config.model)
    return name is not None and checks_prefix(name)


def replay_survivors(
    config: ReducerConfig,
    result: ReducerResult[Any],
    messages: Sequence[Any] | None,
    count: Any,
) -> ReducerResult[Any] | None:
    """``result`` with its survivors as ``config.reasoning`` sends them, or ``None`` when
    nothing changes. ``messages`` is the reduce's input (``existing + new``), read only
    when :func:`needs_input`; ``count`` counts a list of messages (token mode) or is
    ``None``."""
    if config.reasoning == KEEP:
        return None
    surviving = result.surviving
    changed_from = first_change(messages, surviving) if messages is not None else None
    out, changed = replay_reasoning(
        surviving, policy=config.reasoning, model=config.model, changed_from=changed_from
    )
    if not changed:
        return None
    changes: dict[str, Any] = {
        "surviving": out,
        "messages_after": len(out),
        "reasoning_dropped": changed,
    }
    if count is not None and result.tokens_after is not None:
        kept, had = {id(m) for m in out}, {id(m) for m in surviving}
        gone = [m for m in surviving if id(m) not in kept]
        copies = [m for m in out if id(m) not in had]
        changes["tokens_after"] = result.tokens_after - sum(count(gone)) + sum(count(copies))
    fields = dict(result.__dict__, **changes)
    new: ReducerResult[Any] = object.__new__(ReducerResult)
    new.__dict__.update(fields)
    return new
