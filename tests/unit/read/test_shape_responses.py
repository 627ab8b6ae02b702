"""The OpenAI Responses API / Agents SDK items: read, billed, written back, pruned whole.

The guarantee (hypothesis): a Responses input list that passes
``validate_history(provider="openai-responses")`` still passes after ``reduce()`` with
``agent_config()`` and after ``trim_messages(keep_tool_pairs=True)``; a model response
(a reasoning item and its calls) is kept whole or not at all; nothing before the latest
compaction item survives.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from fast_path import read_fast
from hypothesis import given, settings
from hypothesis import strategies as st
from reading import read_or_error
from strategies_responses import responses_histories

from agentstate_reducer import (
    MessageReducer,
    ReducerConfig,
    agent_config,
    trim_messages,
    validate_history,
)
from agentstate_reducer import messages as m
from agentstate_reducer.cli import load, main
from agentstate_reducer.edit import turn_note
from agentstate_reducer.plan import COMPACTED, current_turn, make_plan, response_units
from agentstate_reducer.read import TURN_NOTE_KIND, injected_kind
from agentstate_reducer.read import responses as shape
from agentstate_reducer.tokens import approximate_token_count

R = "openai-responses"


def _user(text: str = "weather in paris?") -> dict[str, Any]:
    return {"role": "user", "content": text}


def _reasoning(ident: str = "rs_1", encrypted: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": ident,
        "summary": [{"type": "summary_text", "text": "check the weather tool"}],
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def _call(call: str = "call_1", ident: str | None = "fc_1") -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call", "call_id": call, "name": "weather",
                            "arguments": '{"city": "paris"}', "status": "completed"}
    if ident is not None:
        item["id"] = ident
    return item


def _output(call: str = "call_1", text: str = "sunny") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call, "output": text}


def _answer(text: str = "It is sunny.", ident: str = "msg_1") -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": ident, "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _compaction(ident: str = "cmp_1", size: int = 40) -> dict[str, Any]:
    return {"type": "compaction", "id": ident, "encrypted_content": "gAAAA" + "c" * size}


# -- the reader -------------------------------------------------------------------------


def test_roles_repeated_in_the_shape_module_agree_with_the_reader() -> None:
    assert (shape._AI, shape._TOOL, shape._SYSTEM) == (m.AI, m.TOOL, m.SYSTEM)


def test_each_item_is_read_with_its_role_id_and_call_links() -> None:
    items = [
        _user(),
        _reasoning(),
        _call(),
        _output(),
        {"type": "computer_call", "id": "cu_1", "call_id": "call_2", "action": {"type": "click"}},
        {"type": "computer_call_output", "call_id": "call_2",
         "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA"}},
        {"type": "custom_tool_call", "call_id": "call_3", "name": "sql", "input": "select 1"},
        {"type": "custom_tool_call_output", "call_id": "call_3", "output": "1"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        _answer(),
        _compaction(),
    ]
    got = [(v.role, v.id, v.calls, v.answers, v.group) for v in m.read_messages(items)]
    assert got == [
        ("human", None, (), (), m.GROUP_NONE),
        ("ai", "rs_1", (), (), m.GROUP_REASONING),
        ("ai", "fc_1", ("call_1",), (), m.GROUP_OUTPUT),
        ("tool", None, (), ("call_1",), m.GROUP_NONE),
        ("ai", "cu_1", ("call_2",), (), m.GROUP_OUTPUT),
        ("tool", None, (), ("call_2",), m.GROUP_NONE),
        ("ai", None, ("call_3",), (), m.GROUP_OUTPUT),
        ("tool", None, (), ("call_3",), m.GROUP_NONE),
        ("ai", "ws_1", (), (), m.GROUP_OUTPUT),
        ("ai", "msg_1", (), (), m.GROUP_NONE),
        ("system", "cmp_1", (), (), m.GROUP_BOUNDARY),
    ]
    assert [m.item_type(i) for i in items[:3]] == [None, "reasoning", "function_call"]
    assert [m.read_message(i, k) for k, i in enumerate(items)] == m.read_messages(items)


def test_chat_shapes_keep_the_plain_view() -> None:
    views = m.read_messages([_user(), {"role": "assistant", "content": "hi"},
                             {"type": "human", "content": "x"}])
    assert {type(v) for v in views} == {m.MessageRecord}
    assert response_units(views) == ()


def test_billing_counts_what_the_provider_bills() -> None:
    call = m.message_parts(_call())
    assert call.tool_calls == (("weather", '{"city": "paris"}'),) and call.texts == ()
    output = m.message_parts(_output(text="sunny and warm"))
    assert output.texts == ("sunny and warm",) and output.tool_call_id == "call_1"
    shot = m.message_parts({"type": "computer_call_output", "call_id": "c",
                            "output": {"type": "computer_screenshot", "image_url": "x"}})
    assert shot.media == 1
    # Reasoning: the encrypted content stands for the hidden tokens; the summary is
    # billed only when nothing else is carried back.
    assert m.message_parts(_reasoning(encrypted="e" * 50)).texts == ("e" * 50,)
    assert m.message_parts(_reasoning()).texts == ("check the weather tool",)
    # A compaction item costs by its size.
    small, large = approximate_token_count(_compaction(size=10)), approximate_token_count(
        _compaction(size=2000)
    )
    assert large > small * 10


# -- lossless write-back ---------------------------------------------------------------


def test_context_edits_write_back_in_place_keeping_every_key() -> None:
    item = {"id": "fco_1", "type": "function_call_output", "call_id": "call_1",
            "output": "long result " * 50, "status": "completed", "x_vendor": {"a": [1]}}
    before = copy.deepcopy(item)
    [part] = m.editable_parts(item)
    assert (part.path, part.kind, part.call_id) == (("output",), m.TOOL_RESULT_PART, "call_1")
    edited = m.with_parts(item, {part.path: "[cleared]"})
    assert list(edited) == list(item) and edited["output"] == "[cleared]"
    assert {k: v for k, v in edited.items() if k != "output"} == {
        k: v for k, v in item.items() if k != "output"
    }
    assert item == before  # never mutated
    [args] = m.editable_parts(_call())
    assert (args.path, args.kind, args.tool) == (("arguments",), m.TOOL_ARGS_PART, "weather")


def test_reasoning_and_compaction_are_never_editable() -> None:
    for item in (_reasoning(encrypted="e" * 100), _compaction(),
                 {"type": "computer_call_output", "call_id": "c",
                  "output": {"type": "computer_screenshot", "image_url": "x"}}):
        assert m.editable_parts(item) == ()
        assert m.content_kinds(item) == ()


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(history=responses_histories(), data=st.data())
def test_every_item_writes_back_losslessly(history: list[dict[str, Any]], data: Any) -> None:
    snapshot = copy.deepcopy(history)
    for i, item in enumerate(history):
        parts = m.editable_parts(item, i)
        values = {p.path: data.draw(st.text(max_size=5)) for p in parts}
        edited = m.with_parts(item, values)
        assert list(edited) == list(item)  # same keys, same order
        for key in item:
            if not any(path[0] == key for path in values):
                assert edited[key] == item[key]
        # Links unchanged (the record also carries the billed text, which was edited).
        assert m.read_message(edited, i)[:4] == m.read_message(item, i)[:4]
        if isinstance(item.get("content"), list):  # trim's partial copies
            part = m.with_content(item, item["content"][:1])
            assert list(part) == list(item) and part["x_note"] == 1
    assert history == snapshot


# -- the plan --------------------------------------------------------------------------


def _surviving(history: list[Any], config: ReducerConfig) -> list[Any]:
    return MessageReducer(config=config).reduce(history).surviving


def test_a_reasoning_item_is_its_reasoning_part() -> None:
    # The reader's one reasoning API sees the item, so trim's never-partial rule does too.
    item = {**_reasoning("rs_1"), "content": [{"type": "reasoning_text", "text": "hm"}] * 2}
    assert m.reasoning_parts(item) == (m.ReasoningPart("reasoning", None, True),)
    assert m.content_kinds(item) == (m.REASONING_PART, m.REASONING_PART)
    bare = {"type": "reasoning", "summary": []}  # neither id nor encrypted_content
    assert m.reasoning_parts(bare) == (m.ReasoningPart("reasoning", None, False),)
    assert m.reasoning_parts({**bare, "encrypted_content": "gAAAA"})[0].signed
    for other in (_call(), _output(), _answer(), _compaction(), _user()):
        assert m.reasoning_parts(other) == ()


@pytest.mark.parametrize("strategy", ["first", "last"])
def test_trim_never_cuts_a_reasoning_item_in_part(strategy: str) -> None:
    texts = [{"type": "reasoning_text", "text": c * 200} for c in ("a ", "b ")]
    item = {**_reasoning("rs_1"), "content": texts}
    history = [_user(), item, _call(), _output()] if strategy == "last" else [item, _call()]
    for budget in range(0, 400, 10):
        kept = trim_messages(history, max_tokens=budget, token_counter="approximate",
                             strategy=strategy, allow_partial=True,  # type: ignore[arg-type]
                             keep_tool_pairs=True)
        assert all(any(k is x for x in history) for k in kept), budget  # no partial copy


def test_the_fast_path_never_reads_an_item_that_groups() -> None:
    # Items are read by the Responses shape, one instance per group, never by the one
    # fast path (which knows no group): response_units then finds every unit.
    items = [_reasoning(), _call(), _output(), _compaction(), {"type": "web_search_call",
                                                               "id": "ws_1"}]
    for item in items:
        assert read_fast(item) is None, item
    groups = [m.read_message(x).group for x in items]
    assert groups == [m.GROUP_REASONING, m.GROUP_OUTPUT, m.GROUP_NONE, m.GROUP_BOUNDARY,
                      m.GROUP_OUTPUT]
    assert m.read_message(_answer()).group == m.GROUP_NONE  # a message: it stands alone


def test_a_reasoning_item_is_pruned_with_its_call() -> None:
    history = [_user("q1"), _reasoning(), _call(), _output(), _answer(),
               _user("q2"), _answer("later", "msg_2")]
    # The count window ends between the reasoning item and its call.
    kept = _surviving(history, ReducerConfig(max_messages=5, min_messages=5,
                                             preserve_first=False))
    assert kept == history[1:]  # the response stays whole: reasoning, call, output
    plan = make_plan(m.read_messages(history), ReducerConfig(max_messages=4, min_messages=3,
                                                             preserve_first=False))
    assert set(plan.pruned) >= {1, 2, 3}


def test_parallel_calls_of_the_latest_response_stay_pending() -> None:
    history = [_user(), _reasoning(), _call("c1", "fc_1"), _call("c2", "fc_2")]
    result = MessageReducer(config=agent_config(max_messages=100)).reduce(history)
    assert result.repaired == [] and result.surviving == history
    # Once the conversation moves on, a dead call gets an output in its own shape.
    moved = [*history, _output("c2"), _user("never mind")]
    result = MessageReducer(config=agent_config(max_messages=100)).reduce(moved)
    assert result.repaired == [
        {"type": "function_call_output", "call_id": "c1",
         "output": m.INTERRUPTED_RESULT}
    ]
    assert validate_history(result.surviving, provider=R) == []


def _ladder_config() -> ReducerConfig:
    return agent_config(max_tokens=1, target_tokens=1, token_counter="approximate",
                        preserve_first=False)


def test_the_turn_ladder_never_drops_one_of_the_calls_of_one_response() -> None:
    # Found by the validity property below (shrunk by hand from its example): the ladder
    # dropped the first of two parallel calls of one response, the response was kept
    # whole anyway, and the turn note went in between the reasoning item and its call.
    history = [_call("c0", "fc_0"), _output("c0"), _user(), _reasoning("rs_1"),
               _call("c1", "fc_1"), _call("c2", "fc_2")]
    assert validate_history(history, provider=R) == []
    result = MessageReducer(config=_ladder_config()).reduce(history)
    assert validate_history(result.surviving, provider=R) == []
    assert result.surviving[-3:] == history[-3:]
    assert result.turn_steps_dropped == 0  # the turn's one response: nothing to drop


def test_the_turn_ladder_drops_a_response_whole_and_notes_it_before_the_next() -> None:
    history = [_user(), _reasoning("rs_1"), _call("c1", "fc_1"), _output("c1"),
               _reasoning("rs_2"), _call("c2", "fc_2"), _call("c3", "fc_3")]
    result = MessageReducer(config=_ladder_config()).reduce(history)
    assert validate_history(result.surviving, provider=R) == []
    # One step gone (fc_1), not two: fc_2 shares its response with fc_3, which stays.
    assert result.turn_steps_dropped == 1
    assert result.surviving[0] == history[0] and result.surviving[2:] == history[4:]
    assert injected_kind(result.surviving[1]) == TURN_NOTE_KIND


def test_the_turn_note_goes_before_the_reasoning_item_of_the_first_step() -> None:
    history = [_user(), _reasoning("rs_1"), _call("c1", "fc_1"), _output("c1"),
               _reasoning("rs_2"), _call("c2", "fc_2"), _output("c2")]
    views = m.read_messages(history)
    note = turn_note(history, views, current_turn(views), 1, _ladder_config())
    assert note is not None
    at, written, replaces = note
    assert (at, replaces) == (1, False)  # at rs_1, not between it and fc_1
    assert injected_kind(written) == TURN_NOTE_KIND


def test_nothing_before_the_latest_compaction_survives() -> None:
    history = [_user("q1"), _answer(), _compaction("cmp_1"), _user("q2"),
               _answer("a2", "msg_2"), _compaction("cmp_2"), _user("q3")]
    result = MessageReducer(config=ReducerConfig(max_messages=100, preserve_first=False)).reduce(
        history
    )
    assert result.surviving == history[5:]
    assert result.pruned_by_reason == {COMPACTED: 5}
    # The preserved first message stays (a developer prompt, say).
    kept = _surviving(history, ReducerConfig(max_messages=100))
    assert kept == [history[0], *history[5:]]


def test_compaction_prunes_the_outputs_of_calls_before_it() -> None:
    history = [_user(), _call("c1"), _compaction(), _output("c1"), _answer()]
    kept = _surviving(history, ReducerConfig(max_messages=100, preserve_first=False))
    assert kept == [history[2], history[4]]


def test_the_incremental_path_sees_a_new_compaction_item() -> None:
    reducer = MessageReducer(config=ReducerConfig(max_messages=100, preserve_first=False))
    first = reducer.reduce([_user("q1"), _answer()]).surviving
    grown = reducer.reduce(first, [_compaction(), _user("q2")]).surviving
    assert grown == [_compaction(), _user("q2")]


# -- the validator ---------------------------------------------------------------------


def _rules(history: list[Any]) -> list[tuple[int, str]]:
    return [(p.index, p.rule) for p in validate_history(history, provider=R)]


def test_validator_rules_quote_the_provider() -> None:
    assert _rules([_user(), _reasoning(), _call(), _output(), _answer()]) == []
    orphan = validate_history([_user(), _output("call_9")], provider=R)
    assert [(p.index, p.rule) for p in orphan] == [(1, "orphan-result")]
    assert "No tool call found for function call output with call_id call_9." in orphan[0].detail
    unanswered = validate_history([_user(), _call(), _user("again")], provider=R)
    assert [(p.index, p.rule) for p in unanswered] == [(1, "unanswered-call")]
    assert "No tool output found for function call call_1." in unanswered[0].detail
    alone = validate_history([_user(), _reasoning(), _user("again")], provider=R)
    assert [(p.index, p.rule) for p in alone] == [(1, "reasoning-alone")]
    assert (
        "Item 'rs_1' of type 'reasoning' was provided without its required following item."
        in alone[0].detail
    )
    assert _rules([_user(), _reasoning()]) == [(1, "reasoning-alone")]
    duplicate = validate_history([_user(), _answer(), _user(), _answer()], provider=R)
    assert [(p.index, p.rule) for p in duplicate] == [(3, "duplicate-item")]
    assert "Duplicate item found with id msg_1." in duplicate[0].detail


def test_validator_allows_pending_calls_only_in_the_latest_response() -> None:
    assert _rules([_user(), _reasoning(), _call("c1", "fc_1"), _call("c2", "fc_2")]) == []
    assert _rules([_user(), _call("c1", "fc_1"), _call("c2", "fc_2"), _output("c2")]) == []
    assert _rules([_user(), _call("c1", "fc_1"), _output("c1"), _call("c2", "fc_2")]) == []
    assert _rules([_user(), _call("c1", "fc_1"), _answer(), _user("more")]) == [
        (1, "unanswered-call")
    ]
    # Outputs pair by call_id wherever they stand after the call.
    assert _rules([_user(), _call("c1", "fc_1"), _call("c2", "fc_2"), _output("c2"),
                   _output("c1"), _answer()]) == []


# -- the guarantee ---------------------------------------------------------------------


def _units_whole(history: list[Any], kept: list[Any]) -> None:
    ids = {id(x) for x in kept}
    for begin, end in response_units(m.read_messages(history)):
        inside = [id(x) in ids for x in history[begin:end]]
        assert all(inside) or not any(inside), (begin, end, inside)


def _after_compaction(history: list[Any], kept: list[Any], first: bool) -> None:
    marks = [i for i, x in enumerate(history) if x.get("type") == "compaction"]
    if not marks:
        return
    ids = {id(x) for x in kept}
    gone = history[1 if first else 0 : marks[-1]]
    assert not any(id(x) in ids for x in gone)
    assert id(history[marks[-1]]) in ids


@st.composite
def _configs(draw: st.DrawFn) -> ReducerConfig:
    options: dict[str, Any] = {"preserve_first": draw(st.booleans())}
    if draw(st.booleans()):
        most = draw(st.integers(1, 400))
        options.update(max_tokens=most, target_tokens=draw(st.integers(1, most)),
                       token_counter="approximate")
    else:
        least = draw(st.integers(0, 8))
        options.update(min_messages=least, max_messages=draw(st.integers(least, least + 8)))
    return agent_config(**options)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(history=responses_histories(), config=_configs())
def test_reduce_keeps_a_valid_responses_history_valid(
    history: list[dict[str, Any]], config: ReducerConfig
) -> None:
    assert validate_history(history, provider=R) == []
    result = MessageReducer(config=config).reduce(history)
    assert validate_history(result.surviving, provider=R) == []
    _units_whole(history, result.surviving)
    _after_compaction(history, result.surviving, config.preserve_first)
    # The latest model response keeps its reasoning.
    views = m.read_messages(history)
    last = max((i for i, v in enumerate(views) if v.role == "ai"), default=None)
    if last is not None and any(x is history[last] for x in result.surviving):
        for begin, end in response_units(views):
            if begin <= last < end:
                assert all(any(x is y for y in result.surviving) for x in history[begin:end])


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    history=responses_histories(),
    budget=st.integers(0, 400),
    strategy=st.sampled_from(["first", "last"]),
    partial=st.booleans(),
)
def test_trim_keeps_a_valid_responses_history_valid(
    history: list[dict[str, Any]], budget: int, strategy: str, partial: bool
) -> None:
    kept = trim_messages(history, max_tokens=budget, token_counter="approximate",
                         strategy=strategy, allow_partial=partial,  # type: ignore[arg-type]
                         keep_tool_pairs=True)
    assert validate_history(kept, provider=R) == []
    _units_whole(history, kept)


# -- the command line ------------------------------------------------------------------


def test_cli_reads_a_responses_request_and_writes_it_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = [_user("q1"), _reasoning("rs_1"), _call("c1", "fc_1"), _output("c1"),
             _answer("a1", "msg_1"), _user("q2"), _reasoning("rs_2"), _call("c2", "fc_2"),
             _output("c2"), _answer("a2", "msg_2")]
    request = {"model": "gpt-5", "instructions": "be brief", "input": items, "store": False}
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    transcript = load(str(path))
    assert transcript.provider == R and transcript.label.startswith("OpenAI Responses request")
    out = tmp_path / "out.json"
    status = main(["reduce", str(path), "--max-messages", "6", "--explain", "--out", str(out)])
    text = capsys.readouterr().out
    assert status == 0
    assert "OpenAI Responses request (instructions planned as the first message)" in text
    assert "openai-responses rules, output: OK" in text
    written = json.loads(out.read_text())
    assert list(written) == list(request) and written["instructions"] == "be brief"
    assert written["input"] == items[5:]
    assert validate_history(written["input"], provider=R) == []


def test_cli_names_a_list_of_responses_items(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    path.write_text(json.dumps([_user(), _call(), _output(), _answer()]))
    transcript = load(str(path))
    assert transcript.provider == R and "OpenAI Responses items" in transcript.label


_odd = st.sampled_from([None, "", "x", "c1", 0, 7, [], {}, True, [{"type": "input_text"}]])
_items = st.fixed_dictionaries(
    {"type": st.sampled_from(["function_call", "function_call_output", "reasoning",
                              "custom_tool_call", "web_search_call", "compaction"])},
    optional={
        "id": st.sampled_from([None, "", "fc_1", 3]),
        "call_id": st.sampled_from([None, "", "c1", 4]),
        "name": st.sampled_from([None, "", "f", 5]),
        "arguments": st.sampled_from([None, "", "{}", {"a": 1}]),
        "output": _odd,
        "content": _odd,
        "encrypted_content": st.sampled_from([None, "", "gAAA", 6]),
        "summary": _odd,
        "role": st.sampled_from([None, "assistant"]),
    },
) | st.one_of(  # the commonest items, each field now and then odd
    st.fixed_dictionaries(
        {"type": st.just("function_call"), "call_id": st.sampled_from(["c1", "", 4]),
         "name": st.sampled_from(["f", ""]), "arguments": st.sampled_from(["{}", "", {}])},
        optional={"id": st.sampled_from(["fc_1", "", None, 3])},
    ),
    st.fixed_dictionaries(
        {"type": st.just("function_call_output"), "call_id": st.sampled_from(["c1", "", None]),
         "output": st.sampled_from(["ok", "", [{"type": "input_text", "text": "t"}]])},
        optional={"id": st.sampled_from(["fo_1", None])},
    ),
    st.fixed_dictionaries(
        {"type": st.just("reasoning"), "encrypted_content": st.sampled_from(["gAAA", "", None])},
        optional={"id": st.sampled_from(["rs_1", None]), "summary": _odd, "content": _odd},
    ),
)


@settings(max_examples=400, deadline=None)
@given(item=_items)
def test_the_plain_item_reader_gives_the_full_reader_s_record(item: dict[str, Any]) -> None:
    """A dict item goes through the reader of the commonest items; the same fields as
    another mapping through read_item() and billed(): the record (or the error) is the same."""
    from types import MappingProxyType

    read = shape._RESPONSES.read
    assert read_or_error(lambda i: read(i, 0), item) == read_or_error(
        lambda i: read(MappingProxyType(i), 0), item
    )
    assert read_or_error(m.read_message, item) == read_or_error(
        m.read_message, MappingProxyType(item)
    )


_kinds = st.sampled_from([_user, _reasoning, _call, _output, _answer, _compaction,
                          lambda: {"type": "web_search_call", "id": "ws_1"}])


@settings(max_examples=300, deadline=None)
@given(makers=st.lists(_kinds, max_size=14))
def test_response_units_are_the_runs_of_joined_neighbours(makers: list[Any]) -> None:
    """Each unit is a maximal run of two or more items, each joining the one before it;
    the latest boundary is the last compaction item."""
    from agentstate_reducer._structure import _boundary, _joins

    views = m.read_messages([make() for make in makers])
    runs, begin = [], 0
    for j in range(1, len(views) + 1):
        if j == len(views) or not _joins(views[j - 1], views[j]):
            if j - begin > 1:
                runs.append((begin, j))
            begin = j
    assert response_units(views) == tuple(runs)
    boundaries = [i for i, v in enumerate(views) if v.group == m.GROUP_BOUNDARY]
    assert _boundary(views) == (boundaries[-1] if boundaries else None)
