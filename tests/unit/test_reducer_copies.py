"""The incremental path where users run it: behind a checkpointer that hands back equal
copies, with models that report usage, with messages edited in place between reduces."""

from __future__ import annotations

import copy
import json
import operator
import warnings
from typing import Any

import pytest
from histories import ai, human, results, system
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core._api import LangChainBetaWarning
from langchain_core.load import dumpd, load
from langchain_core.messages import AIMessage, BaseMessage
from strategies import SHAPES, histories

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.read import message_id, read_message


def _tokens(message: Any) -> int:
    content = message.get("content") if isinstance(message, dict) else getattr(
        message, "content", None
    )
    return 1 + len(str(content or "")) // 4


def _history(shape: str, turns: int) -> list[Any]:
    out: list[Any] = [system(shape, "be brief", "sys")]
    for t in range(turns):
        out.append(human(shape, f"question {t}", f"h{t}"))
        if t % 2:
            out.append(ai(shape, "", f"a{t}", [f"c{t}"]))
            out.extend(results(shape, [f"c{t}"], f"r{t}"))
        out.append(ai(shape, f"answer {t}", f"x{t}"))
    return out


def _copy(message: Any) -> Any:
    """An equal copy, as a checkpointer hands it back."""
    if isinstance(message, BaseMessage):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LangChainBetaWarning)  # load() is marked beta
            return load(json.loads(json.dumps(dumpd(message))), allowed_objects="messages")
    if isinstance(message, dict):
        return json.loads(json.dumps(message))
    return copy.deepcopy(message)


def _set(message: Any, field: str, value: Any) -> None:
    if isinstance(message, dict):
        message[field] = value
    else:
        setattr(message, field, value)


def _ids(messages: list[Any]) -> list[Any]:
    return [message_id(m) for m in messages]


# -- edits in place ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["openai", "langchain"])
def test_a_message_edited_in_place_is_recounted(shape: str) -> None:
    """The issue's case: the content of a kept message grows in place between two
    reduces; the reducer prunes it as a fresh reducer does (it reported the old count)."""
    config = ReducerConfig(max_tokens=100, target_tokens=60, token_counter=_tokens)
    reducer = MessageReducer(config=config)
    msgs = _history(shape, 2)
    state = reducer.reduce(existing=msgs).surviving
    assert not reducer.reduce(existing=state).pruned
    _set(state[1], "content", "y" * 2000)
    new = [human(shape, "next", "h9")]
    got = reducer.reduce(existing=state, new=new)
    want = MessageReducer(config=config).reduce(existing=list(state), new=new)
    assert got.pruned and _ids(got.pruned) == _ids(want.pruned)
    assert got.tokens_before == want.tokens_before


@pytest.mark.parametrize("shape", ["openai", "langchain"])
@pytest.mark.parametrize("field", ["content", "tool_calls", "id"])
@pytest.mark.parametrize("mode", ["count", "token"])
def test_every_top_level_field_edited_in_place_is_seen(shape: str, field: str, mode: str) -> None:
    """content, tool calls and id edited in place on the returned list: each step is what
    a fresh reducer gives for the same list."""
    if mode == "count":
        config = ReducerConfig(min_messages=4, max_messages=30)
    else:
        config = ReducerConfig(max_tokens=400, target_tokens=200, token_counter=_tokens)
    reducer = MessageReducer(config=config)
    history = _history(shape, 6)
    state = reducer.reduce(existing=history[:6]).surviving
    calls = [i for i, m in enumerate(state) if read_message(m).calls]
    assert calls
    k = calls[0]
    if field == "content":
        _set(state[2], "content", "z" * 1600)
    elif field == "tool_calls":  # the call is dropped: its result is now an orphan
        _set(state[k], "tool_calls", [])
    else:
        _set(state[3], "id", "renamed")
    for message in history[6:]:
        want = MessageReducer(config=config).reduce(existing=list(state), new=[message])
        got = reducer.reduce(existing=state, new=[message])
        assert got.surviving == want.surviving
        assert got.pruned == want.pruned
        assert got.tokens_before == want.tokens_before
        state = got.surviving
    if field == "id":
        assert "renamed" in _ids(state) or "renamed" in _ids(got.pruned)


@pytest.mark.parametrize("shape", ["openai", "langchain", "anthropic"])
@pytest.mark.parametrize("mode", ["count", "token"])
def test_a_call_dropped_in_place_after_its_append_leaves_its_result_an_orphan(
    shape: str, mode: str
) -> None:
    """A call an append issued, then dropped in place from its ai message: the list
    returned no longer matches, the shorter one the append extended still does, and
    the call's result is an orphan on the next append, as for a fresh reducer."""
    if mode == "count":
        config = ReducerConfig(min_messages=0, max_messages=30)
    else:
        config = ReducerConfig(max_tokens=10**4, token_counter=_tokens)
    reducer = MessageReducer(config=config)
    first = reducer.reduce(existing=[system(shape, "be brief", "sys"), human(shape, "q", "h0")])
    calling = [ai(shape, "", "a0", ["c0"]), *results(shape, ["c0"], "r0")]
    state = reducer.reduce(existing=first.surviving, new=calling).surviving
    if shape == "anthropic":
        _set(state[2], "content", [{"type": "text", "text": "no call after all"}])
    else:
        _set(state[2], "tool_calls", [])
    new = [human(shape, "next", "h1")]
    want = MessageReducer(config=config).reduce(existing=list(state), new=new)
    got = reducer.reduce(existing=state, new=new)
    assert want.pruned and _ids(got.pruned) == _ids(want.pruned)
    assert got.surviving == want.surviving


