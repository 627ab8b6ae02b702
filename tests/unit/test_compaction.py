"""Provider-side compaction, orchestrated (issue 26 item 3): the request parameters built
against the shapes the providers' docs record (tests/fixtures/compaction), the threshold
below the local trigger, a reply holding a compaction item or block reduced locally, and
the local reducer as the fallback when the provider does not compact. No network."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from agentstate_reducer import ConfigError, MessageReducer, ReducerConfig
from agentstate_reducer.compaction import (
    ANTHROPIC_MIN_TRIGGER,
    compacted_at,
    compaction_threshold,
    provider_compaction,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "compaction"


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    data.pop("_source")
    return data


def _without_numbers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_numbers(v) for v in value]
    return 0 if isinstance(value, int) and not isinstance(value, bool) else value


# -- the parameters built ---------------------------------------------------------------


def test_openai_parameters_have_the_documented_request_shape() -> None:
    request = fixture("openai_responses_request")
    built = provider_compaction(ReducerConfig(max_tokens=220_000), "openai-responses")
    assert set(built) == {"context_management"}
    assert _without_numbers(built["context_management"]) == _without_numbers(
        request["context_management"]
    )
    assert built["context_management"][0]["compact_threshold"] == 198_000


def test_anthropic_parameters_have_the_documented_request_shape() -> None:
    request = fixture("anthropic_request")
    built = provider_compaction(ReducerConfig(max_tokens=170_000), "anthropic")
    assert built["betas"] == request["betas"]
    assert _without_numbers(built["context_management"]) == _without_numbers(
        request["context_management"]
    )
    assert built["context_management"]["edits"][0]["trigger"]["value"] == 153_000
    with_prompt = provider_compaction(
        ReducerConfig(max_tokens=170_000), "anthropic", instructions="Keep file paths."
    )
    assert with_prompt["context_management"]["edits"][0]["instructions"] == "Keep file paths."


@pytest.mark.parametrize("provider", ["openai-responses", "anthropic"])
@pytest.mark.parametrize("max_tokens", [60_000, 128_000, 800_000])
def test_the_provider_threshold_sits_below_the_local_trigger(
    provider: str, max_tokens: int
) -> None:
    config = ReducerConfig(max_tokens=max_tokens)
    value = compaction_threshold(config, provider)
    assert value < config.max_tokens
    assert value == int(max_tokens * 0.9)
    assert compaction_threshold(config, provider, margin=0.15) == int(max_tokens * 0.85)
    assert compaction_threshold(config, provider, threshold=55_000) == 55_000


def test_a_fraction_budget_is_resolved_before_the_threshold() -> None:
    config = ReducerConfig(model="gpt-4o", max_tokens=("fraction", 0.8))
    assert compaction_threshold(config) == int(config.max_tokens * 0.9) < config.max_tokens


@pytest.mark.parametrize(
    ("config", "provider", "options", "words"),
    [
        (ReducerConfig(), "openai-responses", {}, "token mode"),
        (ReducerConfig(max_tokens=100_000), "openai", {}, "provider"),
        (ReducerConfig(max_tokens=100_000), "gemini", {}, "provider"),
        (ReducerConfig(max_tokens=100_000), "anthropic", {"threshold": 100_000}, "below"),
        (ReducerConfig(max_tokens=100_000), "anthropic", {"threshold": 49_999}, "minimum"),
        (ReducerConfig(max_tokens=40_000), "anthropic", {}, "minimum"),
        (ReducerConfig(max_tokens=100_000), "anthropic", {"threshold": 0}, "threshold"),
        (ReducerConfig(max_tokens=100_000), "anthropic", {"threshold": True}, "threshold"),
        (ReducerConfig(max_tokens=100_000), "anthropic", {"margin": 1.5}, "margin"),
        (ReducerConfig(max_tokens=100_000), "anthropic", {"instructions": 3}, "instructions"),
        (
            ReducerConfig(max_tokens=100_000),
            "openai-responses",
            {"instructions": "x"},
            "instructions",
        ),
    ],
)
def test_bad_settings_are_config_errors_naming_the_field(
    config: ReducerConfig, provider: str, options: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigError, match=words):
        provider_compaction(config, provider, **options)


def test_openai_has_no_minimum_anthropic_has_its_documented_one() -> None:
    config = ReducerConfig(max_tokens=20_000)
    assert compaction_threshold(config, "openai-responses") == 18_000
    assert ANTHROPIC_MIN_TRIGGER == 50_000


# -- a reply holding a compaction, reduced locally --------------------------------------


def _responses_history(steps: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "Help me refactor the billing module"}
    ]
    for i in range(steps):
        items.append(
            {
                "type": "function_call",
                "call_id": f"call_{i}",
                "name": "read_file",
                "arguments": json.dumps({"path": f"billing/{i}.py"}),
            }
        )
        items.append(
            {"type": "function_call_output", "call_id": f"call_{i}", "output": "x = 1\n" * 200}
        )
    return items


def test_a_responses_compaction_item_is_the_new_boundary() -> None:
    response = fixture("openai_responses_response")
    history = _responses_history(6) + copy.deepcopy(response["output"])
    history.append({"type": "message", "role": "user", "content": "Now the tests"})
    sent = copy.deepcopy(history)
    reducer = MessageReducer(config=ReducerConfig(max_tokens=200_000, preserve_first=False))
    result = reducer.reduce(sent)
    assert compacted_at(history) == 13
    # what precedes it is not sent; the item itself is kept as returned, and counted
    assert result.surviving == history[13:]
    assert result.pruned_by_reason == {"compacted": 13}
    assert result.surviving[0] == response["output"][0]
    counts = reducer.count_tokens(result.surviving)
    assert counts[0] > 0
    assert result.tokens_after == sum(counts)
    assert sent == history  # the input is not changed


def test_an_anthropic_compaction_block_is_the_new_boundary() -> None:
    response = fixture("anthropic_response")
    history: list[dict[str, Any]] = [{"role": "user", "content": "Help me build a website"}]
    for i in range(5):
        history.append({"role": "assistant", "content": f"Page {i} is done. " * 40})
        history.append({"role": "user", "content": f"Next page {i + 1}"})
    reply = {"role": "assistant", "content": copy.deepcopy(response["content"])}
    history.append(reply)
    history.append({"role": "user", "content": "Add the contact form"})
    reducer = MessageReducer(config=ReducerConfig(max_tokens=200_000, preserve_first=False))
    result = reducer.reduce(copy.deepcopy(history))
    assert compacted_at(history) == 11
    assert result.surviving == history[11:]
    assert result.pruned_by_reason == {"compacted": 11}
    assert result.surviving[0]["content"] == response["content"]  # byte-identical
    summary = response["content"][0]["content"]
    without = {"role": "assistant", "content": [response["content"][1]]}
    with_block, without_block = reducer.count_tokens([reply, without])
    assert with_block > without_block + len(summary) // 8  # the summary is counted


def test_a_later_compaction_moves_the_boundary() -> None:
    first = {"type": "compaction", "id": "cmp_1", "encrypted_content": "a" * 40}
    second = {"type": "compaction", "id": "cmp_2", "encrypted_content": "b" * 40}
    history = [
        {"type": "message", "role": "user", "content": "q1"},
        first,
        {"type": "message", "role": "user", "content": "q2"},
        second,
        {"type": "message", "role": "user", "content": "q3"},
    ]
    assert compacted_at(history) == 3
    result = MessageReducer(config=ReducerConfig(max_tokens=100_000, preserve_first=False)).reduce(
        history
    )
    assert result.surviving == history[3:]


# -- the fallback: no compaction, the local reducer bounds the request ------------------


@pytest.mark.parametrize("provider", ["openai-responses", "anthropic"])
def test_without_a_compaction_the_local_reducer_still_bounds_the_request(provider: str) -> None:
    config = ReducerConfig(max_tokens=60_000, target_tokens=40_000, preserve_first=False)
    provider_compaction(config, provider)  # asked for, but the provider did not compact
    reducer = MessageReducer(config=config)
    if provider == "anthropic":
        history: list[dict[str, Any]] = []
        for i in range(150):
            history.append({"role": "user", "content": f"question {i} " + "word " * 300})
            history.append({"role": "assistant", "content": f"answer {i} " + "word " * 300})
    else:
        history = _responses_history(90)
    assert compacted_at(history) is None
    assert sum(reducer.count_tokens(history)) > config.max_tokens
    result = reducer.reduce(history)
    assert result.tokens_after is not None and result.tokens_after <= config.max_tokens
    assert "compacted" not in result.pruned_by_reason
    assert result.pruned


# -- calibration: a compacting reply's usage is the compacted request's ------------------


@pytest.mark.parametrize("appended", [False, True])
def test_a_compacting_reply_does_not_teach_the_calibration(appended: bool) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage

    response = fixture("anthropic_response")
    history: list[Any] = [HumanMessage("Help me build a website", id="h-0")]
    for i in range(40):
        history.append(AIMessage(f"Page {i} is done. " * 60, id=f"a-{i}"))
        history.append(HumanMessage(f"Next page {i + 1}", id=f"h-{i + 1}"))
    # Anthropic reports the input of the request after it compacted: far below what was sent
    history.append(
        AIMessage(
            content=copy.deepcopy(response["content"]),
            id="compacted",
            usage_metadata={"input_tokens": 300, "output_tokens": 1000, "total_tokens": 1300},
        )
    )
    history.append(HumanMessage("Add the contact form", id="h-last"))
    reducer = MessageReducer(config=ReducerConfig(max_tokens=200_000, preserve_first=False))
    if appended:  # the incremental path: the reply and the question are new
        before = reducer.reduce(history[:-2]).surviving
        result = reducer.reduce(before, history[-2:])
    else:
        result = reducer.reduce(history)
    assert result.surviving == history[-2:]
    assert reducer.calibration().observations == 0
    assert reducer.calibration().factor == 1.0
