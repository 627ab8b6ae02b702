"""PydanticAI: the reader of its messages (``_shape_pydantic_ai``) and the integration.

The shape is read by duck typing; these tests build real ``pydantic_ai`` messages.
Scenario tests with a real agent are in ``tests/integration/test_pydantic_ai_agents.py``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import warnings
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from strategies import render, scripts

from agentstate_reducer import MessageReducer, ReducerConfig, agent_config, validate_history
from agentstate_reducer.hooks import DeliveryLedger
from agentstate_reducer.pydantic_ai import (
    ReducingCapability,
    ahistory_processor,
    history_processor,
    run_namespace,
)
from agentstate_reducer.read import (
    INJECTED_KEY,
    SUMMARY_KIND,
    TURN_NOTE_KIND,
    content_kinds,
    copy_state,
    editable_parts,
    injected_kind,
    is_summary,
    message_parts,
    message_state,
    read_message,
    synthetic_results,
)
from agentstate_reducer.reducer import repair_dangling_calls

CTX: Any = SimpleNamespace(conversation_id="conv-1")


def _legacy_retry(content: str, **fields: Any) -> ModelRequest:
    """A request holding a deprecated ``RetryPromptPart``, as stored histories still may."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ModelRequest(parts=[RetryPromptPart(content, **fields)])


def turn(n: int, *, calls: int = 1) -> list[ModelMessage]:
    """A question, a response calling ``calls`` tools at once with thinking, the returns,
    and the answer."""
    ids = [f"c{n}-{k}" for k in range(calls)]
    return [
        ModelRequest(parts=[UserPromptPart(f"question {n}")]),
        ModelResponse(
            parts=[ThinkingPart("let me look"), *(ToolCallPart("lookup", {"q": n}, c) for c in ids)]
        ),
        ModelRequest(parts=[ToolReturnPart("lookup", f"result {c}", c) for c in ids]),
        ModelResponse(parts=[TextPart(f"answer {n}")]),
    ]


def conversation(turns: int, *, calls: int = 1) -> list[ModelMessage]:
    first = ModelRequest(parts=[SystemPromptPart("be brief")])
    return [first] + [m for n in range(turns) for m in turn(n, calls=calls)]


# -- the reader --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "role", "calls", "answers"),
    [
        (ModelRequest(parts=[SystemPromptPart("s")]), "system", (), ()),
        (ModelRequest(parts=[SystemPromptPart("s"), UserPromptPart("q")]), "human", (), ()),
        (ModelRequest(parts=[ToolReturnPart("t", "r", "a"), ToolReturnPart("t", 1, "b")]),
         "tool", (), ("a", "b")),
        # Returns and a question in one request: a user message carrying results.
        (ModelRequest(parts=[ToolReturnPart("t", "r", "a"), UserPromptPart("and?")]),
         "human", (), ("a",)),
        (ModelRequest(parts=[ToolReturnPart("t", "bad args", "a", outcome="retried")]),
         "tool", (), ("a",)),
        # Feedback on the whole response answers no call.
        (ModelRequest(parts=[RetryFeedbackPart("no", retry=RetryInfo("validation_error"))]),
         "human", (), ()),
        (_legacy_retry("bad args", tool_name="t", tool_call_id="a"), "tool", (), ("a",)),
        (_legacy_retry("try again", tool_call_id="a"), "human", (), ()),
        (ModelResponse(parts=[ThinkingPart("hm"), TextPart("x"), ToolCallPart("t", {}, "a"),
                              ToolCallPart("t", {}, "b")]), "ai", ("a", "b"), ()),
        # Native tools are called and answered inside the response: no call is left open.
        (ModelResponse(parts=[NativeToolCallPart("web", {}, "n"),
                              NativeToolReturnPart("web", "found", "n"), TextPart("x")]),
         "ai", (), ()),
    ],
)
def test_views(
    message: ModelMessage, role: str, calls: tuple[str, ...], answers: tuple[str, ...]
) -> None:
    view = read_message(message)
    assert (view.role, view.id, view.calls, view.answers) == (role, None, calls, answers)


