"""The pure plan, driven directly: examples of each rule, and hypothesis against a reference."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstate_reducer import ReducerConfig
from agentstate_reducer.plan import (
    CASCADE,
    CURRENT_TURN,
    IN_PROGRESS,
    NEVER_PRUNED,
    OLD_STEP,
    ORPHAN,
    PRESERVED_FIRST,
    RECENT,
    START_ON,
    UNDER_THRESHOLD,
    WINDOW,
    Plan,
    Turn,
    current_turn,
    dangling_calls,
    link_calls,
    make_plan,
)
from agentstate_reducer.read import PRUNABLE_ROLES, MessageRecord, read_messages


def V(role: str, calls: tuple[str, ...] = (), answers: tuple[str, ...] = ()) -> MessageRecord:
    return MessageRecord(role, None, calls, answers)


def count_config(lo: int, hi: int | None, **kw: Any) -> ReducerConfig:
    return ReducerConfig(min_messages=lo, max_messages=hi, **kw)


# -- count mode ------------------------------------------------------------------------


def test_under_threshold_prunes_nothing() -> None:
    views = [V("system"), V("human"), V("ai")]
    plan = make_plan(views, count_config(0, 3))
    assert plan.pruned == ()
    assert plan.reason(1) == (UNDER_THRESHOLD, None)
    assert make_plan(views * 50, count_config(0, None)).pruned == ()


def test_window_removes_only_human_and_ai() -> None:
    views = [V("system"), V("human"), V("system"), V("function"), V("critic"), V("ai"), V("human")]
    plan = make_plan(views, count_config(1, 3))
    assert plan.pruned == (1, 5)
    assert plan.reason(0) == (PRESERVED_FIRST, None)
    assert plan.reason(1) == (WINDOW, None)
    assert plan.reason(2) == (NEVER_PRUNED, None)
    assert plan.reason(4) == (NEVER_PRUNED, None)
    assert plan.reason(6) == (RECENT, None)


def test_preserve_first_off_opens_index_zero() -> None:
    views = [V("human"), V("ai"), V("human")]
    assert make_plan(views, count_config(1, 2, preserve_first=False)).pruned == (0, 1)
    assert make_plan(views, count_config(1, 2)).pruned == (1,)


def test_preserve_first_adds_one() -> None:
    views = [V("system")] + [V("human"), V("ai")] * 10
    plan = make_plan(views, count_config(4, 8))
    assert len(views) - len(plan.pruned) == 4 + 1


def test_cascade_reaches_past_the_window() -> None:
    views = [
        V("system"),
        V("human"),
        V("ai", calls=("a", "b")),
        V("tool", answers=("a",)),
        V("tool", answers=("b",)),
        V("ai"),
        V("human"),
    ]
    plan = make_plan(views, count_config(5, 5))  # window [1, 2)
    assert plan.pruned == (1,)
    plan = make_plan(views, count_config(4, 5))  # window [1, 3): prunes the caller
    assert plan.pruned == (1, 2, 3, 4)
    assert plan.reason(3) == (CASCADE, 2)
    assert plan.reason(4) == (CASCADE, 2)


def test_orphans_go_even_under_the_threshold() -> None:
    views = [V("system"), V("tool", answers=("gone",)), V("human")]
    plan = make_plan(views, count_config(0, 10))
    assert plan.pruned == (1,)
    assert not plan.triggered
    assert make_plan(views, count_config(0, 10, cascade_tool_messages=False)).pruned == ()


def test_cascade_off_keeps_tool_results() -> None:
    views = [
        V("system"), V("ai", calls=("a",)), V("tool", answers=("a",)), V("ai"), V("human")
    ]
    plan = make_plan(views, count_config(1, 2, cascade_tool_messages=False))
    assert plan.pruned == (1, 3)


def test_already_orphaned_results_are_pruned() -> None:
    views = [V("system"), V("tool", answers=("gone",)), V("human"), V("ai"), V("human")]
    plan = make_plan(views, count_config(3, 4))
    assert 1 in plan.pruned
    assert plan.reason(1) == (ORPHAN, None)


def test_anthropic_tool_result_turn_cascades_but_is_not_pruned_directly() -> None:
    views = [V("system"), V("ai", calls=("t",)), V("human", answers=("t",)), V("ai"), V("human")]
    plan = make_plan(views, count_config(2, 3))  # window [1, 3)
    assert plan.pruned == (1, 2)
    assert plan.reason(2) == (CASCADE, 1)
    first_kept = [V("ai", calls=("t",)), V("human", answers=("t",)), V("ai"), V("human")]
    assert make_plan(first_kept, count_config(1, 2)).pruned == (2,)


def test_the_current_turn_is_never_pruned() -> None:
    views = [
        V("system"),
        V("human"),
        V("ai"),
        V("human"),
        V("ai", calls=("a",)),
        V("tool", answers=("a",)),
        V("ai", calls=("b", "c")),
        V("tool", answers=("b",)),
    ]
    plan = make_plan(views, count_config(1, 2))
    # The agent is between tool calls: every step of its turn and the question that
    # opened it stay, or it would call a tool whose result it lost again, forever.
    assert plan.pruned == (1, 2)
    assert plan.protected == (3, 4, 5, 6, 7)
    assert plan.reason(4) == (CURRENT_TURN, None)
    assert IN_PROGRESS == CURRENT_TURN
    assert plan.turn == Turn(opener=3, begin=3, steps=((4, 5), (6, 7)))
    pending = [V("system"), V("human"), V("ai"), V("human"), V("ai", calls=("z",))]
    assert make_plan(pending, count_config(0, 1)).pruned == (1, 2)
    # A finished turn stays the current turn until the next human message.
    finished = [*views, V("ai")]
    assert make_plan(finished, count_config(1, 2)).protected == (3, 4, 5, 6, 7, 8)
    nxt = make_plan([*finished, V("human")], count_config(1, 2))
    assert nxt.protected == ()
    assert nxt.pruned == (1, 2, 3, 4, 5, 6, 7, 8)


def steps_turn(tag: str, k: int, final: bool = True) -> list[MessageRecord]:
    out = [V("human")]
    for s in range(k):
        out += [V("ai", calls=(f"{tag}{s}",)), V("tool", answers=(f"{tag}{s}",))]
    return out + ([V("ai")] if final else [])


def test_count_mode_keeps_a_turn_longer_than_max_messages() -> None:
    views = [V("system"), *steps_turn("a", 2), *steps_turn("b", 5, final=False)]
    plan = make_plan(views, count_config(4, 8))
    first_b = 7
    assert plan.pruned == tuple(range(1, first_b))
    assert plan.kept == 1 + 11 > 8
    assert plan.over_budget and plan.over_target
    assert plan.over_because == (CURRENT_TURN,)
    assert [s[0] for s in plan.turn.steps] == [8, 10, 12, 14, 16]


def test_token_mode_keeps_the_turn_whole_while_it_fits_max_tokens() -> None:
    views = [V("system"), *steps_turn("a", 1), *steps_turn("b", 3, final=False)]
    counts = [10, 5, 5, 50, 5, 5, 5, 60, 5, 60, 5, 60]
    # The turn (5 + 3 * 65 = 200) with the system prompt fits max_tokens, not target.
    plan = make_plan(views, token_config(220, 150), counts)
    assert plan.pruned == (1, 2, 3, 4)
    assert plan.dropped_steps == 0
    assert plan.kept_tokens == 210
    assert plan.over_target and not plan.over_budget
    assert plan.over_because == (CURRENT_TURN,)


def test_token_mode_drops_the_oldest_whole_steps_of_a_turn_over_max_tokens() -> None:
    views = [V("system"), *steps_turn("a", 1), *steps_turn("b", 5, final=False)]
    counts = [10, 5, 5, 5, 5, 5] + [5, 60] * 5
    plan = make_plan(views, token_config(250, 160), counts)
    # 10 + 5 + 5 * 65 = 340 > 250: steps go, oldest first, until 160 fits: two stay.
    assert plan.dropped_steps == 3
    assert plan.kept_tokens == 10 + 5 + 2 * 65
    opener = 5
    assert opener not in plan.pruned
    assert plan.reason(6) == (OLD_STEP, None)
    assert plan.reason(7) == (CASCADE, 6)
    assert plan.pruned == (1, 2, 3, 4, 6, 7, 8, 9, 10, 11)
    assert plan.protected == (5, 12, 13, 14, 15)
    # The latest step is never dropped, even when it alone is over the budget.
    counts[-1] = 500
    alone = make_plan(views, token_config(250, 160), counts)
    assert alone.dropped_steps == 4
    assert alone.protected == (5, 14, 15)
    assert alone.over_budget and alone.over_because == (CURRENT_TURN,)


def test_start_on_human_moves_the_count_cut_back_to_the_turns_question() -> None:
    views = [V("system"), *steps_turn("a", 3), *steps_turn("b", 3), V("human")]
    plain = make_plan(views, count_config(4, 8))
    assert plain.cut == len(views) - 4
    strict = make_plan(views, count_config(4, 8, start_on="human"))
    opener_b = 9
    assert strict.cut == opener_b
    assert strict.pruned == tuple(range(1, opener_b))
    assert strict.kept >= 4 + 1
    assert strict.over_because == (START_ON,)
    # min_messages=0 still keeps the latest question.
    assert make_plan(views, count_config(0, 8, start_on="human")).pruned == tuple(
        range(1, len(views) - 1)
    )


def test_start_on_human_never_empties_a_reduce_loop() -> None:
    reducer_cfg = count_config(4, 8, start_on="human")
    history = [V("system")]
    for t in range(100):
        history = history + steps_turn(f"t{t}.", 3)
        plan = make_plan(history, reducer_cfg)
        gone = set(plan.pruned)
        history = [v for i, v in enumerate(history) if i not in gone]
        assert any(v.role == "human" for v in history)
        assert history[-1].role == "ai" and not history[-1].calls


def test_start_on_human_token_cut_moves_forward_but_never_into_the_current_turn() -> None:
    views = [V("system"), V("human"), V("ai"), V("ai"), V("human"), V("ai")]
    counts = [1, 10, 10, 10, 10, 10]
    plan = make_plan(views, token_config(45, 35), counts)
    assert plan.pruned == (1, 2)
    strict = make_plan(views, token_config(45, 35, start_on="human"), counts)
    assert strict.pruned == (1, 2, 3)
    assert strict.reason(3) == (START_ON, None)
    # Even when the latest question does not fit, it stays.
    tiny = make_plan(views, token_config(5, 5, start_on="human"), counts)
    assert tiny.pruned == (1, 2, 3)
    assert make_plan(views, token_config(5, 5), counts).pruned == (1, 2, 3, 4, 5)


def test_current_turn_links_results_to_their_step() -> None:
    views = [
        V("human"),
        V("ai", calls=("x",)),
        V("human", answers=("x",)),
        V("ai"),
        V("human"),
        V("ai"),
        V("ai", calls=("a", "b")),
        V("tool", answers=("b",)),
        V("human", answers=("a",)),
        V("tool", answers=("x",)),  # answers a call made before the turn: no step's
        V("ai", calls=("c",)),
    ]
    turn = current_turn(views)
    assert turn == Turn(opener=4, begin=4, steps=((6, 7, 8), (10,)))
    assert turn.active and turn.body == 5
    assert current_turn([V("system"), V("ai", calls=("a",))], 1) == Turn(None, 1, ((1,),))
    assert not current_turn([V("human"), V("ai")]).active


def test_dangling_calls_are_dead_only_when_the_conversation_moved_on() -> None:
    views = [
        V("human"),
        V("ai", calls=("x", "y")),
        V("tool", answers=("x",)),
        V("human"),
        V("ai", calls=("z",)),
    ]
    assert dangling_calls(views) == ((1, ("y",)),)
    assert dangling_calls([*views, V("tool", answers=("z",))]) == ((1, ("y",)),)
    assert dangling_calls([*views, V("human")]) == ((1, ("y",)), (4, ("z",)))
    assert dangling_calls([V("ai", calls=("p",)), V("ai")]) == ((0, ("p",)),)


def test_counts_by_reason() -> None:
    views = [V("system"), V("human"), V("ai", calls=("a",)), V("tool", answers=("a",)), V("ai"),
             V("human")]
    plan = make_plan(views, count_config(1, 2))
    assert plan.counts_by_reason() == {WINDOW: 3, CASCADE: 1}


def test_summary_goes_where_the_pruned_block_was() -> None:
    views = [V("system"), V("system"), V("human"), V("ai"), V("human")]
    plan = make_plan(views, count_config(1, 2))
    assert plan.pruned == (2, 3)
    assert plan.insert_at == 2


def test_start_on_human_prunes_until_a_human_turn() -> None:
    views = [
        V("system"),
        V("human"),
        V("ai", calls=("a",)),
        V("tool", answers=("a",)),
        V("ai"),
        V("human"),
        V("ai"),
    ]
    plain = make_plan(views, count_config(4, 5))
    assert plain.pruned == (1, 2, 3)
    # The cut falls inside the first turn: it moves back to that turn's question.
    strict = make_plan(views, count_config(4, 5, start_on="human"))
    assert strict.pruned == ()
    assert strict.over_budget and strict.over_because == (START_ON,)
    later = make_plan([*views, V("human"), V("ai")], count_config(2, 5, start_on="human"))
    assert later.pruned == (1, 2, 3, 4, 5, 6)
    assert make_plan(views, count_config(0, 10, start_on="human")).pruned == ()


# -- token mode ------------------------------------------------------------------------


def token_config(mx: int, target: int | None = None, **kw: Any) -> ReducerConfig:
    return ReducerConfig(max_tokens=mx, target_tokens=target, **kw)


def test_token_mode_keeps_first_and_longest_fitting_tail() -> None:
    views = [V("system"), V("human"), V("ai"), V("human"), V("ai")]
    counts = [10, 10, 10, 10, 10]
    assert make_plan(views, token_config(50), counts).pruned == ()
    plan = make_plan(views, token_config(49), counts)
    assert plan.pruned == (1,)
    assert plan.kept_tokens == 40
    assert plan.total_tokens == 50


def test_token_mode_hysteresis() -> None:
    views = [V("system"), V("human"), V("ai"), V("human"), V("ai")]
    counts = [10] * 5
    plan = make_plan(views, token_config(45, 25), counts)
    assert plan.pruned == (1, 2, 3)
    assert plan.kept_tokens == 20


def test_token_mode_never_truncates_and_may_keep_less() -> None:
    views = [V("system"), V("human"), V("ai")]
    plan = make_plan(views, token_config(20), [5, 5, 100])
    assert plan.pruned == (1, 2)


def test_token_mode_reserves_never_pruned_messages() -> None:
    views = [V("system"), V("human"), V("system"), V("human"), V("ai")]
    counts = [10, 10, 30, 10, 10]
    plan = make_plan(views, token_config(59), counts)
    assert plan.pruned == (1, 3)  # the 30-token system message stays and is paid for
    assert plan.kept_tokens == 50


def test_token_mode_tool_result_costs_nothing_until_its_call_is_kept() -> None:
    views = [V("system"), V("human"), V("ai", calls=("a",)), V("tool", answers=("a",)), V("ai"),
             V("human")]
    plan = make_plan(views, token_config(10), [1, 1, 50, 5, 1, 1])
    assert plan.pruned == (1, 2, 3)  # the call does not fit, so neither can its result
    assert plan.kept_tokens == 3
    # An orphaned result is pruned wherever it stands, so it never blocks the tail.
    views = [V("system"), V("human"), V("human"), V("tool", answers=("gone",)), V("human")]
    plan = make_plan(views, token_config(5), [1, 1, 1, 50, 1])
    assert plan.pruned == (3,)
    assert plan.reason(3) == (ORPHAN, None)


def test_token_mode_needs_counts() -> None:
    try:
        make_plan([V("human")], token_config(5))
    except ValueError as exc:
        assert "token count" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected ValueError")


# -- hypothesis: the plan against a slow reference -------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[MessageRecord]:
    """Views with tool calls (parallel, pending, orphaned), system and odd roles."""
    views: list[MessageRecord] = []
    n = draw(st.integers(0, 40))
    next_id = 0
    open_calls: list[str] = []
    for _ in range(n):
        kind = draw(st.sampled_from(["human", "ai", "call", "result", "system", "orphan", "odd"]))
        if kind == "call":
            k = draw(st.integers(1, 3))
            ids = tuple(f"c{next_id + j}" for j in range(k))
            next_id += k
            open_calls.extend(ids)
            views.append(V("ai", calls=ids))
        elif kind == "result" and open_calls:
            take = draw(st.integers(1, min(2, len(open_calls))))
            ids = tuple(open_calls[:take])
            del open_calls[:take]
            role = draw(st.sampled_from(["tool", "human"]))  # human: Anthropic tool_result
            if role == "tool":
                views.extend(V("tool", answers=(i,)) for i in ids)
            else:
                views.append(V("human", answers=ids))
        elif kind == "orphan":
            views.append(V("tool", answers=(f"missing{next_id}",)))
            next_id += 1
        elif kind == "odd":
            views.append(V(draw(st.sampled_from(["function", "critic", "system"]))))
        elif kind in ("human", "ai", "system"):
            views.append(V(kind))
    return views


def plain_human(view: MessageRecord) -> bool:
    return view.role == "human" and not view.answers


def issuer_of(views: list[MessageRecord], j: int, answer: str) -> int | None:
    return max((i for i in range(j) if answer in views[i].calls), default=None)


def ref_turn(views: list[MessageRecord], start: int) -> tuple[int | None, int, list[int]]:
    """The current turn the slow way: (opener, first body index, its steps' ai indices)."""
    opener = _reference_opener(views)
    body = opener + 1 if opener is not None else start
    steps = [i for i in range(body, len(views)) if views[i].role == "ai" and views[i].calls]
    return opener, body, steps


def ref_protected(views: list[MessageRecord], cfg: ReducerConfig, start: int, b: int) -> set[int]:
    """What the turn rule keeps when the turn's body starts at ``b``."""
    opener, body, steps = ref_turn(views, start)
    if not steps:
        return set()
    keep = {opener} if opener is not None and opener >= start else set()
    keep.update(i for i in range(body, b) if plain_human(views[i]))  # typed mid-turn
    for i in range(max(b, body), len(views)):
        view = views[i]
        owners = [issuer_of(views, i, a) for a in view.answers]
        linked = all(o is not None and (o < start or o >= b) for o in owners)
        if not view.answers or not cfg.cascade_tool_messages or linked:
            keep.add(i)
    return keep


def ref_prune(
    views: list[MessageRecord],
    cfg: ReducerConfig,
    cut: int,
    keep: set[int] = frozenset(),  # type: ignore[assignment]
    drop: set[int] = frozenset(),  # type: ignore[assignment]
) -> set[int]:
    """The window ``[start, cut)`` minus ``keep``, plus ``drop``, then the cascade."""
    start = 1 if cfg.preserve_first and views else 0
    pruned = set(drop) | {
        i
        for i in range(start, cut)
        if views[i].role in PRUNABLE_ROLES and not views[i].answers and i not in keep
    }
    if cfg.cascade_tool_messages:
        for j in range(start, len(views)):
            for answer in views[j].answers:
                owner = issuer_of(views, j, answer)
                if owner is None or owner in pruned:
                    pruned.add(j)
    return pruned


def ref_human_cut(views: list[MessageRecord], cut: int, start: int, back: bool) -> int:
    latest = max((i for i, v in enumerate(views) if plain_human(v)), default=None)
    if latest is None or latest < start:
        return cut
    if cut >= latest:
        return latest
    humans = [q for q in range(start, len(views)) if plain_human(views[q])]
    before = [q for q in humans if q <= cut]
    if back and before:
        return before[-1]
    return min(q for q in humans if q >= cut)


def survivors_ok(views: list[MessageRecord], pruned: set[int], start: int = 1) -> bool:
    """No kept result lacks an earlier kept call (a preserved first message is exempt)."""
    issued: set[str] = set()
    for i, view in enumerate(views):
        if i in pruned:
            continue
        if i >= start and any(a not in issued for a in view.answers):
            return False
        issued.update(view.calls)
    return True


def check_figures(plan: Plan, views: list[MessageRecord], cfg: ReducerConfig) -> None:
    assert plan.kept == len(views) - len(plan.pruned)
    if cfg.token_mode:
        assert plan.over_budget == (plan.triggered and plan.kept_tokens > cfg.max_tokens)  # type: ignore[operator]
    else:
        assert plan.over_budget == (plan.triggered and plan.kept > cfg.max_messages)  # type: ignore[operator]
    assert bool(plan.over_because) == plan.over_target
    assert sum(plan.counts_by_reason().values()) == len(plan.pruned)
    assert set(plan.protected).isdisjoint(plan.pruned)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    histories(),
    st.integers(0, 12),
    st.integers(0, 12),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_count_mode_matches_reference(
    views: list[MessageRecord], lo: int, extra: int, first: bool, cascade: bool, human: bool
) -> None:
    cfg = count_config(
        lo,
        lo + extra,
        preserve_first=first,
        cascade_tool_messages=cascade,
        start_on="human" if human else None,
    )
    plan = make_plan(views, cfg)
    start = 1 if first and views else 0
    check_figures(plan, views, cfg)
    if len(views) <= lo + extra:
        # Under the threshold only results orphaned before this call go.
        assert set(plan.pruned) == ref_prune(views, cfg, start)
        return
    _, body, _ = ref_turn(views, start)
    keep = ref_protected(views, cfg, start, body)
    cut = max(start, len(views) - lo)
    if human:
        cut = ref_human_cut(views, cut, start, back=True)
    assert set(plan.pruned) == ref_prune(views, cfg, cut, keep)
    assert set(plan.protected) == keep - set(plan.pruned)
    assert list(plan.pruned) == sorted(plan.pruned)
    if first:
        assert 0 not in plan.pruned
    if cascade:
        assert survivors_ok(views, set(plan.pruned), int(first))
    for i in plan.pruned:
        assert plan.reason(i)[0] in (WINDOW, CASCADE, ORPHAN, START_ON)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    histories().flatmap(
        lambda vs: st.tuples(
            st.just(vs), st.lists(st.integers(0, 30), min_size=len(vs), max_size=len(vs))
        )
    ),
    st.integers(1, 300),
    st.integers(0, 100),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_token_mode_matches_reference(
    case: tuple[list[MessageRecord], list[int]],
    mx: int,
    slack: int,
    first: bool,
    cascade: bool,
    human: bool,
) -> None:
    views, counts = case
    target = max(1, mx - slack)
    cfg = token_config(
        mx,
        target,
        preserve_first=first,
        cascade_tool_messages=cascade,
        start_on="human" if human else None,
    )
    plan = make_plan(views, cfg, counts)
    check_figures(plan, views, cfg)
    n = len(views)
    start = 1 if first and views else 0
    if sum(counts) <= mx:
        assert set(plan.pruned) == ref_prune(views, cfg, start)
        return

    def kept(gone: set[int]) -> int:
        return sum(c for i, c in enumerate(counts) if i not in gone)

    _, body, steps = ref_turn(views, start)
    keep: set[int] = set()
    drop: set[int] = set()
    dropped = 0
    if steps:
        bounds = [body, *steps[1:]]

        def prune_to(b: int) -> tuple[set[int], set[int]]:
            gone = {i for i in range(body, b) if views[i].role == "ai"}
            return ref_protected(views, cfg, start, b), {i for i in gone if not views[i].answers}

        def cost(b: int) -> int:
            keep_b, drop_b = prune_to(b)
            return kept(ref_prune(views, cfg, n, keep_b, drop_b))

        if cost(body) > mx:
            fits = [k for k in range(1, len(bounds)) if cost(bounds[k]) <= target]
            dropped = fits[0] if fits else len(bounds) - 1
        keep, drop = prune_to(bounds[dropped])
    if dropped:
        cut = n
    else:
        # The longest tail whose survivors fit, else nothing prunable kept.
        fitting = [c for c in range(start, n + 1) if kept(ref_prune(views, cfg, c, keep)) <= target]
        cut = fitting[0] if fitting else n
    if human:
        cut = ref_human_cut(views, cut, start, back=False)
    expected = ref_prune(views, cfg, cut, keep, drop)
    assert set(plan.pruned) == expected
    assert plan.dropped_steps == dropped
    assert plan.kept_tokens == kept(expected)
    if not plan.over_target:
        assert plan.kept_tokens is not None and plan.kept_tokens <= target
    if cascade:
        assert survivors_ok(views, set(plan.pruned), int(first))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, 8), st.integers(0, 8), st.booleans(), st.booleans())
