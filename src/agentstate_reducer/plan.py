"""The pure pruning plan: message views + token counts + config -> which indices go, and why.

No I/O, no framework imports, no callbacks. Every pruning rule of the package lives
here; the shell (``reducer.py``), ``trim.py`` and the CLI call it and never
re-implement it.

Turns and steps. A *turn* starts at a plain human message (one that answers no tool
call) that follows the agent's final answer (an ai message issuing no tool call), and
runs up to the next such message: a human message typed while the agent is still
working joins the turn. The *current turn* is the last one (from ``start`` when no
plain human message opens one). A *step* is an ai message issuing tool
calls together with the messages answering those calls. :func:`current_turn` finds
them; every plan carries them as :attr:`Plan.turn`.

Laws (tested with hypothesis):

* ``pruned`` is a sorted subset of ``range(len(views))``; survivors keep their order.
* With ``preserve_first``, index 0 is never pruned.
* With ``cascade_tool_messages``, no surviving message answers a tool call that no
  earlier surviving message issued.
* Idempotence: planning the survivors again (without summary injection) prunes nothing.
* A pinned message is never pruned, nor is any message of a tool exchange it belongs
  to (its call, or the results of its calls).
* The current turn is never pruned while it has a step: its opening human message and
  every message of it stay in count mode; in token mode it stays whole while it fits
  ``max_tokens`` (with what is kept anyway), else only its oldest whole steps go,
  never the opening message and never the latest step.
* With ``start_on="human"`` the kept tail opens with a plain human message whenever the
  history has one, and the latest plain human message always survives.
* A model response made of several items (:func:`response_units`: a Responses
  ``reasoning`` item and the items after it) is pruned or kept whole.
* Nothing before the latest compaction item survives (the preserved first message
  excepted); the compaction item itself is never pruned.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Collection, Sequence
from dataclasses import MISSING, dataclass, field, fields
from itertools import compress
from operator import and_, attrgetter, not_
from typing import TYPE_CHECKING, Any, Protocol, cast

from ._note import entry_tokens, note_cap, note_tokens, shown_args
from ._turns import Turn, _plain_human, current_turn
from .errors import ConfigError
from .read import (
    AI,
    GROUP_BOUNDARY,
    GROUP_OUTPUT,
    GROUP_REASONING,
    HUMAN,
    PRUNABLE_ROLES,
    MessageRecord,
    record_group,
)

if TYPE_CHECKING:
    from .config import ReducerConfig

__all__ = (
    "CASCADE",
    "COMPACTED",
    "CURRENT_TURN",
    "IN_PROGRESS",
    "NEVER_PRUNED",
    "OLD_STEP",
    "ORPHAN",
    "PINNED",
    "PRESERVED_FIRST",
    "RECENT",
    "START_ON",
    "UNDER_THRESHOLD",
    "WINDOW",
    "Plan",
    "Settled",
    "Turn",
    "current_turn",
    "dangling_calls",
    "link_calls",
    "make_plan",
    "plan_append",
    "response_units",
    "settle",
)

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
#: The former name of :data:`CURRENT_TURN` (the rule grew from one exchange to the turn).
IN_PROGRESS = CURRENT_TURN
PINNED = "pinned"
UNDER_THRESHOLD = "under threshold"


_group = record_group


def _joins(before: MessageRecord, after: MessageRecord) -> bool:
    """Whether ``after`` continues the model response ``before`` is part of."""
    if after.role != AI or before.role != AI:
        return False
    return before.group == GROUP_REASONING or after.group in (GROUP_OUTPUT, GROUP_REASONING)


def response_units(views: Sequence[MessageRecord]) -> tuple[tuple[int, int], ...]:
    """The model responses spanning several messages, as ``(begin, end)`` index ranges.

    A run of consecutive ai items with a Responses output item among them (a
    ``reasoning`` item and the ``message`` / ``function_call`` items after it, parallel
    calls) is one response: the reducer prunes or keeps it whole. Chat shapes, where
    one message is one response, have none (checked without a Python-level loop).
    """
    return _units(views) if any(map(_group, views)) else ()


def _units(views: Sequence[MessageRecord]) -> tuple[tuple[int, int], ...]:
    out = []
    n = len(views)
    i = 0
    while i < n:
        j = i
        while j + 1 < n and _joins(views[j], views[j + 1]):
            j += 1
        if j > i:
            out.append((i, j + 1))
        i = j + 1
    return tuple(out)


def _boundary(views: Sequence[MessageRecord]) -> int | None:
    """Index of the latest compaction item, or ``None``."""
    return _latest_boundary(views) if any(map(_group, views)) else None


def _latest_boundary(views: Sequence[MessageRecord]) -> int | None:
    return next(
        (i for i in range(len(views) - 1, -1, -1) if views[i].group == GROUP_BOUNDARY), None
    )


def dangling_calls(views: Sequence[MessageRecord]) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """Dead tool calls: ``(ai index, call ids)`` with no result, followed by a later message.

    A call is dead when no message answers it and a plain human or an ai message comes
    after its issuer. Calls of the latest ai message followed by nothing or only by
    results are pending (the tools may still run, or an interrupt may be resumed) and
    are never listed.
    """
    last_turn = max(
        (i for i, v in enumerate(views) if v.role == AI or _plain_human(v)), default=-1
    )
    for begin, end in response_units(views):
        if begin <= last_turn < end:  # parallel calls of the latest response are pending
            last_turn = begin
    answered: set[tuple[int, str]] = set()
    issuer: dict[str, int] = {}
    for j, view in enumerate(views):
        for answer in view.answers:
            owner = issuer.get(answer)
            if owner is not None:
                answered.add((owner, answer))
        for call in view.calls:
            issuer[call] = j
    dead = []
    for k in range(min(last_turn, len(views))):
        view = views[k]
        if view.role == AI and view.calls:
            missing = tuple(c for c in view.calls if (k, c) not in answered and issuer[c] == k)
            if missing:
                dead.append((k, missing))
    return tuple(dead)


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


class Views(Protocol):
    """What :func:`link_calls` reads: a list of views, or an object reading them lazily."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int, /) -> MessageRecord: ...


