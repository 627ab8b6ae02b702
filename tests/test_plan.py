"""The pure plan, driven directly: examples of each rule, and hypothesis against a reference."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentstate_reducer import ReducerConfig
from agentstate_reducer.messages import PRUNABLE_ROLES, MessageView, read_messages
from agentstate_reducer.plan import (
    CASCADE,
    IN_PROGRESS,
    NEVER_PRUNED,
    ORPHAN,
    PRESERVED_FIRST,
    RECENT,
    START_ON,
    UNDER_THRESHOLD,
    WINDOW,
    Plan,
    make_plan,
)


def V(role: str, calls: tuple[str, ...] = (), answers: tuple[str, ...] = ()) -> MessageView:
    return MessageView(role, None, calls, answers)


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
    views = [V("system"), V("ai", calls=("a",)), V("tool", answers=("a",)), V("human")]
    plan = make_plan(views, count_config(1, 2, cascade_tool_messages=False))
    assert plan.pruned == (1,)


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


def test_the_exchange_in_progress_is_never_pruned() -> None:
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
    # The agent is between tool calls: its latest call, the result so far and the
    # question that opened the turn stay, or it would call the tool again forever.
    assert plan.pruned == (1, 2, 4, 5)
    assert plan.protected == (3, 6, 7)
    assert plan.reason(6) == (IN_PROGRESS, None)
    pending = [V("system"), V("human"), V("ai"), V("human"), V("ai", calls=("z",))]
    assert make_plan(pending, count_config(0, 1)).pruned == (1, 2)
    finished = [*views, V("ai")]
    assert make_plan(finished, count_config(1, 2)).protected == ()


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
    strict = make_plan(views, count_config(4, 5, start_on="human"))
    assert strict.pruned == (1, 2, 3, 4)
    assert strict.reason(4) == (START_ON, None)
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
    views = [V("system"), V("human"), V("ai", calls=("a",)), V("tool", answers=("a",)), V("human")]
    plan = make_plan(views, token_config(10), [1, 1, 50, 5, 1])
    assert plan.pruned == (1, 2, 3)  # the call does not fit, so neither can its result
    assert plan.kept_tokens == 2
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
def histories(draw: st.DrawFn) -> list[MessageView]:
    """Views with tool calls (parallel, pending, orphaned), system and odd roles."""
    views: list[MessageView] = []
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


def in_progress(views: list[MessageView], start: int) -> set[int]:
    """The trailing tool exchange and the question that opened it, found the slow way."""
    plain = [k for k in range(start, len(views)) if not views[k].answers]
    if not plain or views[plain[-1]].role != "ai" or not views[plain[-1]].calls:
        return set()
    k = plain[-1]
    if not all(a in views[k].calls for v in views[k + 1 :] for a in v.answers):
        return set()
    asked = [q for q in range(start, k) if views[q].role == "human" and not views[q].answers]
    return set(range(k, len(views))) | set(asked[-1:])


def reference(views: list[MessageView], cfg: ReducerConfig, cut: int) -> set[int]:
    """The documented rules, implemented the slow obvious way, for a given window end."""
    start = 1 if cfg.preserve_first and views else 0
    busy = in_progress(views, start)
    pruned = {
        i
        for i in range(start, cut)
        if views[i].role in PRUNABLE_ROLES and not views[i].answers and i not in busy
    }
    if cfg.cascade_tool_messages:
        for j in range(start, len(views)):
            for answer in views[j].answers:
                issuers = [i for i in range(j) if answer in views[i].calls]
                if not issuers or issuers[-1] in pruned:
                    pruned.add(j)
    return pruned


def survivors_ok(views: list[MessageView], pruned: set[int], start: int = 1) -> bool:
    """No kept result lacks an earlier kept call (a preserved first message is exempt)."""
    issued: set[str] = set()
    for i, view in enumerate(views):
        if i in pruned:
            continue
        if i >= start and any(a not in issued for a in view.answers):
            return False
        issued.update(view.calls)
    return True


@settings(max_examples=300, deadline=None)
@given(
    histories(),
    st.integers(0, 12),
    st.integers(0, 12),
    st.booleans(),
    st.booleans(),
)
def test_count_mode_matches_reference(
    views: list[MessageView], lo: int, extra: int, first: bool, cascade: bool
) -> None:
    cfg = count_config(lo, lo + extra, preserve_first=first, cascade_tool_messages=cascade)
    plan = make_plan(views, cfg)
    start = 1 if first and views else 0
    if len(views) <= lo + extra:
        # Under the threshold only results orphaned before this call go.
        assert set(plan.pruned) == reference(views, cfg, start)
        return
    expected = reference(views, cfg, max(start, len(views) - lo))
    assert set(plan.pruned) == expected
    assert list(plan.pruned) == sorted(plan.pruned)
    if first:
        assert 0 not in plan.pruned
    if cascade:
        assert survivors_ok(views, set(plan.pruned), int(first))
    for i in plan.pruned:
        assert plan.reason(i)[0] in (WINDOW, CASCADE, ORPHAN)


@settings(max_examples=300, deadline=None)
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
)
def test_token_mode_matches_reference(
    case: tuple[list[MessageView], list[int]],
    mx: int,
    slack: int,
    first: bool,
    cascade: bool,
) -> None:
    views, counts = case
    target = max(1, mx - slack)
    cfg = token_config(mx, target, preserve_first=first, cascade_tool_messages=cascade)
    plan = make_plan(views, cfg, counts)
    total = sum(counts)
    start = 1 if first and views else 0
    if total <= mx:
        assert set(plan.pruned) == reference(views, cfg, start)
        return

    def kept(cut: int) -> int:
        gone = reference(views, cfg, cut)
        return sum(c for i, c in enumerate(counts) if i not in gone)

    # The reference cut: the longest tail whose survivors fit, else nothing prunable kept.
    fitting = [c for c in range(start, len(views) + 1) if kept(c) <= target]
    expected_cut = fitting[0] if fitting else len(views)
    assert set(plan.pruned) == reference(views, cfg, expected_cut)
    assert plan.kept_tokens == kept(expected_cut)
    if fitting:
        assert plan.kept_tokens is not None and plan.kept_tokens <= target
    if cascade:
        assert survivors_ok(views, set(plan.pruned), int(first))


@settings(max_examples=200, deadline=None)
@given(histories(), st.integers(0, 8), st.integers(0, 8), st.booleans())
def test_start_on_human_makes_the_tail_open_with_a_human(
    views: list[MessageView], lo: int, extra: int, first: bool
) -> None:
    cfg = count_config(lo, lo + extra, preserve_first=first, start_on="human")
    plan = make_plan(views, cfg)
    assert survivors_ok(views, set(plan.pruned), int(first))
    if not any(r == WINDOW for r, _ in plan.why.values()):
        return
    start = 1 if first else 0
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
    if rest:
        head = views[rest[0]]
        # Only a role the window may never remove, or the exchange in progress, stops it.
        assert rest[0] in plan.protected or (head.role not in ("ai", "tool") and not head.answers)


def test_plan_reads_real_messages() -> None:
    messages = [{"role": "system", "content": "s"}] + [
        {"role": "user", "content": str(i)} for i in range(6)
    ]
    plan: Plan = make_plan(read_messages(messages), count_config(2, 4))
    assert plan.pruned == (1, 2, 3, 4)