def test_start_on_human_makes_the_tail_open_with_a_human(
    views: list[MessageRecord], lo: int, extra: int, first: bool, tokens: bool
) -> None:
    cfg = (
        token_config(lo * 10 + extra * 5 + 1, preserve_first=first, start_on="human")
        if tokens
        else count_config(lo, lo + extra, preserve_first=first, start_on="human")
    )
    plan = make_plan(views, cfg, [10] * len(views) if tokens else None)
    assert survivors_ok(views, set(plan.pruned), int(first))
    start = 1 if first else 0
    humans = [i for i in range(start, len(views)) if plain_human(views[i])]
    if humans:
        assert humans[-1] not in plan.pruned  # the latest question always survives
    if not plan.triggered or not humans:
        return
    if plan.turn.opener is not None and plan.turn.opener < start:
        return  # the preserved first message opened the current turn: it opens the tail
    # Results of the preserved first message's calls stay with it (not the tail's head).
    head_calls = set(views[0].calls) if first and views else set()
    rest = [
        i
        for i, v in enumerate(views)
        if i >= start
        and i not in plan.pruned
        and v.role != "system"
        and not (v.answers and set(v.answers) <= head_calls)
    ]
    head = views[rest[0]]
    # Only a role the window may never remove stops it before a human question.
    assert plain_human(head) or (head.role not in ("ai", "tool") and not head.answers)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(histories(), st.integers(0, 8), st.integers(0, 8), st.booleans(), st.booleans())