#: Per message, the index of the latest earlier issuer of each call it answers
#: (``None`` for a call never issued before it), or ``None`` when it answers none.
Parents = list[tuple[int | None, ...] | None]
#: Per issuer, ``(answering index, call id)`` of the results of its calls.
Results = dict[int, list[tuple[int, str]]]


def link_calls(
    views: Views, start: int = 0, stop: int | None = None, *, results: bool = False
) -> tuple[Parents, Results]:
    """Link tool results to their calls: the one linker the plan and ``trim`` share.

    Reads the run ``[start, stop)`` (default: every message). ``parents[j]`` is set for
    each ``j`` in the run that answers calls: the latest issuer before ``j`` of each of
    its ``answers``, looked up before ``start`` too. With ``results``, ``results[i]``
    lists ``(j, id)`` answering calls of each issuer ``i`` in the run, scanning on past
    ``stop`` until each call is answered or issued again; else it is empty. Only the
    run and what those scans reach is read, so ``views`` may read lazily.
    """
    n = len(views)
    stop = n if stop is None else stop
    issued: dict[str, int] = {}
    parents: Parents = [None] * n
    found: Results = {}
    unresolved: dict[str, list[int]] = {}
    if not start and not results:  # the plan's case: one pass, nothing else to record
        for j in range(stop):
            view = views[j]
            if view.answers:
                parents[j] = tuple(map(issued.get, view.answers))
            for call in view.calls:
                issued[call] = j
        return parents, found
    get = issued.get
    for j in range(start, stop):
        view = views[j]
        answers = view.answers
        if answers:
            links = parents[j] = tuple(map(get, answers))
            for call, p in zip(answers, links, strict=True):
                if p is None:
                    unresolved.setdefault(call, []).append(j)
                elif results:
                    found.setdefault(p, []).append((j, call))
        for call in view.calls:
            issued[call] = j
    i = start - 1
    while unresolved and i >= 0:
        for call in views[i].calls:
            for j in unresolved.pop(call, ()):
                view = views[j]
                parents[j] = tuple(
                    i if a == call else p
                    for a, p in zip(view.answers, parents[j] or (), strict=True)
                )
        i -= 1
    if results:
        pending = {  # calls issued in the run and not answered in it
            call: p
            for call, p in issued.items()
            if not any(c == call for _, c in found.get(p, ()))
        }
        j = stop
        while pending and j < n:
            view = views[j]
            for call in view.answers:
                p = pending.pop(call, None)
                if p is not None:
                    found.setdefault(p, []).append((j, call))
            for call in view.calls:
                pending.pop(call, None)
            j += 1
    return parents, found


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