def test_thinking_parts_are_reasoning_parts() -> None:
    from agentstate_reducer.read import ReasoningPart, reasoning_parts

    response = ModelResponse(parts=[ThinkingPart("hm"), TextPart("x"), ToolCallPart("t", {}, "a")])
    assert reasoning_parts(response) == (ReasoningPart("thinking", 0, True),)
    assert reasoning_parts(ModelRequest(parts=[UserPromptPart("q")])) == ()


def test_parts_bill_text_calls_results_and_media() -> None:
    request = ModelRequest(
        parts=[
            ToolReturnPart("lookup", {"rows": [1, 2]}, "a"),
            UserPromptPart(
                ["look", TextContent("here"), ImageUrl("https://example.invalid/x.png"),
                 BinaryContent(b"\x89PNG", media_type="image/png")]
            ),
        ]
    )
    parts = message_parts(request)
    assert parts.role == "human"
    assert set(parts.texts) == {"look", "here", '{"rows":[1,2]}'}
    assert parts.media == 2 and parts.tool_result_ids == ("a",)
    response = ModelResponse(
        parts=[ThinkingPart("why"), TextPart("so"), ToolCallPart("lookup", '{"q":1}', "a")]
    )
    parts = message_parts(response)
    assert parts.texts == ("why", "so") and parts.tool_calls == (("lookup", '{"q":1}'),)


def test_content_kinds_put_results_before_text_as_sent() -> None:
    request = ModelRequest(parts=[ToolReturnPart("t", "r", "a"), UserPromptPart("  ")])
    assert content_kinds(request) == ("tool_result", "blank")
    response = ModelResponse(parts=[ThinkingPart("hm"), ToolCallPart("t", {}, "a")])
    assert content_kinds(response) == ("reasoning", "tool_use")


def test_distinct_messages_have_distinct_states_and_ledger_keys() -> None:
    # Without an id, the ledger keys a message by its state: two requests must differ.
    a, b = ModelRequest(parts=[UserPromptPart("one")]), ModelRequest(parts=[UserPromptPart("two")])
    assert message_state(a) != message_state(b)
    assert copy_state(message_state(a)) == message_state(a)
    ledger = DeliveryLedger(window=100)
    assert ledger.claim([a, b], "ns") == [a, b]
    assert ledger.claim([a, b], "ns") == []


def test_synthetic_results_are_a_request_of_interrupted_returns() -> None:
    issuer = ModelResponse(parts=[ToolCallPart("lookup", {}, "a"), ToolCallPart("other", {}, "b")])
    (request,) = synthetic_results(issuer, ("a", "b"))
    assert isinstance(request, ModelRequest)
    assert [(p.tool_name, p.tool_call_id, p.outcome) for p in request.parts] == [
        ("lookup", "a", "interrupted"),
        ("other", "b", "interrupted"),
    ]
    # A call abandoned for a new question gets them, and the history becomes valid.
    history = [*conversation(1)[:2], ModelRequest(parts=[UserPromptPart("never mind")])]
    history[1] = issuer
    repaired, added = repair_dangling_calls(history)
    assert len(added) == 1 and validate_history(repaired) == []


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(script=scripts(), least=st.integers(0, 6), extra=st.integers(0, 6))
def test_reduced_histories_keep_every_pair_and_the_system_prompt(
    script: Any, least: int, extra: int
) -> None:
    history = render(script, "pydantic_ai")
    for provider in ("openai", "anthropic"):
        assert validate_history(history, provider=provider) == []
    config = agent_config(min_messages=least, max_messages=least + extra)
    reduced = history_processor(MessageReducer(config=config))(CTX, list(history))
    for provider in ("openai", "anthropic"):
        assert validate_history(reduced, provider=provider) == [], reduced
    parts = [p for m in history for p in m.parts]
    assert [p for m in reduced for p in m.parts if p in parts] == [
        p for p in parts if any(p is q for m in reduced for q in m.parts)
    ]
    system = [p for p in history[0].parts if isinstance(p, SystemPromptPart)][:1]
    if system and isinstance(history[0].parts[0], SystemPromptPart):
        assert reduced[0].parts[0] is system[0]
    # Idempotence: reducing what survived prunes nothing more.
    again = history_processor(MessageReducer(config=config))(CTX, list(reduced))
    assert [p for m in again for p in m.parts] == [p for m in reduced for p in m.parts]