def test_planning_the_survivors_again_prunes_nothing(
    views: list[MessageRecord], lo: int, extra: int, first: bool, human: bool
) -> None:
    cfg = count_config(lo, lo + extra, preserve_first=first, start_on="human" if human else None)
    plan = make_plan(views, cfg)
    gone = set(plan.pruned)
    again = make_plan([v for i, v in enumerate(views) if i not in gone], cfg)
    assert again.pruned == ()


def test_plan_reads_real_messages() -> None:
    messages = [{"role": "system", "content": "s"}] + [
        {"role": "user", "content": str(i)} for i in range(6)
    ]
    plan: Plan = make_plan(read_messages(messages), count_config(2, 4))
    assert plan.pruned == (1, 2, 3, 4)


_ids = st.lists(st.sampled_from("abc"), max_size=2, unique=True).map(tuple)
_views = st.lists(
    st.one_of(
        st.builds(lambda c: MessageRecord("ai", None, c, ()), _ids),
        st.builds(lambda a: MessageRecord("tool", None, (), a), _ids),
        st.just(MessageRecord("human", None, (), ())),
    ),
    max_size=12,
)


@pytest.mark.slow
@given(_views, st.data())
def test_link_calls_over_a_window_agrees_with_the_whole_history(
    views: list[MessageRecord], data: st.DataObject
) -> None:
    whole, _ = link_calls(views)
    for j, view in enumerate(views):  # the latest earlier issuer of each answered call
        expected = tuple(
            next((i for i in range(j - 1, -1, -1) if call in views[i].calls), None)
            for call in view.answers
        )
        assert whole[j] == (expected if view.answers else None)
    start = data.draw(st.integers(0, len(views)))
    stop = data.draw(st.integers(start, len(views)))
    parents, results = link_calls(views, start, stop, results=True)
    assert parents[start:stop] == whole[start:stop]
    assert not any(parents[:start]) and not any(parents[stop:])
    for i, found in results.items():
        assert start <= i < stop
        for j, call in found:  # every listed result answers a call of i, linked to i
            assert whole[j] is not None
            assert whole[j][views[j].answers.index(call)] == i
    for j in range(start, stop):  # every result in the run of an issuer in the run is listed
        for call, p in zip(views[j].answers, whole[j] or (), strict=True):
            if p is not None and p >= start:
                assert (j, call) in results[p]