#: ``protected`` value of a pinned message (1 is the current turn).
_PINNED = 2


def _cascade(
    parents: Sequence[tuple[int | None, ...] | None],
    answering: Sequence[int],
    pruned: bytearray,
    why: dict[int, tuple[str, int | None]],
    start: int,
) -> None:
    """Prune every result of a pruned call, and every result whose call was never issued.

    ``answering``: the indices of the messages answering calls, ascending.
    """
    for j in answering[bisect_left(answering, start) :]:
        if pruned[j]:
            continue
        for parent in parents[j]:  # type: ignore[union-attr]  # answering: never None
            if parent is None:
                pruned[j] = 1
                why[j] = (ORPHAN, None)
                break
            if pruned[parent]:
                pruned[j] = 1
                why[j] = (CASCADE, parent)
                break


_role = attrgetter("role")
#: Byte ``i`` is 1 - ``i`` for 0 and 1, 0 otherwise (flags to their complement).
_FLIP = bytes([1]) + bytes(255)
#: Any non-zero byte to 1.
_ONE = bytes([0]) + bytes([1]) * 255
_WINDOW_WHY: tuple[str, int | None] = (WINDOW, None)
_START_ON_WHY: tuple[str, int | None] = (START_ON, None)


def _indices(flags: bytes | bytearray, base: int = 0) -> list[int]:
    """``base + i`` for each non-zero byte ``flags[i]``, ascending.

    Faster than ``compress(range(...), flags)`` for the shapes plans have: few flags
    (found by ``find``) or one block of them (a ``range``).
    """
    size = len(flags)
    ones = size - flags.count(0)
    if not ones:
        return []
    flags = flags.translate(_ONE)
    if ones * 16 < size:
        out = []
        at = flags.find(1)
        while at >= 0:
            out.append(base + at)
            at = flags.find(1, at + 1)
        return out
    first = flags.find(1)
    last = flags.rfind(1)
    if last - first + 1 == ones:
        return list(range(base + first, base + last + 1))
    return list(compress(range(base, base + size), flags))


def _plain_prunable(
    views: Sequence[MessageRecord],
    parents: Sequence[tuple[int | None, ...] | None],
    lo: int,
    hi: int,
) -> bytearray:
    """One flag per index of ``[lo, hi)``: 1 for a human or ai message answering no call."""
    roles = map(PRUNABLE_ROLES.__contains__, map(_role, views[lo:hi]))
    return bytearray(map(and_, roles, map(not_, parents[lo:hi])))


