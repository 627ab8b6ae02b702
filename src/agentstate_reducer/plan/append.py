"""Planning an append to a settled history: the cost of the new messages only, or ``None``
when only :func:`~agentstate_reducer.plan.make_plan` can decide."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .._structure import _boundary
from ..read import MessageRecord
from .types import Plan

if TYPE_CHECKING:
    from ..config import ReducerConfig


# -- appending to a settled history ------------------------------------------------------
#
# A LangGraph state update reduces the history it returned last time plus a few new
# messages. When that history is *settled* (planning it prunes nothing), planning it plus
# the new messages prunes nothing too unless the threshold is crossed or a new message
# answers a call nobody issued: the window only acts over the threshold, the cascade and
# start_on only act on pruned or orphaned messages. So the append costs the new
# messages only; anything else gets the full plan.

#: The options whose every value the rule above covers; a config that sets any other
#: option away from its default always gets the full plan.
_APPEND_FIELDS = frozenset(
    {
        "min_messages",
        "max_messages",
        "max_tokens",
        "target_tokens",
        "token_counter",
        "preserve_first",
        "cascade_tool_messages",
        "summarize_fn",
        "inject_summary",
        "summary_message_factory",
        "on_prune",
        "namespace_key",
        "pin",  # pins act only over the threshold
        "dedupe_on_prune",
        "dedupe_window",
        "start_on",
        "context_edits",  # the reducer appends only when editing would change nothing
        "turn_ladder",  # acts only over max_tokens
        "cache_aware",  # acts only on a prune
        # Read before the plan (the overhead and calibration in the budget, the dead
        # calls repaired first: an append follows only when none is found) or after it
        # (the reasoning replay of the survivors); the plan never reads them.
        "model",
        "context_window",
        "tools",
        "system_prompt",
        "calibrate_from_usage",
        "repair_dangling_calls",
        "reasoning",
    }
)


@dataclass(frozen=True)
class Settled:
    """A history that planning leaves whole, as much of it as an append needs."""

    #: Number of messages.
    size: int
    #: Total tokens (token mode), else ``None``.
    tokens: int | None
    #: ``call id -> (index, issuing message)``; an entry counts only while the history
    #: still holds that message at that index (the dict is shared along a chain of
    #: appends, so it may hold entries of another branch).
    issued: dict[str, tuple[int, object]]
    #: The right to extend :attr:`issued` in place, taken (popped) by the first append
    #: planned from this state: any other append from it (a branch, the same append
    #: again after its messages were edited in place, one after a failed attempt) takes
    #: the entries of this history only, so none of another append's can hold for it.
    owner: list[None] = field(default_factory=lambda: [None], compare=False, repr=False)


def _appendable(config: ReducerConfig) -> bool:
    for f in fields(config):
        if f.name not in _APPEND_FIELDS and getattr(config, f.name) != _default(f):
            return False
    return True


def _default(f: Any) -> object:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def _over(config: ReducerConfig, size: int, tokens: int | None) -> bool:
    if config.max_tokens is not None:
        return tokens is None or tokens > config.max_tokens
    return config.max_messages is not None and size > config.max_messages


def settle(
    views: Sequence[MessageRecord],
    messages: Sequence[object],
    config: ReducerConfig,
    counts: Sequence[int] | None = None,
) -> Settled | None:
    """The :class:`Settled` state of a history that :func:`make_plan` would leave whole.

    ``None`` when planning it could prune something (over the threshold, an orphaned
    tool result) or when the config has an option the append rule does not cover.
    One pass over the history.
    """
    if not _appendable(config):
        return None
    tokens = sum(counts) if config.max_tokens is not None and counts is not None else None
    if _over(config, len(views), tokens):
        return None
    found = _boundary(views)
    if found is not None and found > (1 if config.preserve_first else 0):
        return None  # planning prunes what the compaction item stands for
    issued: dict[str, tuple[int, object]] = {}
    check = config.cascade_tool_messages
    for i, view in enumerate(views):
        if check and view.answers and not all(a in issued for a in view.answers):
            return None  # an orphan: the cascade would prune it
        for call in view.calls:
            issued[call] = (i, messages[i])
    return Settled(len(views), tokens, issued)


def plan_append(
    settled: Settled,
    history: Sequence[object],
    new_views: Sequence[MessageRecord],
    config: ReducerConfig,
    new_counts: Sequence[int] | None = None,
) -> tuple[Plan, Settled] | None:
    """Plan ``history + new`` for a settled ``history`` (``history[i]`` for ``i < size``).

    ``history`` holds the settled messages followed by the new ones. Returns the plan
    (nothing pruned) and the settled state of the whole, or ``None`` when only
    :func:`make_plan` can decide. Work proportional to the new messages.
    """
    size = settled.size + len(new_views)
    tokens = None
    if config.max_tokens is not None:
        if new_counts is None or settled.tokens is None:
            return None
        tokens = settled.tokens + sum(new_counts)
    if _over(config, size, tokens):
        return None
    if _boundary(new_views) is not None:
        return None  # a new compaction item: what it stands for goes
    issued = settled.issued
    try:
        settled.owner.pop()  # atomic: one append extends the dict in place
    except IndexError:  # another did: this history's entries only (a C-level copy first)
        base = settled.size
        issued = {call: at for call, at in list(issued.items()) if at[0] < base}
    check = config.cascade_tool_messages
    for k, view in enumerate(new_views):
        i = settled.size + k
        if check and view.answers:
            for call in view.answers:
                found = issued.get(call)
                if found is None or found[0] >= i or history[found[0]] is not found[1]:
                    return None  # answers no call this history issued: the full plan decides
        for call in view.calls:
            issued[call] = (i, history[i])
    start = 1 if config.preserve_first and size else 0
    # Built without the frozen __init__ (a setattr per field): this is the whole cost of
    # planning an append but the new messages.
    plan = object.__new__(Plan)
    plan.__dict__.update(
        _APPENDED,
        size=size,
        pruned=(),
        why={},
        start=start,
        cut=start,
        total_tokens=tokens,
        kept_tokens=tokens,
    )
    return plan, Settled(size, tokens, issued)


#: Every field of a plan that prunes nothing, at its default (``size``, ``pruned`` and
#: ``why`` are set per plan).
_APPENDED = {f.name: _default(f) for f in fields(Plan)}