# -- copies --------------------------------------------------------------------------------


def _configs() -> st.SearchStrategy[ReducerConfig]:
    count = st.integers(0, 8).flatmap(
        lambda low: st.integers(low, low + 6).map(
            lambda high: ReducerConfig(min_messages=low, max_messages=high)
        )
    )
    tokens = st.integers(5, 80).flatmap(
        lambda high: st.sampled_from(["approximate", _tokens]).map(
            lambda counter: ReducerConfig(
                max_tokens=high, target_tokens=high // 2, token_counter=counter
            )
        )
    )
    return st.one_of(count, tokens)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([*SHAPES, "pydantic_ai"]).flatmap(lambda s: histories(s, max_exchanges=8)),
    _configs(),
    st.lists(st.integers(1, 3), min_size=1, max_size=12),
)
def test_copies_give_the_plan_of_the_original_list(
    pool: list[Any], config: ReducerConfig, steps: list[int]
) -> None:
    """Every step handed equal copies of the list the previous one returned gives what
    the same reducer gives for the original list, and what a fresh reducer gives."""
    on_copies = MessageReducer(config=config)
    on_originals = MessageReducer(config=config)
    copies: list[Any] = []
    originals: list[Any] = []
    at = 0
    for k in steps:
        new, at = pool[at : at + k], at + k
        if not new:
            break
        got = on_copies.reduce(existing=[_copy(m) for m in copies], new=new)
        want = on_originals.reduce(existing=originals, new=new)
        fresh = MessageReducer(config=config).reduce(existing=list(originals), new=new)
        assert _ids(got.surviving) == _ids(want.surviving) == _ids(fresh.surviving)
        assert [read_message(m) for m in got.surviving] == [
            read_message(m) for m in want.surviving
        ]
        assert got.tokens_before == want.tokens_before
        copies, originals = got.surviving, want.surviving


@pytest.mark.parametrize("shape", ["openai", "langchain", "anthropic"])
@pytest.mark.parametrize("mode", ["count", "token"])
def test_an_append_onto_copies_reads_only_the_new_message(shape: str, mode: str) -> None:
    """Copies take the incremental path: the count cache reads each message once."""
    if mode == "count":
        config = ReducerConfig(min_messages=150, max_messages=200, token_counter=_tokens)
    else:
        config = ReducerConfig(max_tokens=10**6, token_counter=_tokens)
    reducer = MessageReducer(config=config)
    history = _history(shape, 30)
    state = reducer.reduce(existing=history[:10]).surviving
    for message in history[10:]:
        state = reducer.reduce(existing=[_copy(m) for m in state], new=[message]).surviving
    assert _ids(state) == _ids(history)
    if mode == "token":
        cache = reducer._token_counts
        assert cache is not None and cache.misses == len(history)
    chain = next(reversed(reducer._chains.values()))
    assert chain.settled is not None and chain.size == len(history)


def test_copies_of_several_conversations_are_each_recognised() -> None:
    """One reducer serving several threads behind a checkpointer: each thread's copies
    find its own remembered list."""
    config = ReducerConfig(max_tokens=10**6, token_counter=_tokens)
    reducer = MessageReducer(config=config)
    threads = {t: _history("openai", 12) for t in range(3)}
    for t, history in threads.items():
        for m in history:
            m["id"] = f"{t}-{m['id']}"
    states = {t: reducer.reduce(existing=h[:4]).surviving for t, h in threads.items()}
    for step in range(4, len(threads[0])):
        for t, history in threads.items():
            existing = [_copy(m) for m in states[t]]
            states[t] = reducer.reduce(existing=existing, new=[history[step]]).surviving
    cache = reducer._token_counts
    assert cache is not None and cache.misses == sum(map(len, threads.values()))