def _prune_window(
    views: Sequence[MessageRecord],
    parents: Sequence[tuple[int | None, ...] | None],
    pruned: bytearray,
    protected: bytearray,
    why: dict[int, tuple[str, int | None]],
    start: int,
    cut: int,
    window_end: int,
) -> None:
    """Prune every plain human or ai message of ``[start, cut)`` that nothing protects.

    The reason is :data:`WINDOW` before ``window_end``, :data:`START_ON` from it on.
    Flags are combined as integers, so the work per message is done in C.
    """
    if cut <= start:
        return
    width = cut - start
    free = _plain_prunable(views, parents, start, cut)
    taken = protected[start:cut].translate(_ONE)
    free_bits = int.from_bytes(free, "little")
    free_bits &= ~(int.from_bytes(taken, "little") | int.from_bytes(pruned[start:cut], "little"))
    if not free_bits:
        return
    chosen = free_bits.to_bytes(width, "little")
    gone = _indices(chosen, start)
    pruned[start:cut] = (int.from_bytes(pruned[start:cut], "little") | free_bits).to_bytes(
        width, "little"
    )
    split = bisect_left(gone, window_end)
    why.update(dict.fromkeys(gone[:split], _WINDOW_WHY))
    if split < len(gone):
        why.update(dict.fromkeys(gone[split:], _START_ON_WHY))


def _kept_anyway(
    views: Sequence[MessageRecord],
    parents: Sequence[tuple[int | None, ...] | None],
    counts: Sequence[int],
    start: int,
    stop: int,
    cascade: bool,
    protected: bytearray,
    answering: Sequence[int],
) -> int:
    """Tokens of the messages of ``[start, stop)`` that stay wherever the cut falls.

    Protected ones, plain ones of a role never pruned, and results whose calls all come
    before ``start`` (every result without the cascade); never an orphaned result.
    """
    if stop <= start:
        return 0
    get = counts.__getitem__
    guarded = protected[start:stop]
    total = sum(map(get, _indices(guarded, start)))
    roles = map(PRUNABLE_ROLES.__contains__, map(_role, views[start:stop]))
    other = bytearray(map(and_, map(not_, roles), map(not_, parents[start:stop])))
    if guarded.count(0) != len(guarded):
        other = bytearray(map(and_, other, guarded.translate(_FLIP)))
    total += sum(map(get, _indices(other, start)))
    results = answering[bisect_left(answering, start) : bisect_left(answering, stop)]
    if not cascade:
        total += sum(get(i) for i in results if not protected[i])
    elif start and results and any(views[i].calls for i in range(start)):
        for i in results:
            links = parents[i]
            assert links is not None
            if not protected[i] and all(p is not None and p < start for p in links):
                total += get(i)
    return total


def _keep_responses_whole(
    units: Sequence[tuple[int, int]], pruned: bytearray, why: dict[int, tuple[str, int | None]]
) -> None:
    """A response the window cut into keeps every item (its reasoning with its calls)."""
    for begin, end in units:
        gone = sum(pruned[begin:end])
        if gone and gone < end - begin:
            for i in range(begin, end):
                if pruned[i] and why[i][0] != COMPACTED:
                    pruned[i] = 0
                    del why[i]


_NEVER = -1  # a threshold below every boundary: the message never survives


def _thresholds(
    views: Sequence[MessageRecord],
    parents: Sequence[tuple[int | None, ...] | None],
    turn: Turn,
    start: int,
    cascade: bool,
) -> list[int]:
    """Per message of the turn's body: it survives a drop of the steps before ``b`` iff
    ``b <= threshold`` (plain ai: its index; other plain roles: always; a result:
    the earliest of its calls in the window, or never when one was never issued)."""
    n = len(views)
    always = n
    out = []
    for i in range(turn.body, n):
        links = parents[i]
        if links is None:
            out.append(i if views[i].role == AI else always)
        elif not cascade:
            out.append(always)
        elif None in links:
            out.append(_NEVER)
        else:
            inside = [p for p in links if p is not None and p >= start]
            out.append(min(inside) if inside else always)
    return out


