"""The pure pruning plan: message views + token counts + config -> which indices go, and why.

No I/O, no framework imports, no callbacks. Every pruning rule of the package lives
here; the shell (``reducer.py``, ``reducing/``), ``trim.py`` and the CLI call it and never
re-implement it. What a plan says (the reasons, :class:`Plan`) is in ``plan.types``; the
structure of the records it reads is the :class:`Structure` of ``_structure``, read once
per history and asked by every plan of it (:func:`plan_structure`); the plan of an
append to a settled history in ``plan.append``; the prompt-cache cost model of
``cache_aware`` in ``plan.cache``. The package :mod:`agentstate_reducer.plan` re-exports
them.

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
* Nothing before the latest compaction (a Responses ``compaction`` item, an assistant
  message holding an Anthropic ``compaction`` block) survives (the preserved first
  message excepted); the compaction itself is never pruned.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Collection, Sequence
from itertools import compress, islice, repeat
from operator import attrgetter, sub
from typing import TYPE_CHECKING, cast

from .._note import entry_tokens, note_cap, note_tokens, shown_args
from .._structure import Structure, Turn, _plain_human, structure_of
from ..errors import ConfigError
from ..read import AI, HUMAN, PRUNABLE_ROLES, MessageRecord
from .cache import cache_target, growth
from .types import (
    CASCADE,
    COMPACTED,
    CURRENT_TURN,
    NEVER_PRUNED,
    OLD_STEP,
    ORPHAN,
    START_ON,
    WINDOW,
    Plan,
)

if TYPE_CHECKING:
    from ..config import ReducerConfig

__all__ = ("make_plan", "plan_structure")


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
    views: Sequence[MessageRecord], answering: Sequence[int], lo: int, hi: int
) -> bytearray:
    """One flag per index of ``[lo, hi)``: 1 for a human or ai message answering no call
    (``answering``: the indices of the messages answering calls, ascending)."""
    flags = bytearray(map(PRUNABLE_ROLES.__contains__, map(_role, islice(views, lo, hi))))
    _clear(flags, answering, lo, hi)
    return flags


def _clear(flags: bytearray, indices: Sequence[int], lo: int, hi: int) -> None:
    """Zero ``flags[i - lo]`` for each ``i`` of the ascending ``indices`` in ``[lo, hi)``,
    at C speed."""
    inside = indices[bisect_left(indices, lo) : bisect_left(indices, hi)]
    for _ in map(flags.__setitem__, map(sub, inside, repeat(lo)), repeat(0)):
        pass


def _prune_window(
    views: Sequence[MessageRecord],
    answering: Sequence[int],
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
    free = _plain_prunable(views, answering, start, cut)
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
    roles = map(PRUNABLE_ROLES.__contains__, map(_role, islice(views, start, stop)))
    other = bytearray(roles).translate(_FLIP)  # a role never pruned
    _clear(other, answering, start, stop)
    unguarded: bytes | bytearray = other
    if guarded.count(0) != len(guarded):  # less the protected ones, counted above
        free = int.from_bytes(other, "little") & ~int.from_bytes(guarded.translate(_ONE), "little")
        unguarded = free.to_bytes(stop - start, "little")
    total += sum(map(get, _indices(unguarded, start)))
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
    heads: Sequence[int],
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
    latest step. Steps issued by one model response (parallel calls as separate
    Responses items after one reasoning item, ``heads`` the same) go or stay together.
    """
    steps = turn.steps
    splits = [k for k in range(1, len(steps)) if heads[k] != heads[k - 1]]
    if not splits:
        return 0
    fixed = sum(counts[:start]) + _kept_anyway(
        views, parents, counts, start, turn.begin, cascade, protected, answering
    )
    if turn.opener is not None and turn.opener >= start:
        fixed += counts[turn.opener]
    # Boundaries: 0 keeps the whole body, k >= 1 starts it at the k-th step's response.
    bounds = [turn.body, *heads[1:]]
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
    for k in splits:
        if fixed + cost[k] + (note[k] if note else 0) <= target:
            return k
    return splits[-1]


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
    """Smallest ``cut`` whose survivors (kept prefix + tail ``[cut, n)``) fit ``target``."""
    return _tail_needs(views, parents, counts, start, target, cascade, protected, answering)[0]


def _tail_needs(
    views: Sequence[MessageRecord],
    parents: Sequence[tuple[int | None, ...] | None],
    counts: Sequence[int],
    start: int,
    limit: int,
    cascade: bool,
    protected: bytearray,
    answering: Sequence[int],
) -> tuple[int, list[int]]:
    """``(lo, needs)``: ``lo`` is the smallest cut whose survivors fit ``limit``, and
    ``needs[c - lo]`` the survivors' tokens with the cut at ``c``, for ``lo <= c <= n``.

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
    needs = [need]
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
        if need + cost > limit:
            break
        need += cost
        needs.append(need)
        cut = k
    needs.reverse()
    return cut, needs


def _within(lo: int, needs: Sequence[int], budget: int) -> int:
    """The smallest cut of :func:`_tail_needs`' walk whose survivors fit ``budget``."""
    cut = lo + len(needs) - 1
    while cut > lo and needs[cut - 1 - lo] <= budget:
        cut -= 1
    return cut


