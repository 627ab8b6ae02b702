"""Calibration from reported usage, budgets as a share of the context window, request overhead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from agentstate_reducer import ConfigError, MessageReducer, ReducerConfig, tokens
from agentstate_reducer.read import reported_input_tokens
from agentstate_reducer.tokens import REPLY_PRIMING_TOKENS, Calibration, request_overhead

CORPUS = Path(__file__).parents[2] / "fixtures" / "token_corpus"
#: A conversation that switches language every message (the holdout half, line by line).
LANGUAGES = ("english", "russian", "chinese", "code", "european", "japanese", "json", "hindi")


def conversation() -> list[dict[str, Any]]:
    lines = {
        name: [x for x in (CORPUS / "holdout" / f"{name}.txt").read_text().splitlines() if x]
        for name in LANGUAGES
    }
    out: list[dict[str, Any]] = []
    for turn in range(8):
        for k, name in enumerate(LANGUAGES):
            text = lines[name][turn % len(lines[name])]
            out.append({"role": "user" if k % 2 == 0 else "assistant", "content": text})
    return out


def convergence(counter: str, turns: int = 8) -> list[tuple[float, float, float]]:
    """Per turn: the counter's error, the calibrated error, the factor (after that turn)."""
    pytest.importorskip("tiktoken")
    truth = tokens.exact_token_counter("o200k_base")
    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**6, token_counter=counter))
    history = conversation()
    step = len(history) // turns
    rows = []
    for turn in range(1, turns + 1):
        sent = history[: turn * step]
        reported = sum(truth(m) for m in sent) + REPLY_PRIMING_TOKENS
        estimate = sum(reducer.count_tokens(sent)) + REPLY_PRIMING_TOKENS
        before = reducer.calibration().factor * estimate
        factor = reducer.calibrate(sent, reported)
        rows.append(((estimate - reported) / reported, (before - reported) / reported, factor))
    return rows


@pytest.mark.parametrize("counter", ["approximate", "claude-sonnet-4-5"])
def test_calibrated_estimates_come_within_3_percent_of_the_reported_truth(counter: str) -> None:
    rows = convergence(counter)
    # The calibrated error of turn t uses what was learned up to turn t - 1.
    assert all(abs(calibrated) <= 0.03 for _, calibrated, _ in rows[3:]), rows
    if counter != "approximate":
        assert all(abs(raw) > 0.2 for raw, _, _ in rows), rows  # the estimator alone is far off


def test_the_factor_is_bounded_and_smoothed() -> None:
    calibration = Calibration()
    assert calibration.factor == 1.0
    assert calibration.observe(100, 1_000) == 2.0  # bounded
    assert calibration.observe(100, 100) == pytest.approx((2 * 50 + 100) / 150)  # halved weight
    for _ in range(30):
        calibration.observe(100, 1)
    assert calibration.factor == pytest.approx(0.5)
    assert calibration.observations == 32
    with pytest.raises(ConfigError, match="reported must be a positive int of tokens, got 0"):
        calibration.observe(100, 0)
    with pytest.raises(ConfigError, match="bounds"):
        Calibration(bounds=(1.5, 2.0))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**6), st.integers(1, 10**6)), min_size=1, max_size=20))
def test_the_factor_stays_within_its_bounds(pairs: list[tuple[int, int]]) -> None:
    calibration = Calibration()
    ratios = []
    for estimated, reported in pairs:
        factor = calibration.observe(estimated, reported)
        ratios.append(min(max(reported / estimated, 0.5), 2.0))
        # A weighted mean of the bounded ratios seen so far.
        assert min(ratios) - 1e-9 <= factor <= max(ratios) + 1e-9


