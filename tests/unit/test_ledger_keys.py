"""The dedupe ledger keys a message without an id by its place in the conversation: two
equal messages at different places are two messages, the same conversation reduced again
delivers nothing twice (issue 25 item 4)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentstate_reducer import ClearToolResults, MessageReducer, ReducerConfig
from agentstate_reducer.hooks import DeliveryLedger, context_keys, delivery_key


class Memory:
    def __init__(self) -> None:
        self.got: list[Any] = []

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        self.got.extend(pruned)


def turn(i: int) -> list[dict[str, Any]]:
    """An agent turn in OpenAI dicts (no ids): a question, "Shall I?", "yes", "ok"."""
    return [
        {"role": "user", "content": f"book flight {i}"},
        {"role": "assistant", "content": f"Flight {i} costs {100 + i} EUR. Shall I book it?"},
        {"role": "user", "content": "yes"},
        {"role": "assistant", "content": "ok"},
    ]


def test_a_second_yes_is_delivered() -> None:
    """Six turns in a state the reducer keeps pruning: every pruned message reaches memory once."""
    memory = Memory()
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=3, max_messages=6, on_prune=[memory])
    )
    state: list[Any] = [{"role": "system", "content": "You book flights."}]
    pruned: list[Any] = []
    for i in range(6):
        result = reducer.reduce(state, turn(i))
        pruned += result.pruned
        again = reducer.reduce(state, turn(i))  # a retried step: nothing twice
        assert again.pruned == result.pruned
        state = result.surviving
    words = Counter(m["content"] for m in memory.got)
    assert len(memory.got) == len(pruned) == sum(Counter(m["content"] for m in pruned).values())
    assert words["yes"] == sum(m["content"] == "yes" for m in pruned) >= 4
    assert words["ok"] == sum(m["content"] == "ok" for m in pruned) >= 4


def test_the_same_transcript_reduced_again_delivers_nothing() -> None:
    memory = Memory()
    config = ReducerConfig(min_messages=2, max_messages=4, on_prune=[memory])
    reducer = MessageReducer(config=config)
    history = [{"role": "user", "content": "yes"} for _ in range(9)]
    first = reducer.reduce(history)
    assert len(memory.got) == len(first.pruned) == 6  # six equal messages, six places
    reducer.reduce(history)
    reducer.reduce([dict(m) for m in history])  # equal copies: the same transcript
    assert len(memory.got) == 6
    reducer.reduce(history, namespace="other")  # another namespace: delivered
    assert len(memory.got) == 12


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["yes", "ok", "no"]), min_size=1, max_size=40),
    st.integers(0, 4),
    st.integers(1, 6),
    st.booleans(),
)
def test_a_history_reduced_as_it_grows_delivers_each_place_once(
    words: list[str], low: int, extra: int, first: bool
) -> None:
    """A view-only reducer (middleware, input filter) gets the whole growing history each
    call: every pruned place reaches memory exactly once, however often it repeats."""
    memory = Memory()
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=low, max_messages=low + extra, preserve_first=first, on_prune=[memory]
        )
    )
    history: list[Any] = []
    places: set[int] = set()
    for k, word in enumerate(words):
        history.append({"role": "user" if k % 2 else "assistant", "content": word})
        result = reducer.reduce(history)
        index = {id(m): i for i, m in enumerate(history)}
        places |= {index[id(m)] for m in result.pruned}
    assert len(memory.got) == len(places)
    assert Counter(m["content"] for m in memory.got) == Counter(
        history[i]["content"] for i in places
    )


def test_edits_in_a_growing_history_never_change_a_key() -> None:
    """Context editing clears more results as the history grows; the keys of the messages
    after them are those of the messages as they were, so nothing is delivered twice."""
    memory = Memory()
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=12,
            max_messages=20,
            context_edits=[ClearToolResults(keep=1, trigger_messages=3)],
            on_prune=[memory],
        )
    )
    history: list[Any] = []
    places: set[int] = set()
    edited = 0
    for i in range(12):
        call = f"c{i}"
        history += [
            {"role": "user", "content": "yes"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": call, "content": "result row " * 200},
            {"role": "assistant", "content": "ok"},
        ]
        result = reducer.reduce(history)
        edited += len(result.edited)
        index = {id(m): k for k, m in enumerate(history)}
        places |= {index[id(m)] for m in result.pruned if id(m) in index}
    assert edited >= 10  # editing ran on most calls
    texts = [m for m in memory.got if m["role"] != "tool" and m.get("content")]
    user_places = [k for k in places if history[k]["role"] == "user"]
    assert sum(m["role"] == "user" for m in texts) == len(user_places) >= 8
    assert sum(m["content"] == "ok" for m in texts) == sum(
        history[k]["content"] == "ok" for k in places
    )


def test_context_keys_follow_the_nearest_id() -> None:
    a = [{"role": "user", "content": "yes", "id": "q1"}, {"role": "user", "content": "yes"}]
    b = [{"role": "user", "content": "other", "id": "q2"}, {"role": "user", "content": "yes"}]
    key_a, key_b = context_keys(a, [1]), context_keys(b, [1])
    assert key_a != key_b  # two places
    # Before the nearest id nothing counts: what was pruned earlier cannot change a key.
    longer = [{"role": "system", "content": "s"}, *a]
    assert context_keys(longer, [2]) == key_a
    assert context_keys(a, [0]) == [delivery_key(a[0])]


def test_a_ledger_claims_by_the_keys_it_is_given() -> None:
    ledger = DeliveryLedger(window=10)
    yes = {"role": "user", "content": "yes"}
    assert ledger.claim([yes, dict(yes)]) == [yes]  # content keys by default
    twice = [yes, dict(yes)]
    keys = context_keys(twice, [0, 1])
    fresh = DeliveryLedger(window=10)
    assert fresh.claim(twice, keys=keys) == twice
    assert fresh.claim(twice, keys=keys) == []
    fresh.release(twice[1:], keys=keys[1:])
    assert fresh.claim(twice, keys=keys) == twice[1:]
