"""Context editing: the pure edit step, its options, and the reducer around it."""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from strategies import SHAPES, Calls, Results, Say, Script, render, scripts
from strategies_responses import responses_histories
from test_shape_bedrock import bedrock_histories
from test_shape_gemini import gemini_histories

from agentstate_reducer import (
    ClearToolResults,
    ConfigError,
    MessageReducer,
    Offload,
    ReducerConfig,
    validate_history,
)
from agentstate_reducer.edit import (
    CLEARED,
    CLEARED_INPUT,
    OFFLOADED,
    edit_messages,
    handle_of,
    is_edited,
)
from agentstate_reducer.read import (
    TOOL_ARGS_PART,
    TOOL_RESULT_PART,
    editable_parts,
    message_id,
    package_note,
    part_text,
    read_messages,
    with_parts,
)
from agentstate_reducer.tokens import approximate_text_tokens, approximate_token_count

BIG = "lorem ipsum dolor sit amet " * 60  # about 300 tokens


class Hook:
    """An on_prune hook recording every message it receives."""

    def __init__(self) -> None:
        self.received: list[Any] = []

    def __call__(self, messages: list[Any], namespace: Any) -> None:
        self.received.extend(messages)

    def edited(self) -> list[Any]:
        return [m for m in self.received if (package_note(m) or {}).get("edit")]


def conversation(
    turns: int, *, result: str = BIG, tool: str = "lookup", tag: str = ""
) -> list[Any]:
    """A LangChain conversation: per turn a question, one tool call, its result, an answer."""
    out: list[Any] = [SystemMessage("be brief", id="sys")]
    for t in range(turns):
        call = {"id": f"c{tag}{t}", "name": tool, "args": {"q": f"q{t}"}}
        out += [
            HumanMessage(f"question {t}", id=f"h{tag}{t}"),
            AIMessage("", id=f"a{tag}{t}", tool_calls=[call]),
            ToolMessage(f"{t}: {result}", tool_call_id=f"c{tag}{t}", id=f"t{tag}{t}"),
            AIMessage(f"answer {t}", id=f"b{tag}{t}"),
        ]
    return out


def reducer(*edits: Any, hook: Hook | None = None, **options: Any) -> MessageReducer:
    options.setdefault("token_counter", "approximate")
    options.setdefault("max_tokens", 1_000)
    config = ReducerConfig(context_edits=list(edits), on_prune=[hook] if hook else [], **options)
    return MessageReducer(config=config)


def total(messages: list[Any]) -> int:
    return sum(approximate_token_count(m) for m in messages)


def run_edit(messages: list[Any], config: ReducerConfig) -> Any:
    counter = approximate_token_count
    counts = [counter(m) for m in messages]
    return edit_messages(messages, read_messages(messages), counts, config, counter)


