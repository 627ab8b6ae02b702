"""cache_aware=True: cuts among the earlier turns that pay for the prompt cache they rewrite,
on questions that open a turn, kept where they are while the survivors fit max_tokens."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import histories

from agentstate_reducer import ConfigError, MessageReducer, ReducerConfig, agent_config
from agentstate_reducer.plan import current_turn, make_plan
from agentstate_reducer.plan.cache import READ, WRITE, cache_target, growth
from agentstate_reducer.plan.rules import _openers
from agentstate_reducer.read import MessageRecord, read_messages

# -- the cost model ----------------------------------------------------------------------


def test_the_cut_is_the_shallowest_that_pays_for_the_rewrite() -> None:
    kept = cache_target(8_000, 6_000, 250.0)
    cut = 8_000 - kept
    assert 3_000 <= kept < 6_000
    assert READ * cut * cut / 250 >= WRITE * kept  # it pays for itself
    shallower = cut - 1
    assert READ * shallower * shallower / 250 < WRITE * (8_000 - shallower)  # the least that does


def test_the_target_bounds_the_cut_both_ways() -> None:
    assert cache_target(8_000, 6_000, 1.0) == 6_000  # tiny growth: the target as given
    assert cache_target(8_000, 6_000, 50_000.0) == 3_000  # never under half the target


def V(role: str, calls: tuple[str, ...] = (), answers: tuple[str, ...] = ()) -> MessageRecord:
    return MessageRecord(role, None, calls, answers)


def test_growth_is_tokens_per_reply() -> None:
    views = [V("human"), V("ai", ("c1",)), V("tool", answers=("c1",)), V("ai")]
    assert growth(views, [10, 20, 400, 30]) == 230.0  # two requests made these four
    assert growth(views, [10, 20, 400, 30], start=4) == 1.0
    assert growth([V("human")], [50]) == 50.0  # no reply yet: one request
    assert growth(views * 20, [10, 20, 400, 30] * 20) == 230.0  # the latest 32 messages


# -- the plan ----------------------------------------------------------------------------


def _turns(sizes: list[int], *, steps: int = 1, offset: int = 0) -> list[dict[str, Any]]:
    """One turn a size: a question, ``steps`` tool steps, an answer (dicts, with ids)."""
    out: list[dict[str, Any]] = []
    for t, size in enumerate(sizes, offset):
        out.append({"role": "user", "content": f"q{t} " + "w " * 10, "id": f"q{t}"})
        for s in range(steps):
            call = {"id": f"c{t}.{s}", "type": "function",
                    "function": {"name": "look", "arguments": "{}"}}
            out.append({"role": "assistant", "content": "", "tool_calls": [call],
                        "id": f"a{t}.{s}"})
            out.append({"role": "tool", "tool_call_id": f"c{t}.{s}",
                        "content": "r " * size, "id": f"r{t}.{s}"})
        out.append({"role": "assistant", "content": f"answer {t}", "id": f"f{t}"})
    return out


OPTIONS: dict[str, Any] = {
    "max_tokens": 8_000, "target_tokens": 6_000, "token_counter": "approximate",
    "preserve_first": False,
}


def test_a_cut_lands_on_a_question_opening_a_turn() -> None:
    history = _turns([300] * 40)
    plain = MessageReducer(config=ReducerConfig(**OPTIONS)).reduce(history)
    aware = MessageReducer(config=ReducerConfig(cache_aware=True, **OPTIONS)).reduce(history)
    assert plain.surviving[0]["role"] != "user"  # pruning alone cuts anywhere
    assert aware.surviving[0]["role"] == "user"
    assert plain.tokens_after is not None and aware.tokens_after is not None
    assert 3_000 <= aware.tokens_after < plain.tokens_after <= 6_000


def test_a_stored_history_is_pruned_less_often() -> None:
    prunes = {}
    for aware in (False, True):
        reducer = MessageReducer(config=ReducerConfig(cache_aware=aware, **OPTIONS))
        state: list[Any] = []
        count = 0
        for message in _turns([300] * 120):
            result = reducer.reduce(state, [message])
            count += bool(result.pruned)
            state = result.surviving
        prunes[aware] = count
    assert prunes[True] < prunes[False]


def _requests(reducer: MessageReducer, history: list[Any]) -> list[list[Any]]:
    """Each request of a flow that keeps the history whole and reduces every request."""
    out = []
    for end in range(1, len(history) + 1):
        if history[end - 1]["role"] != "user" and history[end - 1]["role"] != "tool":
            continue  # a request goes after a question or a result
        out.append(reducer.reduce(history[:end]).surviving)
    return out


def test_the_cut_stays_put_while_the_survivors_fit() -> None:
    history = _turns([300] * 120)
    moved = {}
    for aware in (False, True):
        reducer = MessageReducer(config=ReducerConfig(cache_aware=aware, **OPTIONS))
        requests = _requests(reducer, history)
        assert all(sum(reducer.count_tokens(r)) <= 8_000 for r in requests)
        firsts = [r[0]["id"] for r in requests]
        moved[aware] = sum(a != b for a, b in pairwise(firsts))
        if aware:
            for before, after in pairwise(requests):
                if before[0] is after[0]:  # same cut: the earlier request is a prefix
                    assert after[: len(before)] == before
                else:  # moved only because the earlier cut no longer fits
                    tail = history[history.index(before[0]) :]
                    tail = tail[: history.index(after[-1]) - history.index(before[0]) + 1]
                    assert sum(reducer.count_tokens(tail)) > 8_000
    assert moved[True] * 5 < moved[False]  # pruning alone moves it every request past the budget


def test_a_history_kept_whole_sends_what_a_stored_one_does() -> None:
    history = _turns([250, 900, 300, 120] * 25)
    config = ReducerConfig(cache_aware=True, **OPTIONS)
    whole = _requests(MessageReducer(config=config), history)
    stored_reducer = MessageReducer(config=config)
    stored: list[list[Any]] = []
    state: list[Any] = []
    new: list[Any] = []
    for message in history:
        new.append(message)
        if message["role"] in ("user", "tool"):  # the flow reduces before each request
            state = stored_reducer.reduce(state, new).surviving
            new = []
            stored.append(state)
    assert [[m["id"] for m in r] for r in whole] == [[m["id"] for m in r] for r in stored]


def test_the_anchor_is_kept_per_namespace() -> None:
    history = _turns([300] * 40)
    reducer = MessageReducer(config=ReducerConfig(cache_aware=True, **OPTIONS))
    first = reducer.reduce(history, namespace="a").surviving[0]
    other = _turns([300] * 30)
    reducer.reduce(other, namespace="b")
    assert reducer.reduce(history + _turns([5], offset=40), namespace="a").surviving[0] is first
    assert reducer.plan(history).cut == history.index(first)  # a dry run remembers nothing


def _current(size: int, steps: int) -> list[dict[str, Any]]:
    """Ten earlier turns, then a current turn of ``steps`` steps still at work."""
    return _turns([300] * 10) + _turns([size], steps=steps, offset=10)[:-1]


@pytest.mark.parametrize(
    ("size", "steps", "fits"), [(1_300, 9, False), (1_100, 2, True), (1_300, 1, True)]
)
def test_the_current_turn_is_cut_as_without_cache_aware(
    size: int, steps: int, fits: bool
) -> None:
    history = _current(size, steps)
    config = agent_config(max_tokens=3_000, target_tokens=2_000, token_counter="approximate")
    plain = MessageReducer(config=replace(config, cache_aware=False)).reduce(history)
    aware = MessageReducer(config=config).reduce(history)
    assert config.cache_aware and aware.turn_steps_dropped == plain.turn_steps_dropped
    earlier = {m["id"] for m in history[:50]}  # the ten earlier turns

    def turn(result: Any) -> list[Any]:
        return [m for m in result.surviving if m.get("id") not in earlier]

    assert turn(aware) == turn(plain)  # the turn's own cut (its ladder) is pruning alone's
    if fits:
        assert turn(aware) == history[50:]  # a turn that fits max_tokens stays whole
        assert len(aware.surviving) <= len(plain.surviving)


# -- laws (hypothesis) -------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    histories("openai", max_exchanges=8),
    st.data(),
    st.integers(40, 3_000),
    st.floats(0.2, 1.0),
    st.booleans(),
    st.sampled_from([None, "human"]),
    st.booleans(),
)
def test_cache_aware_only_chooses_among_the_earlier_turns(
    messages: list[Any],
    data: st.DataObject,
    most: int,
    share: float,
    first: bool,
    start_on: str | None,
    ladder: bool,
) -> None:
    views = read_messages(messages)
    n = len(views)
    counts = data.draw(st.lists(st.integers(0, 400), min_size=n, max_size=n))
    anchor = data.draw(st.none() | st.integers(0, max(0, n - 1)))
    config = ReducerConfig(
        max_tokens=most, target_tokens=max(1, int(most * share)), preserve_first=first,
        start_on=start_on, turn_ladder=ladder, token_counter="approximate",
    )
    plain = make_plan(views, config, counts)
    aware = make_plan(views, replace(config, cache_aware=True), counts, anchor=anchor)
    assert aware.turn == plain.turn and aware.dropped_steps == plain.dropped_steps
    begin = plain.turn.begin
    assert [i for i in aware.pruned if i >= begin] == [i for i in plain.pruned if i >= begin]
    assert set(aware.protected) == set(plain.protected)  # the current turn is never cut apart
    if plain.kept_tokens is not None and plain.kept_tokens <= most:
        assert aware.kept_tokens is not None and aware.kept_tokens <= most
    kept = [i for i in range(n) if i not in set(aware.pruned)]
    again = make_plan([views[i] for i in kept], replace(config, cache_aware=True),
                      [counts[i] for i in kept])
    if not aware.over_budget:
        assert again.pruned == ()  # idempotent


@settings(max_examples=200, deadline=None)
@given(histories("openai", max_exchanges=8, openai_only=True))
def test_openers_are_the_questions_that_open_a_turn(messages: list[Any]) -> None:
    views = read_messages(messages)
    openers = _openers(views, 0, len(views))
    for lo in range(len(views)):
        assert _openers(views, lo, len(views)) == [i for i in openers if i >= lo]
    for i in range(len(views)):
        turn = current_turn(views[: i + 1])
        assert (turn.opener == i) == (i in openers)


def test_the_option_is_checked_and_on_for_agents() -> None:
    assert ReducerConfig().cache_aware is False
    assert agent_config().cache_aware is True
    assert agent_config(cache_aware=False).cache_aware is False
    with pytest.raises(ConfigError, match="cache_aware must be True or False"):
        ReducerConfig(cache_aware="yes")  # type: ignore[arg-type]
