"""The model registry of late 2026: windows, tokenizer families, and how a window is chosen."""

from __future__ import annotations

from typing import Any

import pytest

from agentstate_reducer import ConfigError, ReducerConfig, tokens
from agentstate_reducer.tokens import (
    approximate_text_tokens,
    context_window,
    exact_token_counter,
    model_family,
    resolve_token_counter,
)


@pytest.mark.parametrize(
    ("model", "family", "counter", "window"),
    [
        # Claude: 1M where the model overviews say so, 200K elsewhere.
        ("claude-opus-4-6", "claude-4.6", "claude", 1_000_000),
        ("claude-sonnet-4-6", "claude-4.6", "claude", 1_000_000),
        ("anthropic.claude-opus-4-6-v1:0", "claude-4.6", "claude", 1_000_000),
        ("anthropic/claude-opus-4.6", "claude-4.6", "claude", 1_000_000),
        ("claude-opus-4-7", "claude-4.7+", "claude-4.7", 1_000_000),
        ("claude-opus-4-8", "claude-4.7+", "claude-4.7", 1_000_000),
        ("claude-opus-5", "claude-4.7+", "claude-4.7", 1_000_000),
        ("claude-opus-5-5", "claude-4.7+", "claude-4.7", 1_000_000),
        ("claude-sonnet-5", "claude-4.7+", "claude-4.7", 1_000_000),
        ("claude-sonnet-5-5", "claude-4.7+", "claude-4.7", 1_000_000),
        ("claude-haiku-5-5", "claude-4.7+", "claude-4.7", 1_000_000),
        ("claude-fable-5-1", "claude-4.7+", "claude-4.7", 1_000_000),
        ("claude-mythos-5", "claude-4.7+", "claude-4.7", 200_000),
        ("claude-opus-4-5-20251101", "claude", "claude", 200_000),
        ("claude-sonnet-4-5-20250929", "claude", "claude", 200_000),
        ("claude-haiku-4-5", "claude", "claude", 200_000),
        ("claude-3-5-haiku-latest", "claude", "claude", 200_000),
        # OpenAI: GPT-5.4 and later stop at the 272k price step; minis and nanos are 400k.
        ("gpt-5.5", "gpt-5.4+", "o200k_base", 272_000),
        ("gpt-5.5-pro", "gpt-5.4+", "o200k_base", 272_000),
        ("openai:gpt-5.4", "gpt-5.4+", "o200k_base", 272_000),
        ("gpt-5.6", "gpt-5.4+", "o200k_base", 272_000),
        ("gpt-5.4-mini", "gpt-5", "o200k_base", 272_000),
        ("gpt-5.4-nano", "gpt-5", "o200k_base", 272_000),
        ("gpt-5.2", "gpt-5", "o200k_base", 272_000),
        ("gpt-5-mini", "gpt-5", "o200k_base", 272_000),
        # Gemini 3.x.
        ("gemini-3-flash-preview", "gemini-3", "gemini", 1_048_576),
        ("models/gemini-3.1-pro-preview", "gemini-3", "gemini", 1_048_576),
        ("gemini-3.8-flash", "gemini-3", "gemini", 1_048_576),
        # Open models.
        ("gpt-oss-120b", "gpt-oss", "o200k_base", 131_072),
        ("deepseek-chat", "deepseek", "deepseek", 128_000),
        ("deepseek/deepseek-v3.2", "deepseek", "deepseek", 128_000),
        ("qwen3-32b", "qwen", "qwen", 131_072),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen", "qwen", 131_072),
        ("qwen3-coder-30b-a3b-instruct", "qwen", "qwen", 262_144),
        ("qwen3-235b-a22b-instruct-2507", "qwen", "qwen", 262_144),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama", "llama", 131_072),
        ("llama3.1:8b", "llama", "llama", 131_072),
        ("llama-4-maverick", "llama", "llama", 1_000_000),
        ("llama3:8b", "llama", "llama", 8_192),
    ],
)
def test_models_of_today(model: str, family: str, counter: str, window: int) -> None:
    row = model_family(model)
    assert (row.family, row.counter, context_window(model)) == (family, counter, window)
    assert row.source  # every row names its documents


def test_the_full_window_past_the_price_step_is_asked_for() -> None:
    assert context_window("gpt-5.5", full=True) == 922_000
    assert context_window("gpt-5.2", full=True) == 272_000  # no step: the same window
    assert context_window("claude-opus-5", full=True) == 1_000_000
    default = ReducerConfig(model="gpt-5.5", max_tokens=("fraction", 0.8))
    full = ReducerConfig(model="gpt-5.5", max_tokens=("fraction", 0.8), context_window="full")
    assert (default.max_tokens, full.max_tokens) == (217_600, 737_600)


