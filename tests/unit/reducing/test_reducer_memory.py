"""What a reducer remembers of the lists it returned (reducing/memory.py): chains of
originals are forgotten once equal copies stand in for them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from histories import ai, human, system
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import SHAPES, histories

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.read import message_id


def _tokens(message: Any) -> int:
    content = message.get("content") if isinstance(message, dict) else message.content
    return 1 + len(str(content or "")) // 4


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


def _lc_history(turns: int) -> list[Any]:
    out: list[Any] = [system("langchain", "be brief", "sys")]
    for t in range(turns):
        out += [human("langchain", f"question {t}", f"h{t}"),
                ai("langchain", f"answer {t}", f"a{t}")]
    return out


def _lc_copies(messages: list[Any]) -> list[Any]:
    from langchain_core.messages import messages_from_dict, messages_to_dict

    return messages_from_dict(json.loads(json.dumps(messages_to_dict(messages))))


def test_plain_append_asks_the_reducer_for_the_ids_of_a_list_it_returned() -> None:
    """An id new to the list appends, one it holds does not (the merge replaces), on the
    list returned and on copies of it; an id edited in place is seen."""
    from langchain_core.messages import AIMessage

    from agentstate_reducer._merge import plain_append

    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**6, token_counter=_tokens))
    history = _lc_history(4)
    state = reducer.reduce(existing=history[:5]).surviving
    state = reducer.reduce(existing=state, new=history[5:7]).surviving
    fresh = reducer._fresh_ids
    classes = {type(m) for m in history}
    for left in (state, _lc_copies(state)):
        assert fresh(left, ["new"]) == (True, classes)
        assert fresh(left, ["h1"]) == (False, classes)
        assert plain_append(left, [AIMessage("x", id="new")], fresh=fresh) is not None
        assert plain_append(left, [AIMessage("x", id="h1")], fresh=fresh) is None
    state = reducer.reduce(existing=_lc_copies(state), new=history[7:]).surviving
    assert fresh(state, ["new"]) == (True, classes)
    assert fresh(state, ["a3"]) == (False, classes)
    reducer.reduce(existing=state)  # the merge's reduce, which the comparison is handed to
    state[2].id = "edited"
    assert fresh(state, ["edited"]) is None  # compared: not the list remembered
    assert plain_append(state, [AIMessage("x", id="edited")], fresh=fresh) is None


def test_fresh_ids_is_unknown_where_a_message_has_no_id() -> None:
    from langchain_core.messages import HumanMessage

    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**6, token_counter=_tokens))
    state = reducer.reduce(existing=[*_lc_history(1), HumanMessage("no id")]).surviving
    assert reducer._fresh_ids(state, ["new"]) is None


def test_an_id_a_branch_gave_past_the_list_is_fresh_to_it() -> None:
    """The conditional edge's read merges the reply the step merges next: the index,
    which holds the reply past the list from the first merge, answers the second (it
    answered nothing, and the merge put every id of the list in a set); an id the list
    holds, where a branch gave it again past it, is still held."""
    from langchain_core.messages import AIMessage

    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**6, token_counter=_tokens))
    state = reducer.reduce(existing=_lc_history(3)).surviving
    classes = {type(m) for m in state}
    reply = AIMessage("reply", id="r")
    assert reducer._fresh_ids(state, ["r"]) == (True, classes)
    reducer.reduce(existing=state, new=[reply])  # the read of the conditional edge
    assert reducer._fresh_ids(state, ["r"]) == (True, classes)
    reducer.reduce(existing=state, new=[reply])  # the step's own merge
    again = AIMessage("again", id="h1")
    reducer._fresh_ids(state, ["h1"])
    reducer.reduce(existing=state, new=[again])  # a branch that repeats an id of the list
    assert reducer._fresh_ids(state, ["h1"]) == (False, classes)


def test_an_id_a_sibling_branch_gave_first_is_not_taken_for_fresh() -> None:
    """Two branches from one state, each a message at the same index; the second then
    gives the first's id after its own: the index (the first's, at the lower index)
    does not say the id is fresh to it, and the merge finds the id in the list."""
    from langchain_core.messages import AIMessage

    from agentstate_reducer._merge import plain_append

    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**6, token_counter=_tokens))
    state = reducer.reduce(existing=_lc_history(3)).surviving
    assert reducer._fresh_ids(state, ["x"]) is not None
    reducer.reduce(existing=state, new=[AIMessage("first", id="x")])
    assert reducer._fresh_ids(state, ["y"]) is not None
    other = reducer.reduce(existing=state, new=[AIMessage("second", id="y")]).surviving
    assert reducer._fresh_ids(other, ["x"]) is None  # the first's x, at its last index
    both = reducer.reduce(existing=other, new=[AIMessage("x again", id="x")]).surviving
    assert reducer._fresh_ids(both, ["x"]) is None
    reducer.reduce(existing=both)
    got = plain_append(both, [AIMessage("x once more", id="x")], fresh=reducer._fresh_ids)
    assert got is None


def test_plain_append_takes_the_classes_of_the_list_from_fresh() -> None:
    """Where ``fresh`` knows the list, its classes decide, not a pass over the list."""
    from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage

    from agentstate_reducer._merge import plain_append

    left = [HumanMessage("hi", id="1")]
    assert plain_append(left, [AIMessage("x")], fresh=lambda _l, _i: None) is not None
    chunked = plain_append(left, [AIMessage("x")], fresh=lambda _l, _i: (True, {AIMessageChunk}))
    assert chunked is None


def test_two_branches_from_one_state_keep_the_classes_of_their_own_messages() -> None:
    """The first append extends the classes of the state in place, as its snapshot; the
    second, from the same state, keeps its own: each result is still recognised."""
    from langchain_core.messages import AIMessage, HumanMessage

    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**6, token_counter=_tokens))
    state = reducer.reduce(existing=_lc_history(3)).surviving
    first = reducer.reduce(existing=state, new=[HumanMessage("one", id="b1")]).surviving
    second = reducer.reduce(existing=state, new=[AIMessage("two", id="b2")]).surviving
    for out in (first, second, state):
        chain = reducer._match(out, out)
        assert chain is not None and chain.size == len(out)


def test_the_prints_of_the_originals_are_freed_before_the_copies_are_printed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An append onto copies forgets the originals' chains before it prints the copies:
    the collector's count of new objects goes down by their prints first, so a turn's
    worth of new prints does not pass its threshold inside the reduce."""
    import gc

    from langchain_core.messages import HumanMessage

    from agentstate_reducer.reducing import append as append_module

    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**6, token_counter=_tokens))
    state = reducer.reduce(existing=_lc_history(100)).surviving
    copies = _lc_copies(state)
    seen: list[int] = []
    prints = append_module._prints

    def counting(*args: Any) -> Any:
        seen.append(gc.get_count()[0])
        return prints(*args)

    monkeypatch.setattr(append_module, "_prints", counting)
    enabled = gc.isenabled()
    gc.disable()
    try:
        held = [[] for _ in range(3 * len(state))]  # a count well above what is freed
        before = gc.get_count()[0]
        got = reducer.reduce(existing=copies, new=[HumanMessage("next", id="n")])
    finally:
        if enabled:
            gc.enable()
    assert held and got.surviving[:-1] == copies
    assert seen and seen[0] < before - len(state) // 2