def test_reported_input_tokens_reads_every_usage_shape() -> None:
    usage = {"input_tokens": 120, "output_tokens": 5, "total_tokens": 125}
    assert reported_input_tokens(AIMessage(content="x", usage_metadata=usage)) == 120
    as_dict = {"role": "assistant", "content": "x", "usage_metadata": usage}
    assert reported_input_tokens(as_dict) == 120
    serialised = {"type": "ai", "data": {"content": "x", "usage_metadata": usage}}
    assert reported_input_tokens(serialised) == 120
    assert reported_input_tokens({"usage": {"prompt_tokens": 77, "completion_tokens": 3}}) == 77
    assert reported_input_tokens({"usage": {"input_tokens": 9}}) == 9
    assert reported_input_tokens(55) == 55
    assert reported_input_tokens(AIMessage(content="x")) is None
    assert reported_input_tokens({"role": "user", "content": "hi"}) is None
    assert reported_input_tokens(0) is None
    assert reported_input_tokens(True) is None


def _history(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        out.append(HumanMessage(content=f"question {i} " + "word " * 20, id=f"h{i}"))
        out.append(AIMessage(content=f"answer {i} " + "word " * 20, id=f"a{i}"))
    return out


def _with_usage(message: AIMessage, reported: int) -> AIMessage:
    usage = {"input_tokens": reported, "output_tokens": 1, "total_tokens": reported + 1}
    return message.model_copy(update={"usage_metadata": usage})


def test_usage_metadata_in_the_history_calibrates_the_thread_it_belongs_to() -> None:
    reducer = MessageReducer(config=ReducerConfig(max_tokens=10_000, token_counter="approximate"))
    history = _history(5)
    sent = history[:-1]
    estimate = sum(reducer.count_tokens(sent)) + REPLY_PRIMING_TOKENS
    history[-1] = _with_usage(history[-1], int(estimate * 1.5))
    reducer.reduce(history, namespace=("memories", "t-1"))
    assert reducer.calibration(("memories", "t-1")).factor == pytest.approx(1.5, abs=0.01)
    assert reducer.calibration(("memories", "t-2")).factor == 1.0  # another thread
    assert reducer.calibration().factor == 1.0
    # The same ai message, seen again (as a checkpoint brings it back), is not counted twice.
    later = [*history, HumanMessage(content="next", id="h-next")]
    reducer.reduce(later, namespace=("memories", "t-1"))
    assert reducer.calibration(("memories", "t-1")).observations == 1


def test_the_factor_is_applied_to_the_budget() -> None:
    history = _history(10)
    config = ReducerConfig(min_messages=2, max_tokens=10_000, token_counter="approximate")
    plain = MessageReducer(config=config)
    total = sum(plain.count_tokens(history))
    config = ReducerConfig(min_messages=2, max_tokens=total + 10, token_counter="approximate")
    plain, calibrated = MessageReducer(config=config), MessageReducer(config=config)
    calibrated.calibrate(history, 2 * total)  # the provider bills twice the estimate
    assert plain.reduce(history).pruned == []
    result = calibrated.reduce(history)
    assert result.pruned
    assert 2 * sum(calibrated.count_tokens(result.surviving)) <= total + 10


def test_the_calibrated_budget_is_the_config_with_its_two_budgets_changed() -> None:
    """Built without validating again: equal to ``dataclasses.replace`` of the config,
    every other field the config's own."""
    import dataclasses

    history = _history(10)
    config = ReducerConfig(
        min_messages=2, max_tokens=10_000, target_tokens=6_000, token_counter="approximate"
    )
    reducer = MessageReducer(config=config)
    reducer.calibrate(history, 2 * sum(reducer.count_tokens(history)))
    budget = reducer._budget(None)
    assert budget is not config and budget.max_tokens is not None
    assert budget.max_tokens < config.max_tokens
    want = dataclasses.replace(
        config, max_tokens=budget.max_tokens, target_tokens=budget.target_tokens
    )
    assert budget == want and vars(budget) == vars(want)
    assert budget.target_tokens is not None and 1 <= budget.target_tokens <= budget.max_tokens
    assert reducer._budget(None) is budget  # remembered


def test_calibration_can_be_turned_off() -> None:
    reducer = MessageReducer(
        config=ReducerConfig(
            max_tokens=10_000, token_counter="approximate", calibrate_from_usage=False
        )
    )
    history = _history(3)
    history[-1] = _with_usage(history[-1], 5_000)
    reducer.reduce(history)
    assert reducer.calibration().observations == 0


def test_calibrate_refuses_what_it_cannot_read() -> None:
    reducer = MessageReducer(config=ReducerConfig(max_tokens=100, token_counter="approximate"))
    with pytest.raises(ConfigError, match="reported must be a positive count"):
        reducer.calibrate(_history(1), {"usage": {}})


# -- budgets as a share of the context window ------------------------------------------


def test_a_fraction_of_the_models_window() -> None:
    config = ReducerConfig(
        max_tokens=("fraction", 0.8), target_tokens=("fraction", 0.5), model="gpt-4o"
    )
    assert (config.max_tokens, config.target_tokens) == (102_400, 64_000)
    assert config.counter == "gpt-4o"
    assert ReducerConfig(max_tokens=("fraction", 1), model="gpt-4").max_tokens == 8_192
    claude = ReducerConfig(max_tokens=("fraction", 0.5), model="claude-sonnet-4-5")
    assert claude.max_tokens == 100_000


class _ChatModel:
    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)

    def get_num_tokens_from_messages(self, messages: list[Any]) -> int:
        return 7 * len(messages)