def test_claude_1m_budgets_are_five_times_the_old_ones() -> None:
    config = ReducerConfig(model="claude-opus-5-5", max_tokens=("fraction", 0.8))
    assert config.max_tokens == 800_000
    assert config.counter == "claude-opus-5-5"


def test_an_unknown_name_with_an_explicit_window_works() -> None:
    config = ReducerConfig(
        model="mistral-large-3",
        context_window=128_000,
        max_tokens=("fraction", 0.8),
        target_tokens=("fraction", 0.5),
    )
    assert (config.max_tokens, config.target_tokens) == (102_400, 64_000)
    assert config.counter is None  # the default counter
    with pytest.raises(ConfigError, match="set context_window= to use a model the registry"):
        ReducerConfig(model="mistral-large-3", max_tokens=("fraction", 0.8))


def test_an_explicit_window_wins_over_the_registry_and_a_profile() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    assert (
        ReducerConfig(
            model="gpt-4o", context_window=64_000, max_tokens=("fraction", 0.5)
        ).max_tokens
        == 32_000
    )
    chat = GenericFakeChatModel(messages=iter([]), profile={"max_input_tokens": 40_000})
    assert context_window(chat) == 40_000  # the chat model's own profile first
    assert ReducerConfig(model=chat, max_tokens=("fraction", 0.5)).max_tokens == 20_000
    assert (
        ReducerConfig(model=chat, context_window=10_000, max_tokens=("fraction", 0.5)).max_tokens
        == 5_000
    )
    assert ReducerConfig(context_window=10_000, max_tokens=("fraction", 0.5)).max_tokens == 5_000


def test_a_langchain_chat_models_profile_is_read_before_its_name() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class NamedChat(GenericFakeChatModel):
        model_name: str = "claude-opus-5"  # 1,000,000 in the registry

    profiled = NamedChat(messages=iter([]), profile={"max_input_tokens": 300_000})
    assert context_window(profiled) == 300_000
    config = ReducerConfig(model=profiled, max_tokens=("fraction", 0.5))
    assert config.max_tokens == 150_000
    assert config.counter == "claude-opus-5"  # the name still picks the counter
    bare = NamedChat(messages=iter([]))
    assert ReducerConfig(model=bare, max_tokens=("fraction", 0.5)).max_tokens == 500_000


class _Named:
    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)


def test_a_profile_wins_over_the_table() -> None:
    profiled = _Named(profile={"max_input_tokens": 300_000}, model_name="claude-opus-5")
    assert context_window(profiled) == 300_000
    assert context_window(_Named(profile={}, model_name="claude-opus-5")) == 1_000_000
    assert context_window(_Named(model_id="gpt-5.5")) == 272_000


@pytest.mark.parametrize("value", [0, -5, 1.5, "half", True])
def test_a_bad_context_window_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(ConfigError, match=r"context_window must be a positive int, 'full' or None"):
        ReducerConfig(model="gpt-4o", context_window=value)


@pytest.mark.parametrize(
    ("model", "estimator"),
    [
        ("claude-opus-5-5", "claude-4.7"),
        ("claude-sonnet-4-6", "claude"),
        ("qwen3-32b", "qwen"),
        ("deepseek-chat", "deepseek"),
        ("llama-3.3-70b", "llama"),
        ("gemini-3-flash", "gemini"),
    ],
)
def test_estimated_families_scale_the_heuristic_by_their_factor(model: str, estimator: str) -> None:
    counter = resolve_token_counter(model)
    factor = tokens.ESTIMATORS[estimator].factor
    text = "The deployment failed because the config map was missing a key." * 3
    assert tokens.count._text_counter(counter)(text) == int(  # type: ignore[misc]
        approximate_text_tokens(text) * factor + 0.5
    )


def test_the_newer_claude_tokenizer_counts_about_30_percent_more() -> None:
    older = tokens.ESTIMATORS["claude"].factor
    newer = tokens.ESTIMATORS["claude-4.7"].factor
    assert 1.25 <= newer / older <= 1.35  # "approximately 30 percent more tokens"


def test_gpt_oss_counts_exactly() -> None:
    pytest.importorskip("tiktoken")
    assert resolve_token_counter("gpt-oss-20b") is exact_token_counter("o200k_base")