_flag_bytes = st.lists(st.sampled_from([0, 0, 0, 1, 1, 2]), max_size=80).map(bytes) | st.builds(
    lambda lo, mid, hi: bytes(lo) + b"\x01" * mid + bytes(hi),
    st.integers(0, 40),
    st.integers(0, 40),
    st.integers(0, 40),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_flag_bytes, st.integers(0, 5))
def test_flag_indices_are_those_of_the_non_zero_bytes(flags: bytes, base: int) -> None:
    from agentstate_reducer.plan.rules import _indices

    want = [base + i for i, flag in enumerate(flags) if flag]
    assert _indices(flags, base) == want
    assert _indices(bytearray(flags), base) == want


# -- interjections: a question typed while the agent works joins its turn ----------------


def test_a_question_typed_mid_turn_joins_the_turn() -> None:
    views = [
        V("human"), V("ai", calls=("a",)), V("tool", answers=("a",)),
        V("human"),  # typed before the final answer
        V("ai", calls=("b",)), V("tool", answers=("b",)),
    ]
    assert current_turn(views) == Turn(0, 0, ((1, 2), (4, 5)))
    # While a call is still unanswered (an interrupt), too.
    assert current_turn([V("human"), V("ai", calls=("a",)), V("human")]).opener == 0
    # Before the agent said anything at all.
    assert current_turn([V("human"), V("human"), V("ai", calls=("a",))]).opener == 0
    # A final answer ends the turn: the next question opens a new one.
    after = [V("human"), V("ai", calls=("a",)), V("tool", answers=("a",)), V("ai"), V("human")]
    assert current_turn(after) == Turn(4, 4, ())
    # A turn that no question opened has nothing to join: the question opens a turn.
    headless = [V("system"), V("ai", calls=("a",)), V("tool", answers=("a",)), V("human")]
    assert current_turn(headless, 1) == Turn(3, 3, ())


