"""What a reducer remembers of the lists it returned (reducing/memory.py): chains of
originals are forgotten once equal copies stand in for them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from histories import ai, human, system

from agentstate_reducer import MessageReducer, ReducerConfig


def _tokens(message: Any) -> int:
    return 1 + len(str(message.get("content") or "")) // 4


def _history(turns: int) -> list[Any]:
    out: list[Any] = [system("openai", "be brief", "sys")]
    for t in range(turns):
        out += [human("openai", f"question {t}", f"h{t}"), ai("openai", f"answer {t}", f"a{t}")]
    return out


@pytest.mark.parametrize("mode", ["count", "token"])
def test_an_append_onto_copies_forgets_the_originals_and_their_branches(mode: str) -> None:
    """Behind a checkpointer the originals come back no more: no chain keeps them alive,
    a branch taken from the same state included; the copies' chain goes on."""
    if mode == "count":
        config = ReducerConfig(min_messages=150, max_messages=200)
    else:
        config = ReducerConfig(max_tokens=10**6, token_counter=_tokens)
    reducer = MessageReducer(config=config)
    history = _history(6)
    state = reducer.reduce(existing=history[:5]).surviving
    state = reducer.reduce(existing=state, new=[history[5]]).surviving
    reducer.reduce(existing=state[:5], new=[human("openai", "a branch", "b")])
    originals = state
    copies = json.loads(json.dumps(state))
    state = reducer.reduce(existing=copies, new=[history[6]]).surviving
    assert all(c.snapshot[0] is not originals[0] for c in reducer._chains.values())
    misses = reducer._token_counts.misses if reducer._token_counts is not None else 0
    state = reducer.reduce(existing=state, new=history[7:]).surviving
    chain = next(reversed(reducer._chains.values()))
    assert chain.size == len(history) and chain.snapshot[0] is copies[0]
    if mode == "token":
        assert reducer._token_counts is not None
        assert reducer._token_counts.misses == misses + len(history) - 7