def _openers(views: Sequence[MessageRecord], lo: int, stop: int) -> list[int]:
    """The plain human messages of ``[lo, stop]`` that open a turn, ascending (the rule
    of :func:`current_turn`: after a final answer, or with no question before)."""
    j = lo - 1
    while j >= 0 and views[j].role != AI and not _plain_human(views[j]):
        j -= 1
    # The latest ai or plain human message before says whether the agent is at work.
    working = j >= 0 and (views[j].role != AI or bool(views[j].calls))
    asked = any(_plain_human(views[k]) for k in range(j, -1, -1))
    out = []
    for i in range(lo, min(stop + 1, len(views))):
        view = views[i]
        if _plain_human(view):
            if not working or not asked:
                out.append(i)
            working = asked = True
        elif view.role == AI:
            working = bool(view.calls)
    return out


def _cache_cut(
    views: Sequence[MessageRecord],
    parents: Sequence[tuple[int | None, ...] | None],
    counts: Sequence[int],
    start: int,
    turn: Turn,
    config: ReducerConfig,
    reserve: int,
    cascade: bool,
    protected: bytearray,
    answering: Sequence[int],
    anchor: int | None,
) -> int:
    """``cache_aware``: where the window over the earlier turns ends (see ``_cache``).

    Only the earlier turns are chosen among, never the current turn: where pruning
    alone would cut into it (the earlier turns do not fit ``target_tokens`` at all),
    the cut is pruning alone's. Otherwise the cut from an earlier request (``anchor``)
    stays while the survivors from it fit ``max_tokens``; else the cut goes where it
    pays for the cache it rewrites (:func:`cache_target`), then forward to the next
    question opening a turn if the survivors keep at least half of ``target_tokens``,
    else back to the one before if they fit ``target_tokens``.
    """
    target = config.effective_target_tokens
    assert target is not None and config.max_tokens is not None
    lo, needs = _tail_needs(
        views, parents, counts, start, config.max_tokens - reserve, cascade, protected,
        answering,
    )
    plain = _within(lo, needs, target - reserve)
    if plain >= turn.begin:
        return plain
    if anchor is not None and start < anchor <= turn.begin and anchor >= lo:
        return anchor
    kept = cache_target(config.max_tokens, target, growth(views, counts, start))
    deep = min(_within(lo, needs, kept - reserve), turn.begin)
    openers = _openers(views, max(start + 1, plain), turn.begin)
    at = bisect_left(openers, deep)
    if at < len(openers) and needs[openers[at] - lo] >= target // 2 - reserve:
        return openers[at]
    if at and openers[at - 1] >= plain:
        return openers[at - 1]
    return deep


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
    anchor: int | None = None,
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
        anchor: ``cache_aware``: the index of the first message an earlier request kept
            after its cut; the cut stays there while the survivors fit ``max_tokens``.

    Returns:
        A :class:`Plan` (pruned indices ascending, with reasons).
    """
    structure = structure_of(views, preserve_first=config.preserve_first)
    return plan_structure(
        structure, config, counts, pinned=pinned, reserve=reserve, anchor=anchor
    )


def plan_structure(
    structure: Structure,
    config: ReducerConfig,
    counts: Sequence[int] | None = None,
    *,
    pinned: Collection[int] = (),
    reserve: int = 0,
    anchor: int | None = None,
) -> Plan:
    """:func:`make_plan` of ``structure``'s records, the structure read once for every
    plan of them (it must be read with ``config.preserve_first``)."""
    views = structure.views
    n = len(views)
    start = structure.start
    assert start == (1 if config.preserve_first and n else 0)
    cascade = config.cascade_tool_messages
    turn = structure.turn
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
    grouped = structure.grouped
    boundary = structure.boundary
    if boundary is not None and boundary <= start:
        boundary = None  # nothing it could prune
    if not triggered and not cascade and boundary is None:
        return Plan(
            n, (), start=start, cut=start, total_tokens=total, kept_tokens=total, turn=turn
        )

    parents = structure.parents
    answering = structure.answering  # the results, ascending
    pruned = bytearray(n)
    why: dict[int, tuple[str, int | None]] = {}
    cut = start
    protected = bytearray(n)
    dropped = note = 0
    window_end = start  # where the window ended before start_on moved the cut
    held: tuple[int, ...] = ()
    if boundary is not None:
        protected[boundary] = _PINNED  # the compaction itself is never pruned
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
                    structure.heads,
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
                    keep_from = structure.heads[dropped]
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
            assert target is not None and config.max_tokens is not None
            if config.cache_aware:
                cut = _cache_cut(
                    views, parents, counts, start, turn, config, reserve, cascade, protected,
                    answering, anchor,
                )
            else:
                cut = _token_cut(
                    views, parents, counts, start, target - reserve, cascade, protected,
                    answering,
                )
        else:
            cut = max(start, n - config.min_messages)
        window_end = cut
        if config.start_on == HUMAN:
            latest = next((i for i in range(n - 1, -1, -1) if _plain_human(views[i])), None)
            cut = _human_cut(views, cut, start, latest, back=not token_mode)
        _prune_window(views, answering, pruned, protected, why, start, cut, window_end)
    if boundary is not None:
        for i in range(start, boundary):
            if not pruned[i]:
                pruned[i] = 1
                why[i] = (COMPACTED, boundary)
    if grouped:
        _keep_responses_whole(structure.units, pruned, why)
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


