"""The incremental path: reducing the list a reduce returned reads only the new messages,
and always gives exactly what a fresh reducer gives."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from histories import ai, histories, human, results, system
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agentstate_reducer import ClearToolResults, MessageReducer, Offload, ReducerConfig
from agentstate_reducer.edit import OFFLOADED
from agentstate_reducer.read import message_content, message_id, read_message, with_content
from agentstate_reducer.reducing import memory, prepare, repair


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of each list a reduce reads, in order (prepare's read stage reads for
    the repair, the incremental path and the plan alike)."""
    read: list[int] = []
    real = prepare.read_messages

    def counting(messages: list[Any]) -> list[Any]:
        read.append(len(messages))
        return real(messages)

    for module in (repair, prepare):
        monkeypatch.setattr(module, "read_messages", counting)
    records = prepare.read_records

    def counting_records(messages: list[Any]) -> Any:
        read.append(len(messages))
        return records(messages)

    monkeypatch.setattr(prepare, "read_records", counting_records)
    return read

def _content_tokens(message: Any) -> int:
    content = message.get("content") if isinstance(message, dict) else message.content
    return 1 + len(str(content or "")) // 3


@st.composite
def configs(draw: st.DrawFn) -> ReducerConfig:
    options: dict[str, Any] = {
        "preserve_first": draw(st.booleans()),
        "cascade_tool_messages": draw(st.booleans()),
        "start_on": draw(st.sampled_from([None, "human"])),
    }
    if draw(st.booleans()):
        options["summarize_fn"] = lambda pruned: f"{len(pruned)} messages"
        options["inject_summary"] = draw(st.booleans())
    if draw(st.booleans()):  # what agent_config() and the integrations set
        options["repair_dangling_calls"] = draw(st.booleans())
        options["reasoning"] = draw(st.sampled_from(["keep", "current-turn", "model"]))
        options["turn_ladder"] = draw(st.booleans())
        options["calibrate_from_usage"] = draw(st.booleans())
        options["model"] = draw(st.sampled_from([None, "gpt-4o", "claude-sonnet-4-5"]))
    if draw(st.booleans()):
        low = draw(st.integers(0, 8))
        high = draw(st.integers(low, low + 6))
        return ReducerConfig(min_messages=low, max_messages=high, **options)
    high = draw(st.integers(5, 80))
    return ReducerConfig(
        max_tokens=high,
        target_tokens=draw(st.integers(1, high)),
        token_counter=draw(st.sampled_from(["approximate", _content_tokens])),
        **options,
    )


def _edited(message: Any) -> Any:
    """A new object standing for ``message`` edited: same id, other content."""
    if isinstance(message, dict) and isinstance(message.get("content"), list):
        return {**message, "content": [*message["content"], {"type": "text", "text": "more"}]}
    return with_content(message, "edited and much longer than it was before")


def _same(got: list[Any], want: list[Any], known: set[int]) -> bool:
    """Same objects in the same order; summary messages (built by each reducer, with ids of
    their own) have the same role and content."""
    return len(got) == len(want) and all(
        a is b
        or (
            id(a) not in known
            and id(b) not in known
            and read_message(a).role == read_message(b).role
            and message_content(a) == message_content(b)
        )
        for a, b in zip(got, want, strict=True)
    )


operations = st.lists(
    st.tuples(
        st.sampled_from(["append", "append", "include", "edit", "swap", "remove", "delete"]),
        st.integers(0, 10**6),
        st.integers(1, 3),
    ),
    min_size=1,
    max_size=25,
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_turns=14), configs(), operations)
def test_every_step_equals_a_fresh_reducer(
    pool: list[Any], config: ReducerConfig, ops: list[tuple[str, int, int]]
) -> None:
    """Appends, in-place edits of the returned list, reorders and removals by id."""
    _every_step_equals_a_fresh_reducer(pool, config, ops)