# -- the integration ---------------------------------------------------------------------


def test_processor_hands_each_pruned_message_to_the_hooks_once() -> None:
    got: list[tuple[Any, Any]] = []
    config = ReducerConfig(
        min_messages=4, max_messages=8, on_prune=[lambda p, ns: got.append((ns, p))]
    )
    process = history_processor(MessageReducer(config=config))
    history = conversation(2)
    first = process(CTX, history)
    second = process(CTX, first + turn(2))
    assert [ns for ns, _ in got] == [("memories", "conv-1")] * len(got)
    handed = [m for _, batch in got for m in batch]
    assert len({id(m) for m in handed}) == len(handed) > 0
    assert not {id(m) for m in handed} & {id(m) for m in second}
    assert len(second) <= 8 and isinstance(second[0].parts[0], SystemPromptPart)


def test_the_first_request_is_split_so_questions_never_pile_up() -> None:
    first = ModelRequest(parts=[SystemPromptPart("be brief"), UserPromptPart("question 0")])
    history = [first, *turn(0)[1:], *turn(1)]
    got: list[Any] = []
    config = agent_config(min_messages=2, max_messages=4, on_prune=[lambda p, ns: got.extend(p)])
    reduced = history_processor(MessageReducer(config=config))(CTX, history)
    assert reduced[0].parts == [first.parts[0]]
    assert any(m.parts == [first.parts[1]] for m in got)  # the old question was handed over


def test_a_turn_note_merged_into_the_question_goes_over_without_the_note() -> None:
    # PydanticAI merges the note's request into the question's and keeps neither's
    # metadata: when a later turn prunes that request, the hooks get the question alone.
    got: list[Any] = []
    config = agent_config(max_tokens=3000, target_tokens=2000, token_counter="approximate",
                          on_prune=[lambda p, ns: got.extend(p)])
    process = history_processor(MessageReducer(config=config))
    question = ModelRequest(parts=[UserPromptPart("turn 0: do the steps")])
    history: list[ModelMessage] = [ModelRequest(parts=[SystemPromptPart("be brief")]), question]
    for k in range(120):
        history.append(ModelResponse(parts=[ToolCallPart("step", {"query": f"0.{k}"}, f"c{k}")]))
        history.append(ModelRequest(parts=[
            ToolReturnPart("step", f"r{k} " + "lorem ipsum " * 250, f"c{k}")
        ]))
    reduced = process(CTX, history)
    at = next(i for i, m in enumerate(reduced) if injected_kind(m) == TURN_NOTE_KIND)
    note = reduced[at]
    assert reduced[at - 1] is question and note.parts[0].content.startswith("[turn note: ")
    merged = ModelRequest(parts=[*question.parts, *note.parts])  # no metadata: as PydanticAI
    later: list[ModelMessage] = [*reduced[: at - 1], merged, *reduced[at + 1 :]]
    later.append(ModelResponse(parts=[TextPart("answer 0: done")]))
    for t in range(1, 12):
        later.append(ModelRequest(parts=[UserPromptPart(f"turn {t}: " + "word " * 200)]))
        later.append(ModelResponse(parts=[TextPart(f"answer {t} " + "word " * 200)]))
    result = process(CTX, later)
    assert merged not in result
    parts = [p for m in got if isinstance(m, ModelRequest) for p in m.parts]
    assert not [p for p in parts if str(getattr(p, "content", "")).startswith("[turn note: ")]
    assert [p for p in parts if getattr(p, "content", None) == "turn 0: do the steps"] == [
        question.parts[0]
    ]


def test_with_nothing_to_prune_the_history_goes_on_unsplit() -> None:
    # A processor or capability after this one must see what PydanticAI built (the peer's
    # ReinjectSystemPrompt tests count messages from the first request on).
    first = ModelRequest(parts=[SystemPromptPart("be brief"), UserPromptPart("question 0")])
    history = [first, *turn(0)[1:]]
    reducer = MessageReducer(config=agent_config(min_messages=20, max_messages=40))
    for reduced in (
        history_processor(reducer)(CTX, history),
        asyncio.run(ahistory_processor(reducer)(CTX, history)),
    ):
        assert reduced == history and all(a is b for a, b in zip(reduced, history, strict=True))