def _first_kept_step(
    views: Sequence[MessageRecord],
    parents: Sequence[tuple[int | None, ...] | None],
    counts: Sequence[int],
    turn: Turn,
    start: int,
    cascade: bool,
    config: ReducerConfig,
    protected: bytearray,
    reserve: int,
    answering: Sequence[int],
) -> int:
    """Token mode: how many of the turn's oldest steps go so the rest fits.

    None while the turn, with what is kept anyway, fits ``max_tokens``; else the fewest
    oldest steps whose removal makes it fit ``target_tokens``, and at most all but the
    latest step.
    """
    steps = turn.steps
    fixed = sum(counts[:start]) + _kept_anyway(
        views, parents, counts, start, turn.begin, cascade, protected, answering
    )
    if turn.opener is not None and turn.opener >= start:
        fixed += counts[turn.opener]
    # Boundaries: 0 keeps the whole body, k >= 1 starts it at the k-th step's ai message.
    bounds = [turn.body] + [s[0] for s in steps[1:]]
    cost = [0] * (len(bounds) + 1)
    for offset, threshold in enumerate(_thresholds(views, parents, turn, start, cascade)):
        # The message counts for every boundary b <= threshold: boundaries 0 .. last - 1.
        last = bisect_right(bounds, threshold)
        cost[0] += counts[turn.body + offset]
        cost[last] -= counts[turn.body + offset]
    running = 0
    for k in range(len(bounds)):
        running += cost[k]
        cost[k] = running
    assert config.max_tokens is not None
    if fixed + cost[0] <= config.max_tokens:
        return 0
    target = config.effective_target_tokens
    assert target is not None
    note = _note_costs(views, steps, target) if config.turn_ladder else None
    target -= reserve
    for k in range(1, len(bounds)):
        if fixed + cost[k] + (note[k] if note else 0) <= target:
            return k
    return len(bounds) - 1


def _note_costs(
    views: Sequence[MessageRecord], steps: Sequence[tuple[int, ...]], target: int
) -> list[int]:
    """Per number of dropped steps ``k``, the tokens of the turn note standing for them."""
    cap = note_cap(target)
    sizes: list[int] = []
    out = [0]
    for step in steps[:-1]:
        calls = views[step[0]].billed_calls()
        sizes.extend(entry_tokens((name, shown_args(args), "")) for name, args in calls)
        out.append(note_tokens(sizes, cap))
    return out


def _token_cut(
    views: Sequence[MessageRecord],
    parents: Sequence[tuple[int | None, ...] | None],
    counts: Sequence[int],
    start: int,
    target: int,
    cascade: bool,
    protected: bytearray,
    answering: Sequence[int],
) -> int:
    """Smallest ``cut`` whose survivors (kept prefix + tail ``[cut, n)``) fit ``target``.

    Walks the cut back from the end one message at a time. A tool result only costs
    tokens once every call it answers is kept, because until then the cascade removes
    it; so the total is non-decreasing as the tail grows and the first failure is final.
    What stays wherever the cut falls is summed first; the walk reads only the tail.
    """
    n = len(views)
    need = sum(counts[:start]) + _kept_anyway(
        views, parents, counts, start, n, cascade, protected, answering
    )
    pending: dict[int, int] = {}
    children: dict[int, list[int]] = {}
    cut = n
    while cut > start:
        k = cut - 1
        cost = 0
        if not protected[k]:
            links = parents[k]
            if links is None:
                if views[k].role in PRUNABLE_ROLES:
                    cost = counts[k]
            elif cascade and None not in links:
                # A result is costed once its last call is kept (calls precede results).
                live = {p for p in links if p is not None and p >= start}
                if live:
                    pending[k] = len(live)
                    for p in live:
                        children.setdefault(p, []).append(k)
        for child in children.pop(k, ()):
            pending[child] -= 1
            if not pending[child]:
                cost += counts[child]
        if need + cost > target:
            break
        need += cost
        cut = k
    return cut