def test_a_fraction_of_a_chat_models_profile() -> None:
    model = _ChatModel(profile={"max_input_tokens": 50_000}, model_name="gpt-4o-mini")
    config = ReducerConfig(max_tokens=("fraction", 0.5), model=model)
    assert config.max_tokens == 25_000
    assert config.counter == "gpt-4o-mini"  # counted as the registry says for its name
    unknown = _ChatModel(profile={"max_input_tokens": 8_000}, model_name="mistral-7b")
    config = ReducerConfig(max_tokens=("fraction", 0.5), model=unknown)
    assert config.max_tokens == 4_000
    assert config.counter is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": ("fraction", 0.8)}, "set model="),
        ({"max_tokens": ("fraction", 1.5), "model": "gpt-4o"}, "needs 0 < f <= 1"),
        ({"max_tokens": ("share", 0.5), "model": "gpt-4o"}, "an int, None or ('fraction', f)"),
        ({"max_tokens": 100, "model": "mistral-7b"}, "not in the model registry"),
        ({"max_tokens": ("fraction", 0.5), "model": _ChatModel()}, "model must be a model name"),
        ({"max_tokens": 100, "tools": "search"}, "tools must be a list"),
        ({"max_tokens": 100, "system_prompt": 3}, "system_prompt must be a string"),
        ({"max_tokens": 100, "calibrate_from_usage": 1}, "calibrate_from_usage must be True"),
    ],
)
def test_bad_budget_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ReducerConfig(**options)


# -- the system prompt and tools, counted once -------------------------------------------

SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the knowledge base for documents about a topic.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"],
        },
    },
}


def test_tools_and_the_system_prompt_are_left_room_for() -> None:
    history = _history(6)
    probe = MessageReducer(config=ReducerConfig(max_tokens=10_000, token_counter="approximate"))
    total = sum(probe.count_tokens(history))
    overhead = request_overhead(
        tokens.approximate_token_count, tools=[SEARCH], system_prompt="You are terse."
    )
    assert overhead > 40
    options = {"min_messages": 2, "max_tokens": total + 5, "token_counter": "approximate"}
    bare = MessageReducer(config=ReducerConfig(**options))
    loaded = MessageReducer(
        config=ReducerConfig(**options, tools=[SEARCH], system_prompt="You are terse.")
    )
    assert bare.reduce(history).pruned == []
    kept = loaded.reduce(history).surviving
    assert sum(loaded.count_tokens(kept)) + overhead <= total + 5


def test_a_langchain_tool_is_counted_as_its_schema() -> None:
    from langchain_core.tools import tool

    @tool
    def search(query: str, limit: int = 5) -> str:
        """Search the knowledge base for documents about a topic."""
        return query

    counter = tokens.approximate_token_count
    as_tool = request_overhead(counter, tools=[search])
    as_dict = request_overhead(counter, tools=[tokens.calibration._tool_schema(search)])
    assert as_tool == as_dict > 20
    with pytest.raises(ConfigError, match="cannot convert"):
        request_overhead(counter, tools=[object()])