def _edit(message: Any, text: str) -> None:
    if isinstance(message, dict):
        message["content"] = text
    else:
        message.content = text


def _count_append_plans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets a 1 for each append the incremental path plans from now on."""
    from agentstate_reducer.reducing import append as append_module

    planned: list[int] = []
    plan_append = append_module.plan_append

    def counting(*args: Any, **kwargs: Any) -> Any:
        planned.append(1)
        return plan_append(*args, **kwargs)

    monkeypatch.setattr(append_module, "plan_append", counting)
    return planned


@pytest.mark.parametrize("shape", ["openai", "langchain"])
def test_the_same_append_twice_is_planned_once(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """LangGraph merges a reply twice onto the same list (the conditional edge's read of
    the state, then the update): the second is the first append's plan again, and its
    list is remembered like the first's, so the next append onto it is incremental."""
    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**6, token_counter=_tokens))
    history = _history(6) if shape == "openai" else _lc_history(6)
    state = reducer.reduce(existing=history[:11]).surviving
    planned = _count_append_plans(monkeypatch)
    new = [history[11]]
    # A run's namespace, as the graph's merge gives it: a new tuple each time.
    first = reducer.reduce(existing=state, new=new, namespace=tuple(["memories", "t1"]))
    second = reducer.reduce(existing=state, new=new, namespace=tuple(["memories", "t1"]))
    assert len(planned) == 1
    assert second.surviving == first.surviving == [*state, *new]
    assert second.surviving is not first.surviving and second.pruned == []
    third = reducer.reduce(existing=second.surviving, new=[history[12]])
    assert len(planned) == 2 and third.surviving == history[:13]