def _human_cut(
    views: Sequence[MessageRecord], cut: int, start: int, latest: int | None, back: bool
) -> int:
    """Where ``start_on="human"`` puts the cut: on a plain human message, never past the
    latest one. ``back`` (count mode) moves it back to the human message opening the
    turn it falls in; otherwise (token mode), or when no such message is at or after
    ``start``, it moves forward to the next one."""
    if latest is None or latest < start or cut >= latest:
        return cut if latest is None or latest < start else latest
    if back:
        for q in range(cut, start - 1, -1):
            if _plain_human(views[q]):
                return q
    return next(q for q in range(cut, latest + 1) if _plain_human(views[q]))


def _total(counts: Sequence[int], limit: int) -> int | None:
    """The sum of ``counts``; for lazy counts, ``None`` once the sum from the end exceeds
    ``limit`` (the earlier messages then need no count unless a rule asks for one)."""
    if isinstance(counts, (list, tuple)):
        return sum(counts)
    within = getattr(counts, "total_within", None)
    if within is not None:  # lazy counts that can sum from the end faster than one by one
        return cast("int | None", within(limit))
    total = 0
    for i in range(len(counts) - 1, -1, -1):
        count = counts[i]
        if count < 0:  # a counter that is not a count: partial sums prove nothing
            return sum(counts)
        total += count
        if total > limit:
            return None
    return total


