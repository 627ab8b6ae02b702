"""What a plan says: the reasons a message is pruned or kept, and :class:`Plan`, the outcome
of planning one reduce (:mod:`agentstate_reducer.plan` makes it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._structure import Turn

# Reasons a message is pruned.
WINDOW = "in window"
CASCADE = "cascade"
ORPHAN = "orphaned tool result"
START_ON = "start_on"
#: Before the latest compaction item (OpenAI Responses): the provider's summary stands for it.
COMPACTED = "compacted"
#: An ai message (or text) of one of the oldest steps of a current turn over ``max_tokens``.
OLD_STEP = "old step"
# Reasons a message is kept (CURRENT_TURN and NEVER_PRUNED also name why a plan is
# over its target, in Plan.over_because; START_ON too, when the cut moved back).
PRESERVED_FIRST = "preserved first"
RECENT = "recent tail"
NEVER_PRUNED = "never-pruned role"
CURRENT_TURN = "current turn"
#: Why survivors are over ``max_tokens`` when the injected summary block put them there.
SUMMARY_BLOCK = "summary block"
#: Why survivors are over ``max_tokens`` when an edit waits for its original to be stored.
UNSTORED_ORIGINAL = "original not stored yet"
#: Why survivors are over the budget when ``summarize_fn`` failed and what it would have
#: summarised was kept (``inject_summary``: fail closed).
SUMMARY_FAILED = "summary failed"
#: The former name of :data:`CURRENT_TURN` (the rule grew from one exchange to the turn).
IN_PROGRESS = CURRENT_TURN
PINNED = "pinned"
UNDER_THRESHOLD = "under threshold"


#: Why survivors are over, in words (the warning and ``--explain`` say it so).
OVER_CAUSES = {
    CURRENT_TURN: "the current turn is kept while it has tool calls (in token mode its "
    "question and latest step at the least), and the turn alone is over",
    NEVER_PRUNED: "messages that are never pruned exceed it",
    START_ON: "start_on human kept the question of the turn the cut fell in",
    SUMMARY_BLOCK: "the summary block put the survivors over",
    SUMMARY_FAILED: "summarize_fn failed, so what it would have summarised was kept",
    UNSTORED_ORIGINAL: "an edited message is kept whole until its original is stored",
}


def over_causes(because: tuple[str, ...]) -> str:
    """``over_because`` in words, ``; ``-separated (an unknown reason as it is)."""
    return "; ".join(OVER_CAUSES.get(c, c) for c in because) or "messages that are never pruned"


def ladder_done(results: int, inputs: int, steps: int) -> str:
    """What the turn ladder did to the current turn, in words; ``""`` when nothing."""
    def n(count: int, word: str) -> str:
        return f"{count} {word}" if count == 1 else f"{count} {word}s"

    done = []
    if results:
        done.append(f"cleared {n(results, 'older result')}")
    if inputs:
        done.append(f"cleared {n(inputs, 'older input')}")
    if steps:
        done.append(f"dropped {n(steps, 'oldest step')} (one note stands for them)")
    if not done:
        return ""
    return "the turn ladder " + (", ".join(done[:-1]) + " and " if done[1:] else "") + done[-1]


@dataclass(frozen=True)
class Plan:
    """The outcome of planning one reduce: pruned indices and the reason for each."""

    #: Number of messages planned over.
    size: int
    #: Pruned indices, ascending.
    pruned: tuple[int, ...]
    #: ``index -> (reason, related index or None)`` for every pruned index; for
    #: ``CASCADE`` the related index is the ai message whose call it answered.
    why: dict[int, tuple[str, int | None]] = field(default_factory=dict)
    #: Whether the threshold was exceeded (pruning may still remove nothing).
    triggered: bool = False
    #: First index the window may touch (1 with ``preserve_first``, else 0).
    start: int = 0
    #: End of the window: messages at or after it form the recent tail.
    cut: int = 0
    #: Total tokens before pruning (token mode), else ``None``. Also ``None`` when the
    #: counts were lazy (not a list or tuple) and the plan stopped counting once the
    #: sum from the end passed ``max_tokens``: messages that cannot survive are never
    #: counted, so only the survivors' total (``kept_tokens``) is known.
    total_tokens: int | None = None
    #: Total tokens of the survivors (token mode), else ``None``.
    kept_tokens: int | None = None
    #: Indices kept by the turn rule whatever the window says (the current turn's
    #: opener and its steps), ascending; empty when the rule did not apply.
    protected: tuple[int, ...] = ()
    #: Pinned indices (with the rest of their tool exchanges), never pruned.
    pinned: tuple[int, ...] = ()
    #: The current turn (see :func:`current_turn`), found on every plan.
    turn: Turn = field(default_factory=lambda: Turn(None, 0))
    #: How many of the current turn's oldest steps were pruned (token mode only).
    dropped_steps: int = 0
    #: Tokens of the turn note standing for the dropped steps (``turn_ladder``), counted
    #: in ``kept_tokens``; 0 when no note is due.
    note_tokens: int = 0
    #: The turn note the edit step wrote for the dropped steps (``turn_ladder``), as
    #: :func:`~agentstate_reducer.edit.turn_note` returns it, or ``None``.
    note: tuple[int, Any, bool] | None = field(default=None, compare=False, repr=False)
    #: Whether the survivors exceed the target: ``target_tokens`` in token mode,
    #: ``max_messages`` in count mode (only after a triggered prune).
    over_target: bool = False
    #: Whether the survivors exceed the budget: ``max_tokens`` or ``max_messages``.
    over_budget: bool = False
    #: Why the survivors exceed the target: :data:`CURRENT_TURN` (the turn rule kept
    #: messages the window would have pruned), :data:`NEVER_PRUNED` (what may never be
    #: pruned exceeds the target alone), :data:`START_ON` (the cut moved back to a
    #: human message).
    over_because: tuple[str, ...] = ()

    @property
    def insert_at(self) -> int:
        """Where a summary block goes in the surviving list: where the pruned block was."""
        return self.pruned[0] if self.pruned else self.start

    @property
    def kept(self) -> int:
        """Number of surviving messages."""
        return self.size - len(self.pruned)

    def counts_by_reason(self) -> dict[str, int]:
        """How many messages were pruned for each reason."""
        out: dict[str, int] = {}
        for reason, _ in self.why.values():
            out[reason] = out.get(reason, 0) + 1
        return out

    def reason(self, index: int) -> tuple[str, int | None]:
        """Why ``index`` was pruned or kept, as ``(reason, related index or None)``."""
        if index in self.why:
            return self.why[index]
        if index < self.start:
            return (PRESERVED_FIRST, None)
        if index in self.pinned:
            return (PINNED, None)
        if index in self.protected:
            return (CURRENT_TURN, None)
        if not self.triggered:
            return (UNDER_THRESHOLD, None)
        if index >= self.cut:
            return (RECENT, None)
        return (NEVER_PRUNED, None)