@pytest.mark.parametrize("shape", ["openai", "langchain"])
@pytest.mark.parametrize("edited", ["new", "old"])
def test_an_edit_in_place_between_the_same_append_twice_is_recounted(
    shape: str, edited: str
) -> None:
    """A message edited in place between the two merges of a reply (the conditional
    edge's function may touch the state it reads), the appended one or one before, is
    seen: the second merge plans as a fresh reducer does."""
    config = ReducerConfig(max_tokens=300, target_tokens=200, token_counter=_tokens)
    reducer = MessageReducer(config=config)
    history = _history(6) if shape == "openai" else _lc_history(6)
    state = reducer.reduce(existing=history[:11]).surviving
    new = [history[11]]
    first = reducer.reduce(existing=state, new=new)
    assert first.pruned == []
    _edit(new[0] if edited == "new" else state[3], "y" * 2000)
    second = reducer.reduce(existing=state, new=new)
    fresh = MessageReducer(config=config).reduce(existing=[*state, *new])
    assert fresh.pruned and second.pruned == fresh.pruned
    assert second.surviving == fresh.surviving


def test_the_same_append_under_another_budget_is_planned_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replay holds only for the budget the first append planned with: a calibration
    learned in between (here of the namespace) plans the append again."""
    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**5, token_counter=_tokens))
    history = _history(6)
    state = reducer.reduce(existing=history[:11]).surviving
    planned = _count_append_plans(monkeypatch)
    new = [history[11]]
    reducer.reduce(existing=state, new=new, namespace="a")
    reducer.calibration("a").observe(1000, 1500)
    again = reducer.reduce(existing=state, new=new, namespace="a")
    assert len(planned) == 2 and again.surviving == [*state, *new]


def _deep_edit(message: Any, text: str) -> None:
    blocks = message["content"] if isinstance(message, dict) else message.content
    blocks[0]["text"] = text


@pytest.mark.parametrize("shape", ["openai", "langchain"])
def test_a_deep_edit_of_the_new_message_between_the_same_append_twice_is_recounted(
    shape: str,
) -> None:
    """The token cache sees an edit however deep: a content block of the appended
    message edited in place between the two merges of a reply is counted again, so the
    second merge plans as a fresh reducer does, not as the first merge did."""
    config = ReducerConfig(max_tokens=300, target_tokens=200, token_counter="approximate")
    reducer = MessageReducer(config=config)
    history = _history(6) if shape == "openai" else _lc_history(6)
    state = reducer.reduce(existing=history[:11]).surviving
    if shape == "openai":
        new: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    else:
        from langchain_core.messages import HumanMessage

        new = [HumanMessage(content=[{"type": "text", "text": "hi"}], id="h-new")]
    first = reducer.reduce(existing=state, new=new)
    assert first.pruned == []
    _deep_edit(new[0], "y " * 2000)
    second = reducer.reduce(existing=state, new=new)
    fresh = MessageReducer(config=config).reduce(existing=[*state, *new])
    assert fresh.pruned and second.pruned == fresh.pruned
    assert second.surviving == fresh.surviving



@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(SHAPES).flatmap(lambda s: histories(s, max_exchanges=8)),
    st.one_of(
        st.integers(0, 8).flatmap(lambda low: st.integers(low, low + 6).map(
            lambda high: ReducerConfig(min_messages=low, max_messages=high))),
        st.integers(5, 120).map(lambda high: ReducerConfig(
            max_tokens=high, target_tokens=high // 2, token_counter="approximate")),
    ),
    st.lists(
        st.tuples(
            st.integers(1, 3),
            st.sampled_from(["once", "twice", "twice-top", "twice-other"]),
        ),
        min_size=1, max_size=10,
    ),
)
def test_the_same_append_twice_gives_a_fresh_reducers_plan(
    pool: list[Any], config: ReducerConfig, steps: list[tuple[int, str]]
) -> None:
    """An append reduced once more onto the same list (the new messages the same
    objects, maybe a top-level field of one edited in place in between, maybe under
    another namespace) keeps what a fresh reducer keeps for that list. (An edit inside
    a field is left to the test above: once the first list returned holds all of them,
    they are history to the reducer, whose edits inside a field it does not see.)"""
    reducer = MessageReducer(config=config)
    state: list[Any] = []
    at = 0
    for k, how in steps:
        new, at = pool[at : at + k], at + k
        if not new:
            break
        got = reducer.reduce(existing=state, new=new, namespace="a")
        if how != "once":
            if how == "twice-top":
                _set_content(new[-1], "top " * 40)
            space = "b" if how == "twice-other" else "a"
            got = reducer.reduce(existing=state, new=new, namespace=space)
        fresh = MessageReducer(config=config).reduce(existing=[*state, *new])
        assert [message_id(m) for m in got.surviving] == [
            message_id(m) for m in fresh.surviving
        ]
        assert got.surviving == fresh.surviving
        state = got.surviving


def _set_content(message: Any, text: str) -> None:
    if isinstance(message, dict):
        message["content"] = text
    else:
        message.content = text