def test_after_copies_the_reducer_goes_on_with_the_copies() -> None:
    """Once copies matched, the list returned is remembered with the copies' own
    objects: the next reduce of it compares the same objects (no copy compared with
    an original), and an edit in place of a copy is still recounted."""
    config = ReducerConfig(max_tokens=400, target_tokens=200, token_counter=_tokens)
    reducer = MessageReducer(config=config)
    history = _history("langchain", 6)
    state = reducer.reduce(existing=history[:8]).surviving
    copies = [_copy(m) for m in state]
    state = reducer.reduce(existing=copies, new=[history[8]]).surviving
    chain = next(reversed(reducer._chains.values()))
    assert chain.size == len(state) and all(map(operator.is_, chain.snapshot, state))
    assert all(a is b for a, b in zip(state[: len(copies)], copies, strict=True))
    _set(state[2], "content", "z" * 1600)
    got = reducer.reduce(existing=state, new=[history[9]])
    want = MessageReducer(config=config).reduce(existing=list(state), new=[history[9]])
    assert _ids(got.pruned) == _ids(want.pruned) and got.pruned
    assert got.tokens_before == want.tokens_before


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["openai", "langchain"]).flatmap(lambda s: histories(s, max_exchanges=8)),
    _configs(),
    st.lists(
        st.tuples(st.integers(1, 3), st.sampled_from(["returned", "copies", "edited"])),
        min_size=1, max_size=12,
    ),
)
def test_copies_returned_lists_and_edits_mixed_give_a_fresh_reducers_plan(
    pool: list[Any], config: ReducerConfig, steps: list[tuple[int, str]]
) -> None:
    """Steps handed the returned list, equal copies of it, or the returned list with a
    kept message's content edited in place, in any order: each keeps what a fresh
    reducer keeps for the same list."""
    reducer = MessageReducer(config=config)
    state: list[Any] = []
    at = 0
    for k, how in steps:
        new, at = pool[at : at + k], at + k
        if not new:
            break
        existing = [_copy(m) for m in state] if how == "copies" else state
        if how == "edited" and existing:
            _set(existing[len(existing) // 2], "content", "edited " * 30)
        fresh = MessageReducer(config=config).reduce(existing=list(existing), new=new)
        got = reducer.reduce(existing=existing, new=new)
        assert _ids(got.surviving) == _ids(fresh.surviving)
        assert got.tokens_before == fresh.tokens_before
        state = got.surviving

# -- usage reports -------------------------------------------------------------------------


def _reporting(message: Any, tokens: int) -> Any:
    usage = {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens + 1}
    if isinstance(message, dict):
        return {**message, "usage_metadata": usage}
    return message.model_copy(update={"usage_metadata": usage})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["openai", "langchain"]).flatmap(lambda s: histories(s, max_exchanges=8)),
    st.integers(20, 200),
    st.floats(0.6, 1.8),
    st.booleans(),
    st.lists(st.integers(1, 3), min_size=1, max_size=12),
)
def test_usage_reports_on_copies_give_a_fresh_reducers_plan(
    pool: list[Any], high: int, drift: float, overhead: bool, steps: list[int]
) -> None:
    """Each ai message reports the input tokens of the request it answers (the kept
    history's count times ``drift``); handed copies each step, the reducer learns the
    same factor and keeps the same messages as a fresh one with that calibration."""
    options: dict[str, Any] = {}
    if overhead:
        options = {"system_prompt": "answer briefly", "tools": [{"name": "lookup"}]}
    config = ReducerConfig(
        max_tokens=high, target_tokens=high // 2, token_counter=_tokens, **options
    )
    reducer = MessageReducer(config=config)
    state: list[Any] = []
    at = 0
    for k in steps:
        new = []
        for m in pool[at : at + k]:
            if read_message(m).role == "ai":
                m = _reporting(m, max(1, int(drift * sum(map(_tokens, state + new)))))
            new.append(m)
        at += k
        if not new:
            break
        fresh = MessageReducer(config=config)
        for key, learned in reducer._calibrations.items():
            twin = fresh.calibration(key)
            twin._reported, twin._estimated = learned._reported, learned._estimated
            twin.factor, twin.observations = learned.factor, learned.observations
        fresh._observed = dict(reducer._observed)
        want = fresh.reduce(existing=list(state), new=new, namespace="t")
        got = reducer.reduce(existing=[_copy(m) for m in state], new=new, namespace="t")
        assert _ids(got.surviving) == _ids(want.surviving)
        assert _ids(got.pruned) == _ids(want.pruned)
        assert reducer.calibration("t").factor == fresh.calibration("t").factor
        state = got.surviving


def test_a_usage_report_that_changes_nothing_takes_the_incremental_path() -> None:
    """A new usage report updates the factor; the history is not read again unless the
    new budget prunes."""
    config = ReducerConfig(max_tokens=10**5, token_counter=_tokens)
    reducer = MessageReducer(config=config)
    history = _history("langchain", 30)
    state = reducer.reduce(existing=history[:4]).surviving
    for message in history[4:]:
        if isinstance(message, AIMessage):
            message = _reporting(message, int(1.3 * sum(map(_tokens, state))) + 5)
        state = reducer.reduce(existing=[_copy(m) for m in state], new=[message]).surviving
    assert reducer.calibration().observations > 10
    assert reducer.calibration().factor != 1.0
    cache = reducer._token_counts
    assert cache is not None and cache.misses == len(history)