# -- options ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: ClearToolResults(keep=-1), "keep"),
        (lambda: ClearToolResults(keep=True), "keep"),
        (lambda: ClearToolResults(trigger_tokens=0), "trigger_tokens"),
        (lambda: ClearToolResults(trigger_messages="5"), "trigger_messages"),
        (lambda: ClearToolResults(clear_at_least=-3), "clear_at_least"),
        (lambda: ClearToolResults(exclude_tools="lookup"), "exclude_tools"),
        (lambda: ClearToolResults(exclude_tools=[1]), "exclude_tools"),
        (lambda: ClearToolResults(clear_tool_inputs=1), "clear_tool_inputs"),
        (lambda: Offload(above=0), "above"),
        (lambda: Offload(head=-1), "head"),
        (lambda: Offload(above=100, head=40, tail=20), r"head \+ tail"),
        (lambda: Offload(text="yes"), "text"),
    ],
)
def test_bad_options_name_the_field(make: Any, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        make()


def test_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        ClearToolResults(100)  # type: ignore[misc]
    with pytest.raises(TypeError):
        Offload(100)  # type: ignore[misc]


def test_exclude_tools_becomes_a_frozenset() -> None:
    assert ClearToolResults(exclude_tools=["a", "b"]).exclude_tools == frozenset({"a", "b"})


@pytest.mark.parametrize(
    ("edits", "match"),
    [
        ("clear", "list of ClearToolResults"),
        ([ClearToolResults(), 3], r"context_edits\[1\]"),
        ([Offload(), Offload()], "second Offload"),
    ],
)
def test_context_edits_validated(edits: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ReducerConfig(context_edits=edits)


def test_context_edits_stored_as_a_tuple() -> None:
    options = [ClearToolResults(), Offload()]
    assert ReducerConfig(context_edits=options).context_edits == tuple(options)


# -- clearing --------------------------------------------------------------------


def test_nothing_is_cleared_under_the_trigger() -> None:
    history = conversation(2)
    result = reducer(ClearToolResults(keep=0), max_tokens=10_000).reduce(history)
    assert result.edited == ()
    assert result.surviving == history


def test_clears_all_but_the_last_keep_results_and_names_tool_size_handle() -> None:
    history = conversation(6)
    hook = Hook()
    result = reducer(ClearToolResults(keep=2), hook=hook, max_tokens=1_500).reduce(history)
    assert result.pruned == []  # clearing brought it under the threshold: nothing dropped
    cleared = [e for e in result.edited if e.kind == CLEARED]
    assert [e.message_id for e in cleared] == [f"t{t}" for t in range(4)]
    by_id = {m.id: m for m in result.surviving}
    for edit in cleared:
        text = by_id[edit.message_id].content
        assert text == f"[cleared: result of lookup, {edit.tokens} tokens, handle {edit.handle}]"
        assert edit.tokens == approximate_token_count(
            next(m for m in history if getattr(m, "id", None) == edit.message_id)
        )
    assert by_id["t4"].content.startswith("4: lorem")
    assert by_id["t5"].content.startswith("5: lorem")
    assert [m.id for m in hook.edited()] == [e.handle for e in cleared]


def test_the_placeholder_handle_is_the_digest_of_the_original() -> None:
    history = conversation(4)
    result = reducer(ClearToolResults(keep=1), max_tokens=800).reduce(history)
    for edit in result.edited:
        original = next(m for m in history if getattr(m, "id", None) == edit.message_id)
        assert edit.handle == handle_of(original.content)
        assert edit.original.id == edit.handle
        assert edit.original.content == original.content
        note = package_note(edit.original)
        assert note is not None
        assert note["edit"] == CLEARED and note["message_id"] == original.id


def test_excluded_tools_are_never_cleared_nor_counted_in_keep() -> None:
    history = conversation(3, tool="memory", tag="m") + conversation(3)[1:]
    result = reducer(
        ClearToolResults(keep=1, exclude_tools={"memory"}), max_tokens=total(history) - 10
    ).reduce(history)
    assert result.pruned == []
    assert {e.tool for e in result.edited} == {"lookup"}
    assert len(result.edited) == 2  # three lookup results, the last one kept
    kept = [m for m in result.surviving if isinstance(m, ToolMessage) and not is_edited(m.content)]
    assert len(kept) == 4  # the three memory results and the last lookup result


def test_clear_at_least_holds_back_a_small_gain() -> None:
    history = conversation(3)
    tokens = approximate_token_count(history[3])
    most = total(history) - 10
    small = reducer(ClearToolResults(keep=2, clear_at_least=tokens), max_tokens=most)
    assert small.reduce(history).edited == ()
    enough = reducer(ClearToolResults(keep=2, clear_at_least=tokens // 2), max_tokens=most)
    assert [e.message_id for e in enough.reduce(history).edited] == ["t0"]


def test_a_result_shorter_than_its_placeholder_stays() -> None:
    history = conversation(5, result="ok")
    result = reducer(ClearToolResults(keep=0), max_tokens=30, target_tokens=30).reduce(history)
    assert result.edited == ()


def test_a_short_result_is_never_cleared_nor_counted() -> None:
    """A result of at most 256 characters stays, however a counter weighs it, and is
    not even counted; one character more (and over 64 tokens) and it is cleared."""
    counted: list[Any] = []

    def heavy(message: Any) -> int:  # 1 token per character: 256 characters > 64 tokens
        counted.append(message)
        return len(str(getattr(message, "content", "")))

    history = conversation(3, result="x" * 253)  # "0: " + 253 = 256 characters
    config = ReducerConfig(
        max_messages=100,
        token_counter=heavy,
        context_edits=[ClearToolResults(keep=0, trigger_messages=2)],
    )
    assert MessageReducer(config=config).reduce(history).edited == ()
    assert counted == []
    longer = conversation(3, result="x " * 127)  # 257 characters, over 64 tokens
    assert len(MessageReducer(config=config).reduce(longer).edited) == 3
    # Count mode sizes a part with the heuristic: the counter is never asked.
    assert counted == []


def test_count_mode_counts_only_messages_long_enough_to_offload() -> None:
    counted: list[Any] = []

    def counter(message: Any) -> int:
        counted.append(message)
        return approximate_token_count(message)

    history = conversation(20, result="short")
    history[41] = ToolMessage(BIG * 4, tool_call_id="c10", id="t10")
    config = ReducerConfig(
        max_messages=1_000, token_counter=counter, context_edits=[Offload(above=600)]
    )
    result = MessageReducer(config=config).reduce(history)
    assert [e.message_id for e in result.edited] == ["t10"]
    # Only the long one (count mode needs no count of its preview).
    assert [message_id(m) for m in counted] == ["t10"]


def test_trigger_messages_fires_in_count_mode() -> None:
    history = conversation(4)
    config = ReducerConfig(
        max_messages=100,
        token_counter="approximate",
        context_edits=[ClearToolResults(keep=1, trigger_messages=10)],
    )
    result = MessageReducer(config=config).reduce(history)
    assert result.pruned == []
    assert [e.message_id for e in result.edited] == ["t0", "t1", "t2"]


def test_count_mode_uses_its_own_threshold_by_default() -> None:
    history = conversation(4)
    config = ReducerConfig(
        min_messages=14,
        max_messages=16,
        token_counter="approximate",
        context_edits=[ClearToolResults(keep=1)],
    )
    result = MessageReducer(config=config).reduce(history)
    # Count mode edits every old result, then prunes the oldest turn by count.
    assert [e.message_id for e in result.edited] == ["t0", "t1", "t2"]
    assert {m.id for m in result.pruned} == {"h0", "a0", "t0"}
    assert is_edited(next(m for m in result.pruned if m.id == "t0").content)


def test_clear_tool_inputs_in_every_place_a_call_keeps_them() -> None:
    call = {"id": "c0", "name": "lookup", "args": {"q": "x" * 400}}
    blocks = [{"type": "tool_use", "id": "c0", "name": "lookup", "input": {"q": "x" * 400}}]
    history = [
        HumanMessage("q", id="h"),
        AIMessage(blocks, tool_calls=[call], id="a"),
        ToolMessage(BIG, tool_call_id="c0", id="t"),
        HumanMessage("again", id="h2"),
        AIMessage("", tool_calls=[{**call, "id": "c1"}], id="a2"),
        ToolMessage(BIG, tool_call_id="c1", id="t2"),
    ]
    result = reducer(
        ClearToolResults(keep=1, clear_tool_inputs=True), max_tokens=700, preserve_first=False
    ).reduce(history)
    assert result.pruned == []
    edited = {m.id: m for m in result.surviving}["a"]
    assert edited.tool_calls[0]["args"] == {}
    assert edited.content[0]["input"] == {}
    kinds = Counter(e.kind for e in result.edited)
    assert kinds == {CLEARED: 1, CLEARED_INPUT: 2}
    inputs = [e for e in result.edited if e.kind == CLEARED_INPUT]
    assert all(e.original.tool_calls[0]["args"] == call["args"] for e in inputs)
    assert {m.id: m for m in result.surviving}["a2"].tool_calls[0]["args"] == call["args"]


def test_openai_arguments_are_cleared_to_an_empty_json_object() -> None:
    history = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c0",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": json.dumps({"q": "x" * 400})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": BIG},
        {"role": "user", "content": "again"},
    ]
    result = reducer(
        ClearToolResults(keep=0, clear_tool_inputs=True), max_tokens=300, preserve_first=False
    ).reduce(history)
    assert result.surviving[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert result.surviving[2]["content"].startswith("[cleared: result of lookup, ")
    assert validate_history(result.surviving) == []


def test_the_edit_is_the_same_on_every_reduce_and_the_prefix_stays_between_triggers() -> None:
    hook = Hook()
    r = reducer(ClearToolResults(keep=1), hook=hook, max_tokens=1_000)
    state = r.reduce(conversation(3)).surviving
    prefix = copy.deepcopy(state)
    for t in range(3, 4):
        # A short turn keeps it under the trigger: nothing is edited, the prefix stays.
        state = r.reduce(
            state,
            [HumanMessage(f"question {t}", id=f"h{t}"), AIMessage(f"answer {t}", id=f"b{t}")],
        ).surviving
        assert state[: len(prefix)] == prefix
    again = reducer(ClearToolResults(keep=1), max_tokens=1_000).reduce(conversation(3))
    assert again.surviving == prefix
    assert Counter(m.id for m in hook.edited()) == Counter(e.handle for e in again.edited)


def test_originals_reach_the_hooks_once_over_repeated_reduces() -> None:
    hook = Hook()
    r = reducer(ClearToolResults(keep=1), Offload(above=400, head=50, tail=20), hook=hook)
    history = conversation(4)
    for _ in range(3):  # a saver writing the same unedited checkpoint again
        r.reduce(history)
    handles = Counter(m.id for m in hook.edited())
    assert handles and max(handles.values()) == 1


def test_the_input_is_never_mutated() -> None:
    history = conversation(5)
    before = copy.deepcopy(history)
    edits = [ClearToolResults(keep=1, clear_tool_inputs=True), Offload(above=400, head=50, tail=20)]
    assert reducer(*edits).reduce(history).edited

    assert history == before


# -- offloading --------------------------------------------------------------------


def test_an_oversized_result_in_the_current_turn_is_offloaded_to_a_preview() -> None:
    payload = "START " + "word " * 4_000 + " END"
    history = [
        HumanMessage("fetch it", id="h"),
        AIMessage("", tool_calls=[{"id": "c", "name": "fetch", "args": {}}], id="a"),
        ToolMessage(payload, tool_call_id="c", id="t"),
    ]
    hook = Hook()
    result = reducer(Offload(above=1_000, head=50, tail=20), hook=hook, max_tokens=100_000).reduce(
        history
    )
    (edit,) = result.edited
    assert edit.kind == OFFLOADED and edit.tool == "fetch" and edit.handle == handle_of(payload)
    preview = result.surviving[2].content
    assert preview.startswith(f"[offloaded: result of fetch, {edit.tokens} tokens, handle ")
    assert edit.handle in preview.splitlines()[0]
    assert "START" in preview and preview.rstrip().endswith("END")
    assert approximate_token_count(result.surviving[2]) < 200
    assert [m.content for m in hook.edited()] == [payload]
    assert validate_history(result.surviving) == []


def test_a_text_part_is_offloaded_unless_text_is_off() -> None:
    paste = "paragraph " * 3_000
    history = [{"role": "user", "content": [{"type": "text", "text": paste}], "id": "u"}]
    result = reducer(Offload(above=1_000), preserve_first=False).reduce(history)
    (edit,) = result.edited
    assert edit.tool is None
    block = result.surviving[0]["content"][0]
    assert block["type"] == "text" and block["text"].startswith("[offloaded: text, ")
    assert edit.original["content"] == [{"type": "text", "text": paste}]
    assert edit.original["id"] == edit.handle
    off = reducer(Offload(above=1_000, text=False), preserve_first=False).reduce(history)
    assert off.edited == ()


def test_system_messages_are_never_edited() -> None:
    history = [SystemMessage("rule " * 3_000, id="s"), HumanMessage("hi", id="h")]
    assert reducer(Offload(above=1_000), preserve_first=False).reduce(history).edited == ()


def test_anthropic_tool_result_blocks_are_edited_one_by_one() -> None:
    history = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "u1", "name": "a", "input": {}},
                {"type": "tool_use", "id": "u2", "name": "b", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "u1", "content": BIG},
                {"type": "tool_result", "tool_use_id": "u2", "content": "short"},
                {"type": "text", "text": "and go on"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {"role": "user", "content": "more"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "u3", "name": "a", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u3", "content": BIG}]},
    ]
    result = reducer(ClearToolResults(keep=1), max_tokens=500, preserve_first=False).reduce(history)
    (edit,) = result.edited
    assert edit.tool == "a" and edit.call_id == "u1"
    blocks = result.surviving[2]["content"]
    assert blocks[0]["content"].startswith("[cleared: result of a, ")
    assert blocks[1]["content"] == "short" and blocks[2]["text"] == "and go on"
    assert edit.original["content"] == [history[2]["content"][0]]
    for provider in ("openai", "anthropic"):
        assert validate_history(result.surviving, provider=provider) == []


# -- order of work ---------------------------------------------------------------------


def test_edit_first_and_prune_only_when_still_over() -> None:
    history = conversation(8)
    plain = reducer(max_tokens=2_000).reduce(history)
    edited = reducer(ClearToolResults(keep=2), max_tokens=2_000).reduce(history)
    assert plain.pruned and edited.pruned == []
    small = reducer(ClearToolResults(keep=2), max_tokens=600).reduce(history)
    assert small.pruned  # still over after clearing: the plan prunes the oldest turns
    assert sum(approximate_token_count(m) for m in small.surviving) <= 600
    # What the plan prunes anyway is pruned as it was, not edited first.
    assert not any(is_edited(getattr(m, "content", "")) for m in small.pruned)


def test_pruned_after_editing_holds_the_placeholder_and_the_original_goes_once() -> None:
    hook = Hook()
    r = reducer(ClearToolResults(keep=1), hook=hook, max_tokens=900)
    state = r.reduce(conversation(3)).surviving
    for t in range(3, 12):
        state = r.reduce(state, conversation(t + 1)[-4:]).surviving
    handles = Counter(m.id for m in hook.edited())
    assert handles and max(handles.values()) == 1
    pruned_ids = Counter(m.id for m in hook.received if not package_note(m))
    assert max(pruned_ids.values()) == 1


# -- the law over generated histories ----------------------------------------------------


def _pad(script: Script, times: int) -> Script:
    """Make every tool result long enough to be worth clearing."""
    events: list[Any] = []
    for event in script.events:
        if isinstance(event, Results):
            answers = tuple((call, (text + " ") * times) for call, text in event.answers)
            event = Results(answers, event.chunks, event.trailing)
        events.append(event)
    return Script(events)


@st.composite
def _cases(draw: st.DrawFn) -> tuple[list[Any], ReducerConfig]:
    script = _pad(draw(scripts(max_exchanges=5)), draw(st.integers(1, 80)))
    shape = draw(st.sampled_from(SHAPES))
    history = render(script, shape)
    edits: list[Any] = [ClearToolResults(
        keep=draw(st.integers(0, 3)),
        clear_tool_inputs=draw(st.booleans()),
        clear_at_least=draw(st.sampled_from([0, 0, 50])),
    )]
    if draw(st.booleans()):
        edits.append(Offload(above=draw(st.integers(60, 400)), head=10, tail=10))
    config = ReducerConfig(
        max_tokens=draw(st.integers(20, 800)),
        token_counter="approximate",
        preserve_first=draw(st.booleans()),
        context_edits=edits,
    )
    return history, config


def assert_traceable(history: list[Any], outcome: Any, *, every_call_named: bool) -> None:
    """Each edit of ``outcome`` keeps the message's type, carries its handle in the
    original's id and note, leaves a placeholder naming the handle (and the tool), and
    edits a part once; ``every_call_named``: a result answering a call names its tool."""
    for edit in outcome.edits:
        assert type(outcome.messages[edit.index]) is type(history[edit.index])
        assert message_id(edit.original) == edit.handle
        note = package_note(edit.original)
        assert note is not None and note["edit"] == edit.kind and note["handle"] == edit.handle
        parts = editable_parts(outcome.messages[edit.index])
        if edit.kind == CLEARED_INPUT:
            assert any(p.kind == TOOL_ARGS_PART and p.call_id == edit.call_id for p in parts)
            continue
        # Identical results share a handle (it is content-addressed): find this edit's own
        # placeholder by the call it answers too.
        texts = [
            part_text(p.value)
            for p in parts
            if edit.handle in part_text(p.value) and p.call_id in (edit.call_id, None)
        ]
        assert texts, "the placeholder names its handle"
        if every_call_named and edit.call_id is not None:
            assert edit.tool is not None
        if edit.tool is not None:
            assert f"result of {edit.tool}" in texts[0]
        assert any(handle_of(p.value) == edit.handle for p in editable_parts(edit.original))
    assert len({(e.index, e.call_id, e.kind) for e in outcome.edits}) == len(outcome.edits)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(case=_cases())
def test_editing_keeps_every_history_valid_idempotent_and_traceable(
    case: tuple[list[Any], ReducerConfig],
) -> None:
    history, config = case
    before = copy.deepcopy(history)
    outcome = run_edit(history, config)
    assert history == before  # never mutated
    # The same roles, ids and tool links: only billed content changed.
    assert [r[:4] for r in read_messages(outcome.messages)] == [
        r[:4] for r in read_messages(history)
    ]
    for provider in ("openai", "anthropic"):
        if validate_history(history, provider=provider) == []:
            assert validate_history(outcome.messages, provider=provider) == []
    assert_traceable(history, outcome, every_call_named=False)
    again = run_edit(outcome.messages, config)
    assert again.edits == ()
    assert again.messages == outcome.messages


@settings(max_examples=60, deadline=None)
@given(case=_cases())
def test_reduce_with_editing_delivers_each_original_once(
    case: tuple[list[Any], ReducerConfig],
) -> None:
    history, config = case
    hook = Hook()
    config = ReducerConfig(
        max_tokens=config.max_tokens,
        token_counter="approximate",
        preserve_first=config.preserve_first,
        context_edits=config.context_edits,
        on_prune=[hook],
    )
    r = MessageReducer(config=config)
    first = r.reduce(history)
    r.reduce(history)  # the same unedited history again (a retried step)
    second = r.reduce(first.surviving)
    assert second.edited == () and second.surviving == first.surviving
    handles = Counter(message_id(m) for m in hook.edited())
    assert set(handles) == {e.handle for e in first.edited}
    assert all(n == 1 for n in handles.values())


def test_every_shape_is_edited() -> None:
    script = Script(
        [
            Say("system", "be brief"),
            Say("human", "go"),
            Calls("", ("k1",)),
            Results((("k1", BIG),), (1,), None),
            Say("ai", "ok"),
            Say("human", "again"),
            Calls("", ("k2",)),
            Results((("k2", BIG),), (1,), None),
        ]
    )
    for shape in SHAPES:
        history = render(script, shape)
        outcome = run_edit(
            history,
            ReducerConfig(
                max_tokens=total(history) - 10,
                token_counter="approximate",
                context_edits=[ClearToolResults(keep=1)],
            ),
        )
        assert [e.call_id for e in outcome.edits] == ["k1"], shape
        (part,) = [
            p for p in editable_parts(outcome.messages[outcome.edits[0].index])
            if p.kind == TOOL_RESULT_PART
        ]
        assert is_edited(part.value), shape
        for provider in ("openai", "anthropic"):
            assert validate_history(outcome.messages, provider=provider) == [], shape


# -- every shape ---------------------------------------------------------------------------

#: Each shape the reader reads, and the providers whose rules its histories pass.
EVERY_SHAPE: dict[str, tuple[str, ...]] = {
    **{shape: ("openai", "anthropic") for shape in SHAPES},
    "pydantic_ai": ("openai", "anthropic"),
    "openai-responses": ("openai-responses",),
    "gemini": ("gemini",),
    "bedrock": ("bedrock",),
}
_PAYLOAD_KEYS = frozenset({"text", "output", "content", "result", "json"})


def _grow(value: Any, times: int) -> Any:
    """``value`` with every text in it repeated ``times`` times."""
    if isinstance(value, str):
        return (value + " ") * times
    if isinstance(value, list):
        return [_grow(v, times) for v in value]
    if isinstance(value, dict):
        return {k: _grow(v, times) if k in _PAYLOAD_KEYS else v for k, v in value.items()}
    return value


def _inflate(history: list[Any], times: int) -> list[Any]:
    """Every tool result of ``history`` made long enough to be worth clearing."""
    out = []
    for message in history:
        parts = [p for p in editable_parts(message) if p.kind == TOOL_RESULT_PART]
        values = {p.path: _grow(p.value, times) for p in parts}
        out.append(with_parts(message, values) if values else message)
    return out


@st.composite
def _shaped(draw: st.DrawFn) -> tuple[str, list[Any]]:
    shape = draw(st.sampled_from(sorted(EVERY_SHAPE)))
    if shape == "openai-responses":
        history = draw(responses_histories(max_exchanges=4))
    elif shape == "gemini":
        history = draw(gemini_histories(max_turns=4))
    elif shape == "bedrock":
        history = draw(bedrock_histories(max_turns=4))
    else:
        history = render(draw(scripts(max_exchanges=5)), shape)
    return shape, _inflate(history, draw(st.integers(1, 120)))


def _every_shape_config(draw: st.DrawFn, history: list[Any], hook: Any = None) -> ReducerConfig:
    edits: list[Any] = [ClearToolResults(
        keep=draw(st.integers(0, 3)),
        clear_tool_inputs=draw(st.booleans()),
        clear_at_least=draw(st.sampled_from([0, 0, 50])),
    )]
    if draw(st.booleans()):
        edits.append(Offload(above=draw(st.integers(60, 400)), head=10, tail=10))
    # From well under the history's size (most is pruned) to over it (nothing fires).
    share = draw(st.sampled_from([0.05, 0.3, 0.6, 0.9, 1.1]))
    return ReducerConfig(
        max_tokens=max(20, int(total(history) * share)),
        token_counter="approximate",
        preserve_first=draw(st.booleans()),
        context_edits=edits,
        on_prune=[hook] if hook is not None else [],
    )


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(case=_shaped(), data=st.data())
def test_every_shape_keeps_its_histories_valid_and_edits_traceably_once(
    case: tuple[str, list[Any]], data: st.DataObject
) -> None:
    shape, history = case
    config = _every_shape_config(data.draw, history)
    providers = [p for p in EVERY_SHAPE[shape] if validate_history(history, provider=p) == []]
    assert providers, "the generators draw valid histories"
    # The reducer's own way of sizing a part (a built-in counter), or a custom counter's.
    text_tokens = data.draw(st.sampled_from([approximate_text_tokens, None]))
    before = copy.deepcopy(history)
    counts = [approximate_token_count(m) for m in history]
    outcome = edit_messages(
        history, read_messages(history), counts, config, approximate_token_count, text_tokens
    )
    assert history == before  # never mutated
    assert [r[:4] for r in read_messages(outcome.messages)] == [
        r[:4] for r in read_messages(history)
    ]
    for provider in providers:
        assert validate_history(outcome.messages, provider=provider) == [], (shape, provider)
    assert_traceable(history, outcome, every_call_named=True)
    again = edit_messages(
        outcome.messages, read_messages(outcome.messages),
        [approximate_token_count(m) for m in outcome.messages], config,
        approximate_token_count, text_tokens,
    )
    assert again.edits == ()
    assert again.messages == outcome.messages


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(case=_shaped(), data=st.data())
def test_every_shape_hands_each_original_to_the_hooks_once(
    case: tuple[str, list[Any]], data: st.DataObject
) -> None:
    _, history = case
    hook = Hook()
    r = MessageReducer(config=_every_shape_config(data.draw, history, hook))
    first = r.reduce(history)
    r.reduce(history)  # the same unedited history again (a retried step)
    second = r.reduce(first.surviving)
    assert second.edited == () and second.surviving == first.surviving
    handles = Counter(message_id(m) for m in hook.edited())
    assert set(handles) == {e.handle for e in first.edited}
    assert all(n == 1 for n in handles.values())


def test_every_shape_clears_an_old_result_and_offloads_a_big_one() -> None:
    """One fixed history per shape: the old result is cleared, the oversized current one
    offloaded (the repro of each shape that once edited nothing)."""
    big = "x " * 3000
    responses: list[Any] = [{"type": "message", "role": "user", "content": "q"}]
    for i in range(6):
        responses += [
            {"type": "function_call", "call_id": f"c{i}", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": big},
        ]
    responses.append({"type": "message", "role": "assistant", "content": "done"})
    config = ReducerConfig(max_tokens=4000, context_edits=(ClearToolResults(keep=1),))
    result = MessageReducer(config=config).reduce(responses)
    assert (len(result.surviving), len(result.edited)) == (14, 5)
    assert all(e.tool == "f" for e in result.edited)
    assert validate_history(result.surviving, provider="openai-responses") == []

    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    pydantic: list[Any] = [ModelRequest(parts=[UserPromptPart("q")])]
    for i in range(6):
        pydantic += [
            ModelResponse(parts=[ToolCallPart("f", {}, tool_call_id=f"c{i}")]),
            ModelRequest(parts=[ToolReturnPart("f", big, tool_call_id=f"c{i}")]),
        ]
    pydantic.append(ModelResponse(parts=[TextPart("done")]))
    result = MessageReducer(config=config).reduce(pydantic)
    assert (len(result.surviving), len(result.edited)) == (14, 5)
    offload = ReducerConfig(max_tokens=40_000, context_edits=(Offload(above=1000),))
    result = MessageReducer(config=offload).reduce(pydantic)
    assert len(result.edited) == 6 and {e.kind for e in result.edited} == {OFFLOADED}
    assert result.surviving[-2].parts[0].content.startswith("[offloaded: result of f, ")


def test_a_langchain_tool_message_keeps_its_artifact() -> None:
    """The content is what the model is sent, so it is what is cleared; the artifact
    (never sent) stays on the copy, and on the original the hooks get."""
    history = conversation(3)
    history[3] = ToolMessage(f"0: {BIG}", tool_call_id="c0", id="t0", artifact={"rows": [1]})
    hook = Hook()
    result = reducer(ClearToolResults(keep=1), hook=hook, max_tokens=total(history) - 10).reduce(
        history
    )
    assert result.surviving[3].artifact == {"rows": [1]} and is_edited(result.surviving[3].content)
    (original,) = [m for m in hook.edited() if package_note(m)["call_id"] == "c0"]
    assert original.artifact == {"rows": [1]} and original.content == f"0: {BIG}"


def test_responses_items_clear_outputs_and_the_inputs_of_function_and_custom_calls() -> None:
    big = "row " * 400
    items: list[Any] = [{"role": "user", "content": "q", "x_note": 1}]
    for i, kind in enumerate(["function_call", "custom_tool_call", "function_call"]):
        key, value = ("arguments", '{"q": 1}') if kind == "function_call" else ("input", "SELECT 1")
        items += [
            {"type": kind, "id": f"fc{i}", "call_id": f"c{i}", "name": f"t{i}", key: value},
            {"type": f"{kind}_output", "call_id": f"c{i}", "output": f"{i} {big}", "x_note": 1},
        ]
    config = ReducerConfig(
        max_tokens=total(items) - 10,
        token_counter="approximate",
        context_edits=[ClearToolResults(keep=1, clear_tool_inputs=True)],
    )
    outcome = run_edit(items, config)
    assert [(e.index, e.kind, e.tool) for e in outcome.edits] == [
        (1, CLEARED_INPUT, "t0"), (2, CLEARED, "t0"), (3, CLEARED_INPUT, "t1"), (4, CLEARED, "t1")
    ]
    edited = outcome.messages
    assert edited[1]["arguments"] == "{}" and edited[3]["input"] == "{}"
    assert edited[2]["output"].startswith("[cleared: result of t0, ") and edited[2]["x_note"] == 1
    assert list(edited[2]) == list(items[2])  # every key kept, in order
    assert edited[5:] == items[5:]
    assert validate_history(edited, provider="openai-responses") == []
    again = run_edit(edited, config)
    assert again.edits == () and again.messages == edited