def test_a_question_typed_mid_turn_stays_when_its_steps_go() -> None:
    views = [V("system"), *steps_turn("b", 2, final=False), V("human")]
    views += [V("ai", calls=("c0",)), V("tool", answers=("c0",))]
    views += [V("ai", calls=("c1",)), V("tool", answers=("c1",))]
    counts = [10, 5] + [5, 60] * 2 + [5] + [5, 60] * 2
    plan = make_plan(views, token_config(200, 150), counts)
    assert plan.turn.opener == 1
    # 10 + 5 + 4 * 65 + 5 = 280 > 200: the two oldest steps go (150 fits).
    assert plan.dropped_steps == 2
    # The opener and the interjection (index 6) stay; the oldest whole steps go.
    assert plan.pruned == (2, 3, 4, 5)
    assert 6 in plan.protected and 1 in plan.protected


def _reference_opener(views: list[MessageRecord]) -> int | None:
    """The opener by a forward walk: a plain human opens a turn when no turn is open or
    the latest ai message since the turn's opener (none: still open) is a final answer."""
    opener: int | None = None
    answered = True  # nothing yet: the first question opens a turn
    for i, view in enumerate(views):
        if view.role == "human" and not view.answers:
            if answered or opener is None:
                opener = i
            answered = False
        elif view.role == "ai":
            answered = not view.calls
    return opener


@settings(max_examples=300, deadline=None)
@given(histories())
def test_the_opener_agrees_with_a_forward_walk(views: list[MessageRecord]) -> None:
    assert current_turn(views).opener == _reference_opener(views)