def _every_step_equals_a_fresh_reducer(
    pool: list[Any], config: ReducerConfig, ops: list[tuple[str, int, int]]
) -> int:
    """Run ``ops`` through one reducer, each step checked against a fresh reducer's
    reduce of the same list; the number of context edits seen."""
    reducer = MessageReducer(config=config)
    known = {id(m) for m in pool}
    alive: list[Any] = []
    state: list[Any] = []
    at = 0
    edits = 0
    for op, pick, k in ops:
        new: Any = None
        if op in ("append", "include"):
            new, at = pool[at : at + k], at + k
        elif not state:
            continue
        elif op == "edit":  # the list edited in place: one message replaced by an edited copy
            j = pick % len(state)
            state[j] = _edited(state[j])
            known.add(id(state[j]))
            alive.append(state[j])  # so that no summary message reuses its id
        elif op == "swap":
            i, j = pick % len(state), (pick // 7) % len(state)
            state[i], state[j] = state[j], state[i]
        elif op == "remove":  # LangGraph's RemoveMessage: a new list without that id
            gone = message_id(state[pick % len(state)])
            state = [m for m in state if message_id(m) != gone]
        else:
            del state[pick % len(state)]
        if op == "include":  # the new messages already in the list, as add_messages gives it
            state, new = state + new, None
        want = MessageReducer(config=config).reduce(existing=list(state), new=copy.copy(new))
        got = reducer.reduce(existing=state, new=new)
        if not (config.inject_summary or config.context_edits or config.repair_dangling_calls
                or config.turn_ladder):
            # (a summary may keep what the plan prunes; editing shrinks what it counts;
            # plan() neither repairs dead calls nor runs the turn ladder)
            # reduce() counts lazily, plan() counts every message: the same selection.
            whole = list(state) + list(new or [])
            eager = MessageReducer(config=config).plan(whole)
            assert [whole[i] for i in eager.pruned] == want.pruned
        assert _same(got.surviving, want.surviving, known)
        assert _same(got.pruned, want.pruned, known)
        assert got.summary == want.summary
        assert [(e.index, e.kind, e.handle, e.tokens) for e in got.edited] == [
            (e.index, e.kind, e.handle, e.tokens) for e in want.edited
        ]
        edits += len(got.edited)
        state = got.surviving
    return edits


def _big(message: Any, size: int) -> Any:
    """A tool result ``message`` (or Anthropic ``tool_result`` blocks) with a content of
    about ``size`` words; any other message as it is."""
    text = " ".join(f"w{k}" for k in range(size))
    view = read_message(message)
    if view.role == "tool":
        return with_content(message, text)
    content = message_content(message)
    if view.answers and isinstance(message, dict) and isinstance(content, list):
        blocks = [{**b, "content": text} if b.get("type") == "tool_result" else b for b in content]
        return {**message, "content": blocks}
    return message


@st.composite
def edit_configs(draw: st.DrawFn) -> ReducerConfig:
    edits: list[Any] = []
    if draw(st.booleans()):
        trigger = draw(st.sampled_from(["default", "tokens", "messages"]))
        edits.append(
            ClearToolResults(
                keep=draw(st.integers(0, 3)),
                trigger_tokens=draw(st.integers(50, 2_000)) if trigger == "tokens" else None,
                trigger_messages=draw(st.integers(2, 20)) if trigger == "messages" else None,
                clear_at_least=draw(st.sampled_from([0, 0, 200])),
                clear_tool_inputs=draw(st.booleans()),
            )
        )
    if draw(st.booleans()) or not edits:
        above = draw(st.integers(100, 1_000))
        edits.append(Offload(above=above, head=above // 8, tail=above // 8))
    options: dict[str, Any] = {
        "preserve_first": draw(st.booleans()),
        "cascade_tool_messages": draw(st.booleans()),
        "start_on": draw(st.sampled_from([None, "human"])),
        "context_edits": edits,
    }
    if draw(st.booleans()):
        low = draw(st.integers(0, 8))
        high = draw(st.integers(low, low + 10))
        return ReducerConfig(
            min_messages=low, max_messages=high, token_counter=_content_tokens, **options
        )
    high = draw(st.integers(100, 3_000))
    return ReducerConfig(
        max_tokens=high,
        target_tokens=draw(st.integers(1, high)),
        token_counter=draw(st.sampled_from(["approximate", _content_tokens])),
        **options,
    )


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_turns=14), edit_configs(), operations, st.data())
def test_with_context_editing_every_step_equals_a_fresh_reducer(
    pool: list[Any],
    config: ReducerConfig,
    ops: list[tuple[str, int, int]],
    data: st.DataObject,
) -> None:
    """Context editing on the incremental path: appends, in-place edits, reorders and
    removals give, step by step, the surviving list, pruned messages and edits that a
    fresh reducer gives on the same history."""
    sizes = data.draw(st.lists(st.sampled_from([0, 150, 600]), min_size=len(pool)))
    pool = [_big(m, size) if size else m for m, size in zip(pool, sizes, strict=False)]
    edits = _every_step_equals_a_fresh_reducer(pool, config, ops)
    event("edited" if edits else "nothing edited")


@pytest.mark.parametrize("mode", ["count", "token"])
def test_an_append_loop_with_editing_reads_each_message_once(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With context editing on and nothing to edit, each reduce reads only the new
    message; an oversized one is offloaded on arrival (one full pass), then appends stay
    cheap again."""
    read = _count_reads(monkeypatch)
    edits = [ClearToolResults(keep=2), Offload(above=400, head=50, tail=50)]
    if mode == "count":
        config = ReducerConfig(
            min_messages=500, max_messages=1_000, token_counter=_content_tokens,
            context_edits=edits,
        )
    else:
        config = ReducerConfig(max_tokens=10**6, token_counter=_content_tokens, context_edits=edits)
    history = _loop_history(40)
    big = next(i for i, m in enumerate(history) if read_message(m).role == "tool" and i > 30)
    history[big] = _big(history[big], 2_000)
    reducer = MessageReducer(config=config)
    state = reducer.reduce(existing=history[:10]).surviving
    offloaded = []
    appended = [1] if mode == "count" else []  # token mode reads new ones through its cache
    for i, message in enumerate(history[10:], start=10):
        before = len(read)
        result = reducer.reduce(existing=state, new=[message])
        state = result.surviving
        offloaded += result.edited
        if i == big:  # offloaded on arrival: one pass over the whole history
            assert [e.kind for e in result.edited] == [OFFLOADED]
            assert read[before:] == [*appended, i + 1]
        else:
            assert read[before:] == appended
    cache = reducer._token_counts
    assert cache is not None
    # Token mode counts every message once, and the preview; count mode only the one
    # message long enough to be offloaded, and its preview.
    assert cache.misses == (2 if mode == "count" else len(history) + 1)
    assert [e.index for e in offloaded] == [big]
    assert len(state) == len(history)


def _loop_history(n: int) -> list[Any]:
    out: list[Any] = [system("openai", "be brief", "sys")]
    for t in range(n):
        out.append(human("openai", f"question {t}", f"h{t}"))
        if t % 2:
            out.append(ai("openai", "", f"a{t}", [f"c{t}"]))
            out.extend(results("openai", [f"c{t}"], f"r{t}"))
        out.append(ai("openai", f"answer {t}", f"x{t}"))
    return out


@pytest.mark.parametrize(
    "config",
    [
        ReducerConfig(min_messages=150, max_messages=200),
        ReducerConfig(max_tokens=10**6, token_counter=_content_tokens),
        ReducerConfig(max_tokens=10**6, token_counter="approximate"),
    ],
    ids=["count", "token, callable", "token, approximate"],
)
def test_an_append_loop_reads_each_message_once(
    config: ReducerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the threshold, each reduce reads only the messages it has not seen."""
    read = _count_reads(monkeypatch)
    history = _loop_history(40)
    reducer = MessageReducer(config=config)
    state = reducer.reduce(existing=history[:10]).surviving
    for message in history[10:]:
        state = reducer.reduce(existing=state, new=[message]).surviving
    assert state == history
    cache = reducer._token_counts
    seen = sum(read) if cache is None else cache.misses
    assert seen == len(history)


def test_a_prune_rereads_the_history_once_then_appends_stay_cheap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = _count_reads(monkeypatch)
    history = _loop_history(30)
    reducer = MessageReducer(config=ReducerConfig(min_messages=20, max_messages=40))
    state = reducer.reduce(existing=history[:2]).surviving
    prunes = 0
    for message in history[2:]:
        before = len(read)
        result = reducer.reduce(existing=state, new=[message])
        state = result.surviving
        if result.pruned:
            prunes += 1
            # The new message, then one pass over the whole history.
            assert read[before:] == [1, len(result.surviving) + len(result.pruned)]
        else:  # the survivors' views come from the prune that left them
            assert read[before:] == [1]
    assert prunes >= 2


def test_the_langgraph_reducer_checks_ids_of_new_messages_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """as_langgraph_reducer() asks whether a new id is already in the list: from its index."""
    asked: list[object] = []
    real = memory.message_id

    def counting(message: object) -> str | None:
        asked.append(message)
        return real(message)

    monkeypatch.setattr(memory, "message_id", counting)
    history = _loop_history(40)
    fn = MessageReducer(min_messages=150, max_messages=200).as_langgraph_reducer()
    state = fn(history[:10], None)
    fn(state, [history[10]])  # the first check builds the index: one pass
    state = fn(state, [history[10]])  # an update of that id again: merged, not appended
    assert sum(message_id(m) == history[10]["id"] for m in state) == 1
    before = len(asked)
    for message in history[11:]:
        state = fn(state, [message])
    assert state == history
    assert len(asked) - before == len(history) - 11  # each new message's id, once


def test_a_list_edited_after_a_langgraph_id_check_is_compared_again() -> None:
    """The list an id check compared is trusted by the reduce of that call only: edited
    in place afterwards (an orphaned result put in), it is planned in full."""
    history = _loop_history(12)
    config = ReducerConfig(min_messages=3, max_messages=6)
    reducer = MessageReducer(config=config)
    fn = reducer.as_langgraph_reducer()
    state = fn(history[:4], None)
    state = fn(state, [history[4]])
    fn(state, [history[4]])  # an update of a known id: add_messages merges it
    state[1] = history[11]  # edited in place: no longer the list this reducer returned
    got = reducer.reduce(existing=state, new=[history[5]])
    want = MessageReducer(config=config).reduce(existing=state, new=[history[5]])
    assert got.surviving == want.surviving
    assert got.pruned == want.pruned


def test_an_update_by_id_after_appends_replaces_the_message() -> None:
    """The id index follows the appends, so a later update of an appended id is merged."""
    history = _loop_history(6)
    fn = MessageReducer(min_messages=150, max_messages=200).as_langgraph_reducer()
    state = fn(history[:3], None)
    fn(state, [history[3]])  # builds the index
    for message in history[3:]:
        state = fn(state, [message])
    edited = {**history[5], "content": "edited"}
    state = fn(state, [edited])
    assert len(state) == len(history)  # add_messages merged it (as LangChain messages)
    assert message_id(state[5]) == edited["id"] and message_content(state[5]) == "edited"


def test_token_mode_counts_only_what_may_survive() -> None:
    """A reduce counts from the end and stops once the sum passes max_tokens."""
    counted: list[Any] = []

    def counter(message: Any) -> int:
        counted.append(message)
        return _content_tokens(message)

    history = _loop_history(300)
    config = ReducerConfig(max_tokens=200, target_tokens=150, token_counter=counter)
    result = MessageReducer(config=config).reduce(existing=history)
    assert result.pruned and len(result.surviving) < 60
    assert len(counted) < len(history) // 4
    every = [_content_tokens(m) for m in history]
    kept = sum(_content_tokens(m) for m in result.surviving)
    assert kept <= 150 or len(result.surviving) <= 3
    # plan() counts every message: its total is exact, for --explain and figures.
    plan = MessageReducer(config=config).plan(history)
    assert plan.total_tokens == sum(every) and plan.kept_tokens == kept
    assert [history[i] for i in plan.pruned] == result.pruned


def test_a_negative_count_makes_the_plan_count_everything() -> None:
    def counter(message: Any) -> int:
        return -5 if message_id(message) == "h0" else 10

    history = _loop_history(30)
    config = ReducerConfig(max_tokens=100, target_tokens=80, token_counter=counter)
    lazy = MessageReducer(config=config).reduce(existing=history)
    eager = MessageReducer(config=config).plan(history)
    assert [history[i] for i in eager.pruned] == lazy.pruned


def _reporting(message: Any, tokens: int) -> Any:
    """``message`` as an ai reply carrying ``usage_metadata`` (input ``tokens``)."""
    usage = {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens + 1}
    if isinstance(message, dict):
        return {**message, "usage_metadata": usage}
    return message.model_copy(update={"usage_metadata": usage})


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    histories(max_turns=14),
    st.integers(8, 120),
    st.booleans(),
    st.lists(st.integers(1, 400), min_size=1, max_size=8),
    operations,
)
def test_the_budget_is_the_same_on_the_incremental_path(
    pool: list[Any],
    high: int,
    overhead: bool,
    reports: list[int],
    ops: list[tuple[str, int, int]],
) -> None:
    """Request overhead (system prompt, tools) and the calibration factor learned from
    usage_metadata give every step exactly what a fresh reducer with the same
    calibration gives, and both learn the same factor."""
    options: dict[str, Any] = {}
    if overhead:
        options = {"system_prompt": "answer briefly, cite sources", "tools": [{"name": "lookup"}]}
    config = ReducerConfig(
        max_tokens=high, target_tokens=high // 2, token_counter=_content_tokens, **options
    )
    pool = [
        _reporting(m, reports[k % len(reports)]) if read_message(m).role == "ai" else m
        for k, m in enumerate(pool)
    ]
    reducer = MessageReducer(config=config)
    state: list[Any] = []
    at = 0
    for op, pick, k in ops:
        new: Any = None
        if op in ("append", "include", "edit", "swap"):
            new, at = pool[at : at + k], at + k
        elif not state:
            continue
        else:
            del state[pick % len(state)]
        fresh = MessageReducer(config=config)
        for key, learned in reducer._calibrations.items():
            twin = fresh.calibration(key)
            twin._reported, twin._estimated = learned._reported, learned._estimated
            twin.factor, twin.observations = learned.factor, learned.observations
        fresh._observed = dict(reducer._observed)
        want = fresh.reduce(existing=list(state), new=copy.copy(new), namespace="t")
        got = reducer.reduce(existing=state, new=new, namespace="t")
        assert got.surviving == want.surviving
        assert got.pruned == want.pruned
        assert reducer.calibration("t").factor == fresh.calibration("t").factor
        state = got.surviving


@st.composite
def abandoned(draw: st.DrawFn) -> list[Any]:
    """A history where some tool results never came (calls abandoned mid-way, some at the
    end still pending), in a chat shape or as OpenAI Responses items (parallel calls split
    over several items)."""
    if draw(st.booleans()):
        from strategies_responses import responses_histories

        pool = list(draw(responses_histories()))
    else:
        pool = draw(histories(max_turns=10))
    holes = draw(st.lists(st.integers(0, 10**6), max_size=4))
    for pick in holes:
        answering = [i for i, m in enumerate(pool) if read_message(m).answers]
        if answering:
            del pool[answering[pick % len(answering)]]
    return pool


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(abandoned(), st.lists(st.integers(1, 3), min_size=1, max_size=40),
       st.sampled_from(["returned", "copies", "whole"]), st.booleans())
def test_dead_calls_are_repaired_on_the_incremental_path_as_by_a_fresh_reducer(
    pool: list[Any], chunks: list[int], mode: str, tokens: bool
) -> None:
    """With ``repair_dangling_calls``, an append reads only the latest response and the new
    messages for dead calls; every step gives what a fresh reducer gives, onto the
    returned list, onto equal copies of it (a checkpointer's), or handed over whole as
    ``existing`` (the middleware's ``list(state["messages"])``)."""
    options: dict[str, Any] = {"repair_dangling_calls": True, "start_on": "human"}
    config = (
        ReducerConfig(max_tokens=10**6, token_counter=_content_tokens, **options)
        if tokens
        else ReducerConfig(min_messages=500, max_messages=1_000, **options)
    )
    reducer = MessageReducer(config=config)
    state: list[Any] = []
    at = 0
    for k in chunks:
        new, at = pool[at : at + k], at + k
        if not new:
            break
        existing = copy.deepcopy(state) if mode == "copies" else state
        want = MessageReducer(config=config).reduce(existing=copy.deepcopy(existing), new=new)
        if mode == "whole":
            got = reducer.reduce(existing=[*existing, *new])
        else:
            got = reducer.reduce(existing=existing, new=new)
        assert len(got.repaired) == len(want.repaired)
        assert [message_id(m) for m in got.surviving] == [
            message_id(m) for m in want.surviving
        ]
        assert [read_message(m).answers for m in got.surviving] == [
            read_message(m).answers for m in want.surviving
        ]
        state = got.surviving


def test_an_agent_config_append_loop_reads_only_the_new_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """agent_config() (dead calls repaired, reasoning by model) and a model name keep the
    incremental path: each append reads the new message and the latest response, not the
    history (it read the whole history twice per append before)."""
    from agentstate_reducer import agent_config

    read = _count_reads(monkeypatch)
    history = _loop_history(60)
    for config, whole in (
        (agent_config(min_messages=400, max_messages=500), False),
        (agent_config(min_messages=400, max_messages=500), True),  # as the middleware
        (agent_config(min_messages=400, max_messages=500, model="gpt-4o", system_prompt="hi"),
         False),
    ):
        reducer = MessageReducer(config=config)
        state = reducer.reduce(existing=history[:10]).surviving
        read.clear()
        for message in history[10:]:
            if whole:
                state = reducer.reduce(existing=[*state, message]).surviving
            else:
                state = reducer.reduce(existing=state, new=[message]).surviving
        assert state == history
        # The tail read for pending calls (a few messages) and the new message.
        assert max(read) <= 9, read


@pytest.mark.parametrize("mode", ["count", "token"])
def test_the_repair_hands_the_records_it_read_to_the_plan(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With dead calls repaired, a list the reducer does not remember is read once: the
    repair's read of it is the read the edit step and the plan use (it was read twice).
    A list it repaired is not read again: only the results it added are (they were read
    with the whole list again)."""
    read = _count_reads(monkeypatch)
    if mode == "count":
        config = ReducerConfig(min_messages=20, max_messages=40, repair_dangling_calls=True)
    else:
        config = ReducerConfig(
            max_tokens=150, token_counter=_content_tokens, repair_dangling_calls=True
        )
    history = _loop_history(30)
    got = MessageReducer(config=config).reduce(existing=history)
    assert read == [len(history)]
    assert got.pruned and not got.repaired
    read.clear()
    dead = [*history[:5], human("openai", "never mind", "late"), *history[6:]]  # c1 died
    MessageReducer(config=config).reduce(existing=dead)
    assert read == [len(dead)]  # the repaired list: its records and the result's


def test_a_response_continued_after_its_reasoning_item_is_read_back_to_its_start() -> None:
    """An assistant message after a reasoning item continues that response: the dead-call
    check of an append reads back to the response's first item, as a fresh reducer does
    (a tail starting at the message missed the calls before the reasoning item)."""
    def call(n: int, kind: str = "function_call") -> dict[str, Any]:
        return {"type": kind, "id": f"fc_{n}", "call_id": f"call_{n}", "name": "lookup",
                "arguments": "{}", "status": "completed"}

    def said(n: int) -> dict[str, Any]:
        return {"type": "message", "role": "assistant", "id": f"msg_{n}", "status": "completed",
                "content": [{"type": "output_text", "text": f"step {n}"}]}

    history = [{"role": "user", "content": "go"}, said(10), call(11, "computer_call"),
               call(13), {"type": "reasoning", "id": "rs_15", "summary": []}, said(16), call(17)]
    new = [{"type": "function_call_output", "call_id": "call_17", "output": "done"}, said(19)]
    config = ReducerConfig(min_messages=50, max_messages=100, repair_dangling_calls=True)
    for cut in range(1, len(history) + 1):
        reducer = MessageReducer(config=config)
        state = reducer.reduce(existing=copy.deepcopy(history[:cut])).surviving
        state = reducer.reduce(existing=state, new=copy.deepcopy(history[cut:])).surviving
        got = reducer.reduce(existing=state, new=copy.deepcopy(new))
        want = MessageReducer(config=config).reduce(existing=copy.deepcopy(state),
                                                     new=copy.deepcopy(new))
        assert [read_message(m).answers for m in got.surviving] == [
            read_message(m).answers for m in want.surviving
        ], cut
        assert len(got.repaired) == len(want.repaired), cut