def make_plan(
    views: Sequence[MessageRecord],
    config: ReducerConfig,
    counts: Sequence[int] | None = None,
    *,
    pinned: Collection[int] = (),
    reserve: int = 0,
) -> Plan:
    """Decide which messages to prune.

    Args:
        views: one :class:`MessageRecord` per message, in order.
        config: the reducer configuration.
        counts: per-message token counts; required in token mode, ignored otherwise.
        pinned: indices never to prune; in token mode their tokens are budgeted like
            the preserved first message's (an orphaned tool result still goes).
        reserve: tokens to keep free for a summary block (token mode): the kept
            messages fit ``target_tokens - reserve``.
            A list or tuple is summed; any other sequence is read lazily, from the end,
            only as far as the rules need.

    Returns:
        A :class:`Plan` (pruned indices ascending, with reasons).
    """
    n = len(views)
    start = 1 if config.preserve_first and n else 0
    cascade = config.cascade_tool_messages
    turn = current_turn(views, start)
    total = None
    token_mode = config.max_tokens is not None
    if token_mode:
        if counts is None or len(counts) != n:
            raise ConfigError("token mode needs one token count per message")
        assert config.max_tokens is not None
        total = _total(counts, config.max_tokens)
        triggered = total is None or total > config.max_tokens
    else:
        triggered = config.max_messages is not None and n > config.max_messages
    grouped = any(map(_group, views))  # Responses items (C-level: chat shapes pay ~nothing)
    boundary = _latest_boundary(views) if grouped else None
    if boundary is not None and boundary <= start:
        boundary = None  # nothing it could prune
    if not triggered and not cascade and boundary is None:
        return Plan(
            n, (), start=start, cut=start, total_tokens=total, kept_tokens=total, turn=turn
        )

    parents = link_calls(views)[0]
    answering = list(compress(range(n), parents))  # the results, ascending
    pruned = bytearray(n)
    why: dict[int, tuple[str, int | None]] = {}
    cut = start
    protected = bytearray(n)
    dropped = note = 0
    window_end = start  # where the window ended before start_on moved the cut
    held: tuple[int, ...] = ()
    if triggered:
        if pinned:
            closure = _pin_closure(parents, pinned, n)
            held = tuple(
                i
                for i in _indices(closure[start:], start)
                if None not in (parents[i] or ())
            )
            for i in held:
                protected[i] = _PINNED
        if turn.active:
            keep_from = turn.body
            if token_mode:
                assert counts is not None
                dropped = _first_kept_step(
                    views,
                    parents,
                    counts,
                    turn,
                    start,
                    cascade,
                    config,
                    protected,
                    reserve,
                    answering,
                )
                if dropped:
                    if config.turn_ladder:
                        target = config.effective_target_tokens
                        assert target is not None
                        note = _note_costs(views, turn.steps[: dropped + 1], target)[dropped]
                    keep_from = turn.steps[dropped][0]
                    for i in range(turn.body, keep_from):
                        plain = views[i].role == AI and parents[i] is None
                        if plain and not protected[i]:
                            pruned[i] = 1
                            why[i] = (OLD_STEP, None)
            if turn.opener is not None and turn.opener >= start:
                protected[turn.opener] = protected[turn.opener] or 1
            thresholds = _thresholds(views, parents, turn, start, cascade)
            for offset, threshold in enumerate(thresholds):
                i = turn.body + offset
                # A question typed mid-turn stays, as the opener does.
                stays = i >= keep_from or _plain_human(views[i])
                if stays and threshold >= keep_from and not protected[i]:
                    protected[i] = 1
        if dropped:
            cut = n  # the turn alone is over budget: nothing before it can stay
        elif token_mode:
            assert counts is not None
            target = config.effective_target_tokens
            assert target is not None
            cut = _token_cut(
                views, parents, counts, start, target - reserve, cascade, protected, answering
            )
        else:
            cut = max(start, n - config.min_messages)
        window_end = cut
        if config.start_on == HUMAN:
            latest = next((i for i in range(n - 1, -1, -1) if _plain_human(views[i])), None)
            cut = _human_cut(views, cut, start, latest, back=not token_mode)
        _prune_window(views, parents, pruned, protected, why, start, cut, window_end)
    if boundary is not None:
        for i in range(start, boundary):
            if not pruned[i]:
                pruned[i] = 1
                why[i] = (COMPACTED, boundary)
    if grouped:
        _keep_responses_whole(_units(views), pruned, why)
    if cascade:
        # Also runs under the threshold: results orphaned before this call go too.
        _cascade(parents, answering, pruned, why, start)

    indices = tuple(_indices(pruned))  # every pruned index has its reason
    kept = total
    if counts is not None and total is not None:
        kept = total - sum(map(counts.__getitem__, indices))
    elif counts is not None:  # counted lazily: every survivor was, the others maybe not
        kept = sum(map(counts.__getitem__, _indices(pruned.translate(_FLIP))))
    if kept is not None:
        kept += note
    kept_protected = tuple(i for i in _indices(protected) if protected[i] == 1 and not pruned[i])
    over_target = over_budget = False
    because: list[str] = []
    if triggered:
        if token_mode:
            assert kept is not None and config.max_tokens is not None
            target = config.effective_target_tokens
            assert target is not None
            over_target, over_budget = kept > target, kept > config.max_tokens
        else:
            assert config.max_messages is not None
            over_target = over_budget = n - len(indices) > config.max_messages
        if over_target:
            because = _over_because(counts, config, window_end, cut, kept_protected, pruned)
    return Plan(
        n,
        indices,
        why,
        triggered,
        start,
        cut,
        total,
        kept,
        kept_protected,
        held,
        turn=turn,
        dropped_steps=dropped,
        note_tokens=note,
        over_target=over_target,
        over_budget=over_budget,
        over_because=tuple(because),
    )


def _over_because(
    counts: Sequence[int] | None,
    config: ReducerConfig,
    window_end: int,
    cut: int,
    kept_protected: tuple[int, ...],
    pruned: bytearray,
) -> list[str]:
    """Which kept-anyway messages push the survivors over the target."""
    because = []
    if any(i < window_end for i in kept_protected):
        because.append(CURRENT_TURN)
    # Without the turn rule and start_on, would the survivors still be over the target?
    extra = {i for i in kept_protected if i < window_end} | set(range(cut, window_end))
    rest = [i for i in range(len(pruned)) if not pruned[i] and i not in extra]
    if counts is not None:
        target = config.effective_target_tokens
        assert target is not None
        heavy = sum(counts[i] for i in rest) > target
    else:
        assert config.max_messages is not None
        heavy = len(rest) > config.max_messages
    if heavy:
        because.append(NEVER_PRUNED)
    if cut < window_end:
        because.append(START_ON)
    return because


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