def test_async_processor_and_summary_in_pydantic_ai_shape() -> None:
    async def summarize(pruned: list[Any]) -> str:
        return f"{len(pruned)} messages"

    config = ReducerConfig(
        min_messages=3, max_messages=6, summarize_fn=summarize, inject_summary=True
    )
    process = ahistory_processor(MessageReducer(config=config), namespace=lambda ctx: "fixed")
    reduced = asyncio.run(process(CTX, conversation(3)))
    assert all(isinstance(m, (ModelRequest, ModelResponse)) for m in reduced)
    summaries = [m for m in reduced if is_summary(m)]
    assert len(summaries) == 1 and isinstance(summaries[0], ModelRequest)
    assert "messages" in summaries[0].parts[0].content
    # A second pass folds into the same summary, read back from its metadata.
    again = asyncio.run(process(CTX, reduced + turn(9)))
    assert len([m for m in again if is_summary(m)]) == 1


def test_reduce_writes_the_summary_block_as_pydantic_ai_messages() -> None:
    # The reader writes the block in the history's shape (match_shape), so reduce() itself
    # returns PydanticAI messages; the processor only converts a factory's dicts.
    config = ReducerConfig(
        min_messages=3, max_messages=6, summarize_fn=lambda p: "facts", inject_summary=True
    )
    surviving = MessageReducer(config=config).reduce(conversation(3)).surviving
    block = [m for m in surviving if is_summary(m)]
    assert len(block) == 1 and isinstance(block[0], ModelRequest)
    ack = surviving[surviving.index(block[0]) + 1]
    assert isinstance(ack, ModelResponse) and ack.parts == [TextPart("OK")]

    def factory(text: str, count: int) -> list[Any]:
        return [{"role": "user", "content": f"{count}: {text}"}, {"role": "assistant",
                                                                   "content": "noted"}]

    config = ReducerConfig(
        min_messages=3, max_messages=6, summarize_fn=lambda p: "facts", inject_summary=True,
        summary_message_factory=factory,
    )
    reduced = history_processor(MessageReducer(config=config))(CTX, conversation(3))
    assert all(isinstance(m, (ModelRequest, ModelResponse)) for m in reduced)
    assert any(m.parts == [TextPart("noted")] for m in reduced)


def _summarised(
    factory: Any = None,
) -> tuple[Any, list[Any], list[list[Any]]]:
    """A processor summarising into ``digest n``, the hooks' messages, the batches."""
    got: list[Any] = []
    batches: list[list[Any]] = []

    def summarize(pruned: list[Any]) -> str:
        batches.append(pruned)
        return f"digest {len(batches)}"

    config = ReducerConfig(
        min_messages=3, max_messages=6, summarize_fn=summarize, inject_summary=True,
        summary_message_factory=factory, on_prune=[lambda p, ns: got.extend(p)],
    )
    return history_processor(MessageReducer(config=config)), got, batches


def _texts(messages: list[Any]) -> list[str]:
    contents = [getattr(p, "content", None) for m in messages for p in m.parts]
    return [c for c in contents if isinstance(c, str)]


@pytest.mark.parametrize("round_trip", [False, True], ids=["same objects", "json round trip"])
def test_a_summary_merged_into_the_system_prompt_stays_the_packages_own(round_trip: bool) -> None:
    # PydanticAI merges the summary's request into the system prompt's and keeps no
    # metadata; the reducer that wrote it knows its part (also as a copy) and marks it again.
    process, got, batches = _summarised()
    reduced = process(CTX, conversation(3))
    system, summary = reduced[:2]
    assert is_summary(summary)
    merged: list[ModelMessage] = [ModelRequest(parts=[*system.parts, *summary.parts]),
                                  *reduced[2:]]
    if round_trip:
        merged = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(merged))
    again = process(CTX, merged + turn(9) + turn(10))
    assert not [t for t in _texts(got) if "digest" in t]
    assert [_texts([m]) for m in batches[1] if is_summary(m)] == [[summary.parts[0].content]]
    assert not [t for m in batches[1] if not is_summary(m) for t in _texts([m]) if "digest" in t]
    assert [m.parts[0].content.endswith("digest 2") for m in again if is_summary(m)] == [True]


