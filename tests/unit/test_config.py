"""ReducerConfig rejects bad values at construction, naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from agentstate_reducer import ConfigError, ReducerConfig


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"min_messages": -1}, "min_messages"),
        ({"max_messages": -5}, "max_messages"),
        ({"min_messages": 30, "max_messages": 20}, "min_messages"),
        ({"min_messages": "3"}, "min_messages"),
        ({"min_messages": True}, "min_messages"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": -10}, "max_tokens"),
        ({"max_tokens": 100, "target_tokens": 101}, "target_tokens"),
        ({"max_tokens": 100, "target_tokens": 0}, "target_tokens"),
        ({"target_tokens": 50}, "target_tokens"),
        ({"dedupe_window": 0}, "dedupe_window"),
        ({"dedupe_window": 2.5}, "dedupe_window"),
        ({"inject_summary": True}, "inject_summary"),
        ({"summarize_fn": "not callable"}, "summarize_fn"),
        ({"summary_message_factory": 3}, "summary_message_factory"),
        ({"on_prune": [print, None]}, "on_prune[1]"),
        ({"on_prune": print}, "on_prune"),
        ({"token_counter": 12}, "token_counter"),
        ({"token_counter": "words"}, "token_counter"),
        ({"namespace_key": ""}, "namespace_key"),
        ({"start_on": "ai"}, "start_on"),
    ],
)
def test_invalid_field_is_named(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        ReducerConfig(**kwargs)
    assert str(info.value).startswith(field) or f"{field}=" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_token_mode_ignores_the_count_relation() -> None:
    cfg = ReducerConfig(min_messages=30, max_messages=20, max_tokens=1000)
    assert cfg.token_mode
    assert cfg.effective_target_tokens == 1000


def test_valid_values() -> None:
    cfg = ReducerConfig(
        min_messages=0,
        max_messages=None,
        max_tokens=100,
        target_tokens=60,
        token_counter="approximate",
        on_prune=(print,),
        start_on="human",
    )
    assert cfg.on_prune == [print]
    assert cfg.effective_target_tokens == 60


def test_config_is_frozen() -> None:
    cfg = ReducerConfig()
    with pytest.raises(AttributeError):
        cfg.max_messages = 5  # type: ignore[misc]
