"""The pure pruning plan: message views + token counts + config -> which indices go, and why.

No I/O, no framework imports, no callbacks. Every pruning rule of the package lives
here; the shell (``reducer.py``), ``trim.py`` and the CLI call it and never
re-implement it.

Laws (tested with hypothesis):

* ``pruned`` is a sorted subset of ``range(len(views))``; survivors keep their order.
* With ``preserve_first``, index 0 is never pruned.
* With ``cascade_tool_messages``, no surviving message answers a tool call that no
  earlier surviving message issued.
* Idempotence: planning the survivors again (without summary injection) prunes nothing.
* A pinned message is never pruned, nor is any message of a tool exchange it belongs
  to (its call, or the results of its calls).
* The exchange in progress is never pruned: when the history ends with an ai message's
  tool calls (answered or still pending), that message, its results and the human
  message that opened the turn stay, so an agent never loses the call it is working on.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from .config import ReducerConfig
from .messages import AI, HUMAN, PRUNABLE_ROLES, SYSTEM, TOOL, MessageView

__all__ = (
    "CASCADE",
    "IN_PROGRESS",
    "NEVER_PRUNED",
    "ORPHAN",
    "PINNED",
    "PRESERVED_FIRST",
    "RECENT",
    "START_ON",
    "UNDER_THRESHOLD",
    "WINDOW",
    "Plan",
    "make_plan",
)

# Reasons a message is pruned.
WINDOW = "in window"
CASCADE = "cascade"
ORPHAN = "orphaned tool result"
START_ON = "start_on"
# Reasons a message is kept.
PRESERVED_FIRST = "preserved first"
RECENT = "recent tail"
NEVER_PRUNED = "never-pruned role"
IN_PROGRESS = "exchange in progress"
PINNED = "pinned"
UNDER_THRESHOLD = "under threshold"


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
    #: Total tokens before pruning (token mode), else ``None``.
    total_tokens: int | None = None
    #: Total tokens of the survivors (token mode), else ``None``.
    kept_tokens: int | None = None
    #: Indices of the exchange in progress, kept whatever the window says.
    protected: tuple[int, ...] = ()
    #: Pinned indices (with the rest of their tool exchanges), never pruned.
    pinned: tuple[int, ...] = ()

    @property
    def insert_at(self) -> int:
        """Where a summary block goes in the surviving list: where the pruned block was."""
        return self.pruned[0] if self.pruned else self.start

    def reason(self, index: int) -> tuple[str, int | None]:
        """Why ``index`` was pruned or kept, as ``(reason, related index or None)``."""
        if index in self.why:
            return self.why[index]
        if index < self.start:
            return (PRESERVED_FIRST, None)
        if index in self.pinned:
            return (PINNED, None)
        if index in self.protected:
            return (IN_PROGRESS, None)
        if not self.triggered:
            return (UNDER_THRESHOLD, None)
        if index >= self.cut:
            return (RECENT, None)
        return (NEVER_PRUNED, None)


def _link(views: Sequence[MessageView]) -> list[tuple[int | None, ...] | None]:
    """For each message answering tool calls, the index of the latest earlier issuer of each."""
    issued: dict[str, int] = {}
    parents: list[tuple[int | None, ...] | None] = [None] * len(views)
    for j, view in enumerate(views):
        if view.answers:
            parents[j] = tuple(issued.get(a) for a in view.answers)
        for call in view.calls:
            issued[call] = j
    return parents


def _in_progress(
    views: Sequence[MessageView],
    parents: Sequence[tuple[int | None, ...] | None],
    start: int,
) -> list[int]:
    """The trailing tool exchange (ai call + its results so far) and the question before it."""
    n = len(views)
    k = n - 1
    while k >= start and parents[k] is not None:
        k -= 1
    if k < start or views[k].role != AI or not views[k].calls:
        return []
    for j in range(k + 1, n):
        if any(p != k for p in parents[j] or ()):
            return []  # results of other calls: not one exchange
    protected = list(range(k, n))
    for q in range(k - 1, start - 1, -1):
        if views[q].role == HUMAN and parents[q] is None:
            protected.append(q)
            break
    return protected


def _pin_closure(
    parents: Sequence[tuple[int | None, ...] | None], pinned: Collection[int], n: int
) -> bytearray:
    """``pinned`` plus every message sharing a tool exchange with one (calls and results)."""
    linked: dict[int, list[int]] = {}
    for j, links in enumerate(parents):
        for p in links or ():
            if p is not None:
                linked.setdefault(j, []).append(p)
                linked.setdefault(p, []).append(j)
    held = bytearray(n)
    todo = [i for i in pinned if 0 <= i < n]
    while todo:
        i = todo.pop()
        if held[i]:
            continue
        held[i] = 1
        todo.extend(j for j in linked.get(i, ()) if not held[j])
    return held


def _cascade(
    views: Sequence[MessageView],
    parents: Sequence[tuple[int | None, ...] | None],
    pruned: bytearray,
    why: dict[int, tuple[str, int | None]],
    begin: int,
    start: int,
) -> None:
    """Prune every result of a pruned call, and every result whose call was never issued."""
    for j in range(max(begin, start), len(views)):
        links = parents[j]
        if links is None or pruned[j]:
            continue
        for parent in links:
            if parent is None:
                pruned[j] = 1
                why[j] = (ORPHAN, None)
                break
            if pruned[parent]:
                pruned[j] = 1
                why[j] = (CASCADE, parent)
                break


def _token_cut(
    views: Sequence[MessageView],
    parents: Sequence[tuple[int | None, ...] | None],
    counts: Sequence[int],
    start: int,
    target: int,
    cascade: bool,
    protected: bytearray,
) -> int:
    """Smallest ``cut`` whose survivors (kept prefix + tail ``[cut, n)``) fit ``target``.

    Walks the cut back from the end one message at a time. A tool result only costs
    tokens once every call it answers is kept, because until then the cascade removes
    it; so the total is non-decreasing as the tail grows and the first failure is final.
    """
    n = len(views)
    need = sum(counts[:start])
    pending = [0] * n
    waiting = bytearray(n)
    children: dict[int, list[int]] = {}
    plain = bytearray(n)
    for i in range(start, n):
        links = parents[i]
        if protected[i]:
            need += counts[i]
            continue
        if links is None:
            if views[i].role in PRUNABLE_ROLES:
                plain[i] = 1
            else:
                need += counts[i]
            continue
        if not cascade:
            need += counts[i]
            continue
        if None in links:
            continue  # an orphan: pruned wherever it stands
        live = {p for p in links if p is not None and p >= start}
        if not live:
            need += counts[i]
            continue
        pending[i] = len(live)
        for p in live:
            children.setdefault(p, []).append(i)
    cut = n
    while cut > start:
        k = cut - 1
        cost = counts[k] if plain[k] else 0
        if pending[k]:
            waiting[k] = 1
        for child in children.get(k, ()):
            pending[child] -= 1
            if not pending[child] and waiting[child]:
                cost += counts[child]
        if need + cost > target:
            break
        need += cost
        cut = k
    return cut


def _extend_to_human(
    views: Sequence[MessageView],
    parents: Sequence[tuple[int | None, ...] | None],
    pruned: bytearray,
    why: dict[int, tuple[str, int | None]],
    start: int,
    protected: bytearray,
) -> int:
    """Prune until the first kept non-system message after ``start`` is a human turn.

    Results of a call made before ``start`` (by the preserved first message) belong
    to that message and are skipped, never pruned: pruning them would leave its
    calls unanswered.

    Returns the first index pruned here, or ``len(views)`` when none was.
    """
    first = len(views)
    for i in range(start, len(views)):
        if pruned[i]:
            continue
        view = views[i]
        if view.role == SYSTEM:
            continue
        links = parents[i]
        if links is not None and all(p is not None and p < start for p in links):
            continue
        if protected[i] == _PINNED:
            continue  # pinned: kept where it stands; the rule applies to what follows
        if (view.role == HUMAN and links is None) or protected[i]:
            break
        if view.role != AI and not (view.role in (TOOL, HUMAN) and parents[i] is not None):
            break  # a role the window may never remove: stop rather than break the rule
        pruned[i] = 1
        why[i] = (START_ON, None)
        first = min(first, i)
    return first


#: ``protected`` value of a pinned message (1 is the exchange in progress).
_PINNED = 2


def make_plan(
    views: Sequence[MessageView],
    config: ReducerConfig,
    counts: Sequence[int] | None = None,
    *,
    pinned: Collection[int] = (),
    reserve: int = 0,
) -> Plan:
    """Decide which messages to prune.

    Args:
        views: one :class:`MessageView` per message, in order.
        config: the reducer configuration.
        counts: per-message token counts; required in token mode, ignored otherwise.
        pinned: indices never to prune; in token mode their tokens are budgeted like
            the preserved first message's (an orphaned tool result still goes).
        reserve: tokens to keep free for a summary block (token mode): the kept
            messages fit ``target_tokens - reserve``.

    Returns:
        A :class:`Plan` (pruned indices ascending, with reasons).
    """
    n = len(views)
    start = 1 if config.preserve_first and n else 0
    cascade = config.cascade_tool_messages
    total = None
    if config.max_tokens is not None:
        if counts is None or len(counts) != n:
            raise ValueError("token mode needs one token count per message")
        total = sum(counts)
        triggered = total > config.max_tokens
    else:
        triggered = config.max_messages is not None and n > config.max_messages
    if not triggered and not cascade:
        return Plan(n, (), start=start, cut=start, total_tokens=total, kept_tokens=total)

    parents = _link(views)
    pruned = bytearray(n)
    why: dict[int, tuple[str, int | None]] = {}
    cut = start
    protected = bytearray(n)
    kept_in_progress: list[int] = []
    held: tuple[int, ...] = ()
    if triggered:
        kept_in_progress = _in_progress(views, parents, start)
        for i in kept_in_progress:
            protected[i] = 1
        if pinned:
            closure = _pin_closure(parents, pinned, n)
            held = tuple(
                i for i in range(start, n) if closure[i] and None not in (parents[i] or ())
            )
            for i in held:
                protected[i] = _PINNED
        if counts is not None and config.max_tokens is not None:
            target = config.effective_target_tokens
            assert target is not None
            target -= reserve
            cut = _token_cut(views, parents, counts, start, target, cascade, protected)
        else:
            cut = max(start, n - config.min_messages)
        for i in range(start, cut):
            if views[i].role in PRUNABLE_ROLES and parents[i] is None and not protected[i]:
                pruned[i] = 1
                why[i] = (WINDOW, None)
    if cascade:
        # Also runs under the threshold: results orphaned before this call go too.
        _cascade(views, parents, pruned, why, start, start)
    if config.start_on == HUMAN and why:
        first = _extend_to_human(views, parents, pruned, why, start, protected)
        if cascade and first < n:
            # The head it stops at is a plain human turn, which no cascade removes.
            _cascade(views, parents, pruned, why, first, start)

    indices = tuple(sorted(why))  # every pruned index has its reason
    kept = total
    if counts is not None and total is not None:
        kept = total - sum(counts[i] for i in indices)
    protected_indices = tuple(sorted(kept_in_progress))
    protected_indices = tuple(i for i in protected_indices if protected[i] != _PINNED)
    return Plan(n, indices, why, triggered, start, cut, total, kept, protected_indices, held)