def test_a_users_copy_of_a_summary_stays_conversation() -> None:
    process, got, _ = _summarised()
    reduced = process(CTX, conversation(3))
    system, summary = reduced[:2]
    part = summary.parts[0]
    typed = UserPromptPart(part.content, timestamp=part.timestamp + timedelta(seconds=1))
    process(CTX, [ModelRequest(parts=[*system.parts, typed]), *reduced[2:], *turn(9), *turn(10)])
    assert [p for m in got for p in m.parts if p is typed] == [typed]


def test_a_summary_block_of_one_request_merged_on_both_sides_is_split_out() -> None:
    # Without an acknowledgement the summary's request joins the question after it too.
    def factory(text: str, count: int) -> list[Any]:
        mark = {"kind": SUMMARY_KIND, "covers": count}
        return [{"role": "user", "content": f"so far: {text}", INJECTED_KEY: mark}]

    process, got, batches = _summarised(factory)
    history = conversation(3)
    history[1] = ModelRequest(parts=[*history[0].parts, *history[1].parts])
    reduced = process(CTX, history[1:])
    system, summary, question = reduced[:3]
    assert is_summary(summary) and not is_summary(question)
    merged = ModelRequest(parts=[*system.parts, *summary.parts, *question.parts])
    process(CTX, [merged, *reduced[3:], *turn(9), *turn(10)])
    assert not [t for t in _texts(got) if "so far" in t]
    assert [t for t in _texts(got) if t == question.parts[0].content] == [
        question.parts[0].content
    ]
    assert [is_summary(m) for m in batches[1] if "so far" in " ".join(_texts([m]))] == [True]


async def test_capability_counts_tools_and_instructions_in_token_mode() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from agentstate_reducer.tokens import request_overhead, resolve_token_counter

    reducer = MessageReducer(
        config=ReducerConfig(max_tokens=4000, target_tokens=3000, token_counter="approximate")
    )
    infos: list[AgentInfo] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        infos.append(info)
        return ModelResponse(parts=[TextPart("ok")])

    agent = Agent(
        FunctionModel(model), instructions="Answer in French. " * 50,
        capabilities=[ReducingCapability(reducer)],
    )

    @agent.tool_plain
    def lookup(query: str) -> str:
        """Look a query up in a long, long catalogue."""
        return query

    await agent.run("hello")
    (info,) = infos
    tools = [
        {"type": "function", "function": {"name": t.name, "description": t.description or "",
                                          "parameters": t.parameters_json_schema}}
        for t in info.function_tools
    ]
    counter = resolve_token_counter("approximate")
    assert [t.name for t in info.function_tools] == ["lookup"]
    expected = request_overhead(counter, tools=tools, system_prompt=info.instructions)
    assert reducer._overhead == expected
    assert expected > request_overhead(counter, system_prompt=info.instructions) > 100


def test_bad_arguments_and_default_namespace() -> None:
    with pytest.raises(TypeError, match="MessageReducer"):
        history_processor("not a reducer")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="MessageReducer"):
        ReducingCapability(3)  # type: ignore[arg-type]
    assert run_namespace(CTX) == ("memories", "conv-1")
    assert run_namespace(SimpleNamespace(conversation_id=None)) is None  # type: ignore[arg-type]


