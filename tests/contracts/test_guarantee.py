"""The guarantee: a history a provider accepts stays acceptable after it is pruned or trimmed.

For every combination of mode (count/token), ``preserve_first``, ``inject_summary`` and
``start_on``, over generated valid histories with parallel tool calls, pending calls and
Anthropic block shapes: if ``validate_history(xs, provider=p) == []`` then
``validate_history(reduce(xs).surviving, provider=p) == []``, with ``start_on="human"``
for Anthropic; and so does ``trim_messages(xs, ..., keep_tool_pairs=True)`` for every
strategy and ``include_system`` (``start_on="human"`` for Anthropic).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import histories

from agentstate_reducer import MessageReducer, ReducerConfig, trim_messages, validate_history
from agentstate_reducer.plan import make_plan
from agentstate_reducer.read import read_message, read_messages

COMBOS = [
    (provider, mode, preserve_first, inject_summary, start_on)
    for provider, mode, preserve_first, inject_summary, start_on in itertools.product(
        ("openai", "anthropic"), ("count", "token"), (True, False), (True, False), (None, "human")
    )
    if provider == "openai" or start_on == "human"
]


def _summarize(pruned: list[Any]) -> str:
    return f"{len(pruned)} messages about the weather"


@st.composite
def _configs(
    draw: st.DrawFn, mode: str, preserve_first: bool, inject_summary: bool, start_on: str | None
) -> ReducerConfig:
    options: dict[str, Any] = {"preserve_first": preserve_first, "start_on": start_on}
    if inject_summary:
        options.update(summarize_fn=_summarize, inject_summary=True)
    if mode == "token":
        most = draw(st.integers(1, 250))
        options.update(
            max_tokens=most, target_tokens=draw(st.integers(1, most)), token_counter="approximate"
        )
    else:
        least = draw(st.integers(0, 8))
        options.update(min_messages=least, max_messages=draw(st.integers(least, least + 8)))
    return ReducerConfig(**options)


@pytest.mark.parametrize(
    ("provider", "mode", "preserve_first", "inject_summary", "start_on"), COMBOS
)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_reduce_keeps_a_valid_history_valid(
    data: st.DataObject,
    provider: str,
    mode: str,
    preserve_first: bool,
    inject_summary: bool,
    start_on: str | None,
) -> None:
    history = data.draw(histories(openai_only=provider == "openai"), label="history")
    assert validate_history(history, provider=provider) == []
    config = data.draw(_configs(mode, preserve_first, inject_summary, start_on), label="config")
    result = MessageReducer(config=config).reduce(history)
    assert validate_history(result.surviving, provider=provider) == []


# -- trim_messages --------------------------------------------------------------------

TRIM_COMBOS = [
    (provider, strategy, include_system, start_on)
    for provider, strategy, include_system, start_on in itertools.product(
        ("openai", "anthropic"), ("first", "last"), (True, False), (None, "human")
    )
    if (strategy == "last" or (not include_system and start_on is None))
    and (provider == "openai" or strategy == "first" or start_on == "human")
]


@pytest.mark.parametrize(("provider", "strategy", "include_system", "start_on"), TRIM_COMBOS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_trim_messages_keeps_a_valid_history_valid(
    data: st.DataObject, provider: str, strategy: str, include_system: bool, start_on: str | None
) -> None:
    history = data.draw(histories(openai_only=provider == "openai"), label="history")
    options: dict[str, Any] = {"strategy": strategy, "token_counter": "approximate"}
    if strategy == "last":
        options.update(include_system=include_system, start_on=start_on)
    kept = trim_messages(
        history,
        max_tokens=data.draw(st.integers(0, 300), label="max_tokens"),
        allow_partial=data.draw(st.booleans(), label="allow_partial"),
        keep_tool_pairs=True,
        **options,
    )
    assert validate_history(kept, provider=provider) == []


def test_trim_messages_partial_text_is_never_blank() -> None:
    history = [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "answer"},
        {"role": "user", "content": "line one\n\n"},
    ]
    for budget in range(4, 7):
        kept = trim_messages(
            history, max_tokens=budget, token_counter="approximate", allow_partial=True
        )
        assert validate_history(kept, provider="anthropic") == []


# -- start_on="human" --------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    history=histories(openai_only=True),
    config=st.sampled_from(["count", "token"]).flatmap(
        lambda mode: st.booleans().flatmap(lambda pf: _configs(mode, pf, False, "human"))
    ),
)
def test_start_on_human_kept_tail_starts_with_a_human_message(
    history: list[Any], config: ReducerConfig
) -> None:
    reducer = MessageReducer(config=config)
    plan = reducer.plan(history)
    if not plan.pruned:
        return
    views = read_messages(history)
    if not any(v.role == "human" and not v.answers for v in views[plan.start :]):
        return  # no question to open the tail with: the cut stays where the window put it
    gone = set(plan.pruned)
    head_calls = set(views[0].calls) if config.preserve_first else set()
    for i in range(plan.start, len(views)):
        view = views[i]
        if i in gone or view.role == "system":
            continue
        if view.answers and set(view.answers) <= head_calls:
            continue  # results of the preserved first message's calls stay with it
        turn = plan.turn
        if turn is not None and turn.opener not in gone and turn.opener < i:
            # Inside the current turn, whose question is kept (the preserved first
            # message): its oldest steps went, never the question (the turn rule).
            assert plan.reason(i)[0] == "current turn"
            break
        # The first kept message of the tail is a human question.
        assert view.role == "human" and not view.answers, plan.reason(i)
        break


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(history=histories(openai_only=True), least=st.integers(0, 8), extra=st.integers(0, 8))
def test_start_on_human_in_count_mode_only_keeps_more(
    history: list[Any], least: int, extra: int
) -> None:
    base = {"min_messages": least, "max_messages": least + extra}
    views = read_messages(history)
    without = make_plan(views, ReducerConfig(**base))
    with_human = make_plan(views, ReducerConfig(**base, start_on="human"))
    humans = [
        i for i, v in enumerate(views) if i >= without.start and v.role == "human" and not v.answers
    ]
    if humans and humans[0] <= without.cut:
        # The cut moves back to the question of the turn it falls in: nothing more goes.
        assert set(with_human.pruned) <= set(without.pruned)
    if humans:
        assert humans[-1] not in with_human.pruned


def test_without_start_on_an_anthropic_history_can_start_with_the_assistant() -> None:
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "sunny"},
    ]
    assert validate_history(history, provider="anthropic") == []
    config = ReducerConfig(min_messages=1, max_messages=3)
    cut = MessageReducer(config=config).reduce(history).surviving
    assert [p.rule for p in validate_history(cut, provider="anthropic")] == ["first-not-user"]
    config = ReducerConfig(min_messages=1, max_messages=3, start_on="human")
    cut = MessageReducer(config=config).reduce(history).surviving
    assert cut == [history[0], *history[3:]]  # back to the question of the last turn
    assert validate_history(cut, provider="anthropic") == []


def test_start_on_human_keeps_the_results_of_a_preserved_first_call() -> None:
    calls = [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    history = [
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "a", "content": "42"},
        {"role": "assistant", "content": "the answer is 42"},
        {"role": "user", "content": "why?"},
        {"role": "assistant", "content": "because"},
    ]
    config = ReducerConfig(min_messages=0, max_messages=0, start_on="human")
    plan = make_plan(read_messages(history), config)
    assert plan.pruned == (2,)  # the latest question and its answer survive
    surviving = MessageReducer(config=config).reduce(history).surviving
    assert surviving == [*history[:2], *history[3:]]
    assert validate_history(surviving, provider="openai") == []


def test_injected_summary_alternates_with_the_kept_tail() -> None:
    history = [{"role": "system", "content": "sys"}]
    for i in range(4):
        history += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
    history.append({"role": "assistant", "content": "one more thing"})
    config = ReducerConfig(
        min_messages=3,
        max_messages=4,
        start_on="human",
        summarize_fn=_summarize,
        inject_summary=True,
    )
    surviving = MessageReducer(config=config).reduce(history).surviving
    roles = [read_message(m).role for m in surviving]
    assert roles == ["system", "human", "ai", "human", "ai", "ai"]
    assert validate_history(surviving, provider="anthropic") == []


# -- the current turn and dead calls, in every shape --------------------------------------


def _turn_of(history: list[Any], start: int) -> tuple[int | None, list[int], list[int]]:
    """(opener, indices of the turn, ai indices of its steps), read the slow way."""
    views = read_messages(history)
    openers = [i for i, v in enumerate(views) if v.role == "human" and not v.answers]
    opener = openers[-1] if openers else None
    begin = opener if opener is not None else start
    steps = [i for i in range(begin, len(views)) if views[i].role == "ai" and views[i].calls]
    return opener, list(range(begin, len(views))), steps


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    history=histories(),
    mode=st.sampled_from(["count", "token"]),
    start_on=st.sampled_from([None, "human"]),
    data=st.data(),
)
def test_the_current_turn_survives_in_every_shape(
    history: list[Any], mode: str, start_on: str | None, data: st.DataObject
) -> None:
    config = data.draw(_configs(mode, True, False, start_on), label="config")
    result = MessageReducer(config=config).reduce(history)
    kept = {id(m) for m in result.surviving}
    opener, turn, steps = _turn_of(history, 1 if history else 0)
    if steps:
        if opener is not None and opener > 0:
            assert id(history[opener]) in kept
        if mode == "count":
            assert all(id(history[i]) in kept for i in turn if i > 0)
        else:
            assert id(history[steps[-1]]) in kept  # the latest step's call, always
    if start_on == "human" and opener is not None:
        assert id(history[opener]) in kept  # the latest question, always


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_repair_makes_an_abandoned_call_valid_in_every_shape(
    provider: str, data: st.DataObject
) -> None:
    from strategies import Calls, render, scripts

    from agentstate_reducer import agent_config

    script = data.draw(scripts(openai_only=provider == "openai"), label="script")
    shape = data.draw(st.sampled_from(["openai", "langchain", "anthropic", "langchain_blocks"]))
    history = render(script, shape)
    mode = data.draw(st.sampled_from(["count", "token"]), label="mode")
    base = data.draw(_configs(mode, True, False, "human"), label="config")
    options = {f: getattr(base, f) for f in ("min_messages", "max_messages", "max_tokens",
                                             "target_tokens", "token_counter")}
    reducer = MessageReducer(config=agent_config(**options))
    pending = bool(script.events) and isinstance(script.events[-1], Calls)
    result = reducer.reduce(history)
    assert result.repaired == []  # valid histories have no dead call; pending ones stay
    if pending:
        assert result.surviving[-1] is history[-1]
    # The user abandons the pending call: it is dead, and gets a result.
    follow = render(type(script)([*script.events, *_say_human()]), shape)[-1]
    result = reducer.reduce([*history, follow])
    if pending and any(m is history[-1] for m in result.surviving):
        assert len(result.repaired) >= 1
    assert validate_history(result.surviving, provider=provider) == []
    assert reducer.reduce(result.surviving).surviving == result.surviving


def _say_human() -> list[Any]:
    from strategies import Say

    return [Say("human", "never mind")]
