"""cache_aware=True: a prune cuts deep enough to pay for the prompt cache it rewrites."""

from __future__ import annotations

import pytest

from agentstate_reducer import ConfigError, MessageReducer, ReducerConfig, agent_config
from agentstate_reducer._cache import READ, WRITE, cache_target, growth


def test_the_cut_pays_for_the_rewrite_it_costs() -> None:
    kept = cache_target(8_000, 6_000, 250.0)
    cut = 8_000 - kept
    assert 3_000 <= kept < 6_000
    assert READ * cut * cut / 250 >= WRITE * kept * 0.99  # it pays for itself
    shallower = cut - 200
    assert READ * shallower * shallower / 250 < WRITE * (8_000 - shallower)  # the least that does


def test_the_target_bounds_the_cut_both_ways() -> None:
    assert cache_target(8_000, 6_000, 1.0) == 6_000  # tiny growth: the target as given
    assert cache_target(8_000, 6_000, 50_000.0) == 3_000  # never under half the target
    assert growth([]) == 1.0
    assert growth([100] * 40) == 200.0


def _history(turns: int) -> list[dict[str, str]]:
    out = []
    for k in range(turns):
        out += [{"role": "user", "content": f"q{k} " + "w " * 60},
                {"role": "assistant", "content": f"a{k} " + "w " * 200}]
    return out


def test_a_cache_aware_reduce_keeps_less_than_the_target_and_prunes_less_often() -> None:
    options = {"max_tokens": 8_000, "target_tokens": 6_000, "token_counter": "approximate"}
    plain = MessageReducer(config=ReducerConfig(**options))
    aware = MessageReducer(config=ReducerConfig(cache_aware=True, **options))
    history = _history(40)
    a, b = plain.reduce(history), aware.reduce(history)
    assert b.tokens_after is not None and a.tokens_after is not None
    assert 3_000 <= b.tokens_after < a.tokens_after <= 6_000
    prunes = {}
    for name, reducer in (("plain", plain), ("aware", aware)):
        state, count = [], 0
        for message in _history(120):
            result = reducer.reduce(state, [message])
            count += bool(result.pruned)
            state = result.surviving
        prunes[name] = count
    assert prunes["aware"] < prunes["plain"]


def test_the_option_is_checked() -> None:
    assert ReducerConfig().cache_aware is False
    assert agent_config(cache_aware=True).cache_aware is True
    with pytest.raises(ConfigError, match="cache_aware must be True or False"):
        ReducerConfig(cache_aware="yes")