def test_missing_pydantic_ai_names_the_extra() -> None:
    script = textwrap.dedent(
        """
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "pydantic_ai":
                    raise ImportError("blocked " + name)
                return None

        sys.meta_path.insert(0, Block())
        try:
            import agentstate_reducer.pydantic_ai
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert 'pip install "agentstate-reducer[pydantic-ai]"' in out.stdout


def test_editable_parts_of_each_pydantic_ai_part() -> None:
    response = ModelResponse(
        parts=[ThinkingPart("hm"), TextPart("say"), ToolCallPart("lookup", {"q": 1}, "a")]
    )
    request = ModelRequest(
        parts=[
            SystemPromptPart("s"),
            ToolReturnPart("lookup", {"rows": [1]}, "a"),
            UserPromptPart(["look", ImageUrl("https://example.invalid/x.png")]),
        ]
    )
    assert [p[:4] for p in editable_parts(response)] == [
        (("parts", 1, "content"), "text", None, None),
        (("parts", 2, "args"), "tool_args", "a", "lookup"),
    ]
    assert [p[:4] for p in editable_parts(request)] == [
        (("parts", 1, "content"), "tool_result", "a", "lookup"),
        (("parts", 2, "content", 0), "text", None, None),
    ]


def test_context_editing_writes_back_a_new_message_of_the_same_class_losslessly() -> None:
    from dataclasses import fields

    from agentstate_reducer import ClearToolResults
    from agentstate_reducer.read import message_id, package_note

    big = "row " * 400
    history = conversation(3)
    for n in range(3):
        (part,) = history[3 + 4 * n].parts
        history[3 + 4 * n] = ModelRequest(
            parts=[ToolReturnPart("lookup", f"{n} {big}", part.tool_call_id)],
            run_id="run-1", metadata={"mine": n},
        )
    received: list[Any] = []
    config = ReducerConfig(
        min_messages=20, max_messages=40,
        context_edits=[ClearToolResults(keep=1, trigger_messages=1, clear_tool_inputs=True)],
        on_prune=[lambda messages, namespace: received.extend(messages)],
    )
    before = [copy_state(message_state(m)) for m in history]
    result = MessageReducer(config=config).reduce(history)
    assert [message_state(m) for m in history] == before  # nothing mutated
    assert [(e.kind, e.call_id, e.tool) for e in result.edited] == [
        ("cleared input", "c0-0", "lookup"), ("cleared", "c0-0", "lookup"),
        ("cleared input", "c1-0", "lookup"), ("cleared", "c1-0", "lookup"),
    ]
    for edit in result.edited:
        old, new = history[edit.index], result.surviving[edit.index]
        assert type(new) is type(old) and new is not old
        (old_part,), (new_part,) = old.parts[-1:], new.parts[-1:]
        changed = "args" if edit.kind == "cleared input" else "content"
        for f in fields(old):  # every other field as it was
            if f.name != "parts":
                assert getattr(new, f.name) == getattr(old, f.name), f.name
        for f in fields(old_part):
            if f.name != changed:
                assert getattr(new_part, f.name) == getattr(old_part, f.name), f.name
        if changed == "content":
            assert new_part.content.startswith("[cleared: result of lookup, ")
            assert edit.handle in new_part.content
        else:
            assert new_part.args == {}
    assert validate_history(result.surviving, provider="anthropic") == []
    originals = [m for m in received if package_note(m)]
    assert sorted(message_id(m) or "" for m in originals) == sorted(
        e.handle for e in result.edited
    )
    for m in originals:  # the copy a hook gets: the original part, the note in metadata
        note = package_note(m)
        assert note is not None and m.metadata["agentstate_reducer"] == note
        if note["edit"] == "cleared":
            assert m.parts[0].content.endswith(big) and m.run_id == "run-1"
    again = MessageReducer(config=config).reduce(result.surviving)
    assert again.edited == () and again.surviving == result.surviving


def test_over_budget_is_warned_once_per_conversation(caplog: pytest.LogCaptureFixture) -> None:
    # The latest turn has tool calls, so it is never cut apart: 4 messages over a budget of 2.
    reducer = MessageReducer(config=agent_config(min_messages=1, max_messages=2))
    caplog.set_level("WARNING", logger="agentstate_reducer")
    process = history_processor(reducer)
    process(CTX, turn(0))
    process(CTX, turn(0))
    other: Any = SimpleNamespace(conversation_id="conv-2")
    asyncio.run(ahistory_processor(reducer)(other, turn(0)))
    warned = [r.getMessage() for r in caplog.records if "went over its budget" in r.getMessage()]
    assert len(warned) == 2, warned
    assert "conv-1" in warned[0] and "conv-2" in warned[1]
