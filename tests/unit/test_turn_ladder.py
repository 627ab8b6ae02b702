"""The turn ladder: a current turn over max_tokens shrinks inside itself (results, then
inputs, then the oldest steps for one note), never losing its question or latest step."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agentstate_reducer import MessageReducer, ReducerConfig, agent_config, validate_history
from agentstate_reducer.edit import is_edited
from agentstate_reducer.read import (
    INJECTED_KEY,
    TURN_NOTE_KIND,
    injected_kind,
    message_id,
    package_note,
)


def turn(steps: int, words: int, *, args: int = 1, earlier: int = 0) -> list[Any]:
    """A system prompt, ``earlier`` answered questions, then a question and ``steps``
    sequential calls of ``step`` whose results are ``words`` words long."""
    out: list[Any] = [SystemMessage(content="work through the steps", id="system")]
    for q in range(earlier):
        out.append(HumanMessage(content=f"old {q}", id=f"old-{q}"))
        out.append(AIMessage(content="ok", id=f"a-{q}"))
    out.append(HumanMessage(content="turn 0: please work through the steps", id="question"))
    for k in range(steps):
        call = {"name": "step", "args": {"query": f"0.{k}", "pad": "x" * args}, "id": f"c{k}"}
        out.append(AIMessage(content="", tool_calls=[call], id=f"ai-{k}"))
        out.append(ToolMessage(content=f"r{k} " + "lorem ipsum " * words, tool_call_id=f"c{k}",
                               id=f"t{k}"))
    return out


class Hook:
    def __init__(self) -> None:
        self.ids: Counter[str] = Counter()

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        for m in pruned:
            self.ids[message_id(m) or ""] += 1


def ladder(most: int, target: int, hook: Hook | None = None, **kw: Any) -> MessageReducer:
    config = agent_config(
        max_tokens=most, target_tokens=target, token_counter="approximate",
        on_prune=[hook] if hook else [], **kw
    )
    return MessageReducer(config=config)


def check(survivors: list[Any], history: list[Any], whole: bool = True) -> None:
    ids = [m.id for m in survivors]
    assert "question" in ids
    assert ids[-2:] == [history[-2].id, history[-1].id]
    if whole:  # the latest step as it was
        assert survivors[-1] is history[-1] and survivors[-2] is history[-2]
    for provider in ("openai", "anthropic"):  # (Gemini and Bedrock: the scenario tests)
        assert validate_history(survivors, provider=provider) == [], provider


def test_clearing_older_results_keeps_every_step_when_that_fits() -> None:
    history = turn(20, 250)
    hook = Hook()
    result = ladder(3000, 2000, hook).reduce(history)
    check(result.surviving, history)
    assert result.turn_steps_dropped == 0
    assert result.turn_results_cleared == 19
    results = [m for m in result.surviving if isinstance(m, ToolMessage)]
    assert len(results) == 20 and all(is_edited(m.content) for m in results[:-1])
    # The placeholder names the tool, its arguments and the handle.
    assert results[0].content.startswith("[cleared: result of step, ")
    assert '"query": "0.0"' in results[0].content and "handle ctx_" in results[0].content
    assert result.tokens_after is not None and result.tokens_after <= 2000
    assert not result.over_budget
    # Each original reached the hooks once, under its handle.
    assert sum(hook.ids.values()) == 19 and max(hook.ids.values()) == 1
    again = ladder(3000, 2000).reduce(result.surviving)
    assert again.surviving == result.surviving and not again.edited and not again.pruned


def test_plain_config_keeps_todays_behaviour() -> None:
    history = turn(20, 250)
    config = ReducerConfig(max_tokens=3000, target_tokens=2000, token_counter="approximate")
    result = MessageReducer(config=config).reduce(history)
    assert not result.edited and result.turn_results_cleared == 0
    assert not any(injected_kind(m) for m in result.surviving)
    assert MessageReducer(config=config).plan(history).dropped_steps > 0


def test_the_oldest_steps_go_for_one_note_when_clearing_is_not_enough() -> None:
    history = turn(120, 250, earlier=3)
    hook = Hook()
    reducer = ladder(3000, 2000, hook)
    result = reducer.reduce(history)
    check(result.surviving, history)
    notes = [m for m in result.surviving if injected_kind(m) == TURN_NOTE_KIND]
    assert len(notes) == 1
    note = notes[0]
    assert result.surviving[result.surviving.index(note) - 1].id == "question"
    assert result.turn_steps_dropped > 0
    assert note.content.startswith(f"[turn note: {result.turn_steps_dropped} earlier steps")
    assert "step " in note.content and "-> ctx_" in note.content
    assert result.tokens_after is not None and result.tokens_after <= 3000
    # The question, the note and the steps kept: every survivor of the turn is a step or note.
    assert not result.over_budget
    # Originals once: cleared results by handle, dropped messages by id.
    assert max(hook.ids.values()) == 1
    again = reducer.reduce(result.surviving)
    assert [m.id for m in again.surviving] == [m.id for m in result.surviving]
    assert not again.pruned


def test_a_second_drop_carries_the_note_on() -> None:
    history = turn(60, 250)
    reducer = ladder(3000, 2000)
    first = reducer.reduce(history)
    more = first.surviving + turn(90, 250)[2 + 2 * 60 :]
    second = reducer.reduce(more)
    notes = [m for m in second.surviving if injected_kind(m) == TURN_NOTE_KIND]
    assert len(notes) == 1
    steps = first.turn_steps_dropped + second.turn_steps_dropped
    assert notes[0].content.startswith(f"[turn note: {steps} earlier steps")
    check(second.surviving, more)


def test_big_inputs_are_cleared_after_the_results() -> None:
    history = turn(30, 60, args=2000)
    result = ladder(6000, 4000).reduce(history)
    check(result.surviving, history)
    assert result.turn_inputs_cleared > 0
    ais = [m for m in result.surviving if isinstance(m, AIMessage) and m.tool_calls]
    assert ais[-1].tool_calls[0]["args"]["pad"]  # the latest step's input stays


def test_a_preview_is_cleared_without_handing_its_original_over_twice() -> None:
    from agentstate_reducer import Offload

    history = turn(30, 700)
    hook = Hook()
    reducer = ladder(3000, 2000, hook, context_edits=[Offload(above=800, head=100, tail=50)])
    result = reducer.reduce(history)
    check(result.surviving, history, whole=False)  # offloaded on first sight
    results = [m for m in result.surviving if isinstance(m, ToolMessage)]
    assert all(m.content.startswith("[cleared: ") for m in results[:-1])
    assert results[-1].content.startswith("[offloaded: ")
    assert max(hook.ids.values()) == 1


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 40), st.integers(5, 400), st.integers(1500, 6000), st.integers(0, 4))
def test_laws(steps: int, words: int, most: int, earlier: int) -> None:
    history = turn(steps, words, earlier=earlier)
    hook = Hook()
    reducer = ladder(most, most * 2 // 3, hook)
    result = reducer.reduce(history)
    check(result.surviving, history)
    assert not hook.ids or max(hook.ids.values()) == 1
    latest = sum(reducer.count_tokens(history[-2:]))
    assert sum(reducer.count_tokens(result.surviving)) <= most + latest
    assert result.over_budget == (result.tokens_after is not None and result.tokens_after > most)
    again = reducer.reduce(result.surviving)
    assert [m.id for m in again.surviving] == [m.id for m in result.surviving]
    assert not again.pruned and not again.edited
    for m in result.surviving:
        assert (package_note(m) or {}).get("edit") is None


def test_the_figures_count_the_note_as_written() -> None:
    history = turn(120, 250, earlier=3)
    reducer = ladder(3000, 2000)
    result = reducer.reduce(history)
    assert result.turn_steps_dropped
    # The plan sized the note from its entries; the figures are those of the note written.
    assert result.tokens_after == sum(reducer.count_tokens(result.surviving))
    again = reducer.reduce(result.surviving, turn(122, 250)[-4:])
    assert again.tokens_after == sum(reducer.count_tokens(again.surviving))


def test_one_warning_per_thread_names_the_turn_and_what_the_ladder_did(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from agentstate_reducer.reducer import warn_once_over_budget

    # The latest step alone (about 400 tokens) is over max_tokens: nothing can bring the
    # turn under, and the ladder did all it could.
    reducer = ladder(300, 200)
    history = turn(40, 130, earlier=2)
    with caplog.at_level("WARNING", logger="agentstate_reducer"):
        for k in range(3):  # three updates of thread "a", one of thread "b"
            result = reducer.reduce(history[: len(history) - 4 + 2 * k])
            assert result.over_budget
            warn_once_over_budget(reducer, result, "a")
        warn_once_over_budget(reducer, result, "b")
    warned = [r.getMessage() for r in caplog.records if "went over its budget" in r.getMessage()]
    assert len(warned) == 2 and "'a'" in warned[0] and "'b'" in warned[1]
    assert "the current turn is kept while it has tool calls" in warned[0]
    assert "and the turn alone is over" in warned[0]
    # All but the latest of the 40 steps went; their cleared results went with them.
    assert result.turn_steps_dropped == 39 and result.turn_results_cleared == 0
    done = "the turn ladder dropped 39 oldest steps (one note stands for them)"
    assert done in warned[1], warned[1]




def _converse_turn(steps: int, words: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": [{"text": "turn 0: go"}]}]
    for k in range(steps):
        use = {"toolUseId": f"t{k}", "name": "step", "input": {"query": f"0.{k}"}}
        out.append({"role": "assistant", "content": [{"toolUse": use}]})
        result = {"toolUseId": f"t{k}", "content": [{"text": "lorem ipsum " * words}]}
        out.append({"role": "user", "content": [{"toolResult": result}]})
    return out


def _notes(messages: list[Any]) -> list[str]:
    found = []
    for m in messages:
        for block in m.get("content") or m.get("parts") or []:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str) and text.startswith("[turn note: "):
                found.append(text)
    return found


def test_in_a_converse_history_the_note_joins_the_question_and_a_later_one_replaces_it() -> None:
    # Bedrock takes no two user messages in a row: the note goes into the question's
    # message (its blocks kept in front), and the next drop rebuilds that message.
    reducer = MessageReducer(config=agent_config(
        provider="bedrock", max_tokens=600, target_tokens=400, token_counter="approximate"
    ))
    history = _converse_turn(12, 60)
    first = reducer.reduce(history)
    assert first.turn_steps_dropped
    assert validate_history(first.surviving, provider="bedrock") == []
    opener = first.surviving[0]
    assert opener["content"][0] == {"text": "turn 0: go"} and len(_notes([opener])) == 1
    more = _converse_turn(16, 60)[len(history):]
    second = reducer.reduce([*first.surviving, *more])
    assert validate_history(second.surviving, provider="bedrock") == []
    notes = _notes(second.surviving)
    assert len(notes) == 1 and second.surviving[0]["content"][0] == {"text": "turn 0: go"}
    steps = first.turn_steps_dropped + second.turn_steps_dropped
    assert notes[0].startswith(f"[turn note: {steps} earlier steps")



def _later_turns(first: int, turns: int, words: int) -> list[dict[str, Any]]:
    """Answered questions after a turn, in Converse's shape."""
    out: list[dict[str, Any]] = []
    for t in range(first, first + turns):
        out.append({"role": "user", "content": [{"text": f"turn {t}: " + "word " * words}]})
        out.append({"role": "assistant", "content": [{"text": f"answer {t} " + "word " * words}]})
    return out


def _holding_notes(handed: list[Any]) -> list[str]:
    return [repr(m)[:120] for m in handed if "[turn note: " in repr(m)]


def test_a_question_a_note_joined_goes_over_as_it_was_asked() -> None:
    # In a Converse history the note joins the question's message; when a later turn
    # prunes that turn, the hooks get the question without the note, once.
    handed: list[Any] = []
    reducer = MessageReducer(config=agent_config(
        provider="bedrock", max_tokens=600, target_tokens=400, token_counter="approximate",
        on_prune=[lambda pruned, namespace: handed.extend(pruned)],
    ))
    first = reducer.reduce(_converse_turn(12, 60))
    assert first.turn_steps_dropped and len(_notes([first.surviving[0]])) == 1
    answer = {"role": "assistant", "content": [{"text": "answer 0: done"}]}
    later = reducer.reduce([*first.surviving, answer, *_later_turns(1, 3, 60)])
    assert not any("turn 0: go" in repr(m) for m in later.surviving)
    assert not _holding_notes(handed), _holding_notes(handed)
    asked = [m for m in handed if m["role"] == "user" and "turn 0: go" in repr(m)]
    assert asked == [{"role": "user", "content": [{"text": "turn 0: go"}]}]
    again = reducer.reduce(later.surviving)
    assert again.surviving == later.surviving and not again.pruned


def _unmarked(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` as a store keeping the provider's fields only gives it back."""
    return {k: v for k, v in message.items() if k not in (INJECTED_KEY, "id")}


def test_a_note_that_lost_its_marker_never_reaches_the_hooks() -> None:
    # The note comes back unmarked (a store that keeps only the API's fields): read by
    # its wording, it is still the package's own when a later turn prunes it; a user
    # message that only starts like one is conversation.
    handed: list[Any] = []
    reducer = MessageReducer(config=agent_config(
        max_tokens=3000, target_tokens=2000, token_counter="approximate",
        on_prune=[lambda pruned, namespace: handed.extend(pruned)],
    ))
    history = [
        {"role": "system", "content": "work through the steps"},
        {"role": "user", "content": "[turn note: not one, just how I start]"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "turn 0: please work through the steps"},
    ]
    for k in range(120):
        call = {"id": f"c{k}", "type": "function",
                "function": {"name": "step", "arguments": f'{{"query": "0.{k}"}}'}}
        history.append({"role": "assistant", "content": "", "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{k}",
                        "content": f"r{k} " + "lorem ipsum " * 250})
    first = reducer.reduce(history)
    assert first.turn_steps_dropped
    note = f"[turn note: {first.turn_steps_dropped} earlier steps"
    stored = [
        _unmarked(m) if injected_kind(m) == TURN_NOTE_KIND else m for m in first.surviving
    ]
    assert sum(str(m.get("content")).startswith(note) for m in stored) == 1
    assert not any(injected_kind(m) for m in stored)
    before = len(handed)
    later = _answered_then_later(stored)
    result = reducer.reduce(later)
    assert not any("turn 0:" in str(m.get("content")) for m in result.surviving)
    gone = handed[before:]
    assert gone and not [m for m in gone if str(m.get("content")).startswith(note)]
    contents = [m.get("content") for m in handed]
    assert contents.count("turn 0: please work through the steps") == 1
    assert contents.count("[turn note: not one, just how I start]") == 1



def _answered_then_later(stored: list[Any]) -> list[Any]:
    """``stored``, its turn answered, then eleven chat turns of 200 words each way."""
    later = [*stored, {"role": "assistant", "content": "answer 0: done"}]
    for t in range(1, 12):
        later += [{"role": "user", "content": f"turn {t}: " + "word " * 200},
                  {"role": "assistant", "content": f"answer {t} " + "word " * 200}]
    return later


def _chat_turn(steps: int, words: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "work through the steps"},
        {"role": "user", "content": "turn 0: please work through the steps"},
    ]
    for k in range(steps):
        call = {"id": f"c{k}", "type": "function",
                "function": {"name": "step", "arguments": f'{{"query": "0.{k}"}}'}}
        out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"c{k}",
                    "content": f"r{k} " + "lorem ipsum " * words})
    return out


@pytest.mark.parametrize("marked", [True, False], ids=["marked", "unmarked"])
def test_a_turn_note_is_never_summarised(marked: bool) -> None:
    batches: list[list[Any]] = []

    def summarize(pruned: list[Any]) -> str:
        batches.append(list(pruned))
        return "the steps of turn 0 were done"

    reducer = MessageReducer(config=agent_config(
        max_tokens=3000, target_tokens=2000, token_counter="approximate",
        summarize_fn=summarize, inject_summary=True,
    ))
    first = reducer.reduce(_chat_turn(120, 250))
    assert first.turn_steps_dropped
    stored = [
        m if marked or injected_kind(m) != TURN_NOTE_KIND else _unmarked(m)
        for m in first.surviving
    ]
    later = _answered_then_later(stored)
    result = reducer.reduce(later)
    assert not any("turn 0:" in str(m.get("content")) for m in result.surviving)
    given = [str(m.get("content")) for batch in batches for m in batch]
    assert "turn 0: please work through the steps" in given
    assert not [c for c in given if "[turn note: " in c]



def test_a_note_that_lost_its_marker_is_carried_on_by_the_next_drop() -> None:
    # Read by its wording, the unmarked note is the turn's note: the next drop rewrites it
    # (its steps and calls carried on) instead of writing a second one beside it.
    reducer = ladder(3000, 2000)
    history = _chat_turn(60, 250)
    first = reducer.reduce(history)
    assert first.turn_steps_dropped
    stored = [_unmarked(m) if injected_kind(m) == TURN_NOTE_KIND else m for m in first.surviving]
    again = reducer.reduce(stored)  # nothing more to drop: nothing changes
    assert again.surviving == stored and not again.pruned
    more = [*stored, *_chat_turn(90, 250)[len(history):]]
    second = reducer.reduce(more)
    notes = [m for m in second.surviving if "[turn note: " in str(m.get("content"))]
    assert len(notes) == 1 and injected_kind(notes[0]) == TURN_NOTE_KIND
    steps = first.turn_steps_dropped + second.turn_steps_dropped
    assert notes[0]["content"].startswith(f"[turn note: {steps} earlier steps")
    marked = reducer.reduce([*first.surviving, *_chat_turn(90, 250)[len(history):]])
    assert [m.get("content") for m in marked.surviving] == [
        m.get("content") for m in second.surviving
    ]


def test_in_a_converse_history_a_note_that_lost_its_record_is_replaced() -> None:
    reducer = MessageReducer(config=agent_config(
        provider="bedrock", max_tokens=600, target_tokens=400, token_counter="approximate"
    ))
    history = _converse_turn(12, 60)
    first = reducer.reduce(history)
    # The question the note joined, as a store that keeps Converse's fields gives it back.
    stored = [_unmarked(first.surviving[0]), *first.surviving[1:]]
    assert INJECTED_KEY not in stored[0] and len(_notes([stored[0]])) == 1
    second = reducer.reduce([*stored, *_converse_turn(20, 60)[len(history):]])
    assert second.turn_steps_dropped
    assert validate_history(second.surviving, provider="bedrock") == []
    notes = _notes(second.surviving)
    assert len(notes) == 1 and second.surviving[0]["content"][0] == {"text": "turn 0: go"}
    steps = first.turn_steps_dropped + second.turn_steps_dropped
    assert notes[0].startswith(f"[turn note: {steps} earlier steps")


def test_in_a_converse_history_a_question_of_a_string_that_lost_its_record_keeps_one_note() -> None:
    # The note joins a question written as a string as its last paragraph; read back from
    # there once the record is gone (the next drop raised StopIteration: RuntimeError).
    reducer = MessageReducer(config=agent_config(
        provider="bedrock", max_tokens=600, target_tokens=400, token_counter="approximate"
    ))
    history: list[Any] = [{"role": "user", "content": "turn 0: go"}, *_converse_turn(12, 60)[1:]]
    first = reducer.reduce(history)
    assert first.turn_steps_dropped
    assert first.surviving[0]["content"].startswith("turn 0: go\n\n[turn note: ")
    stored = [_unmarked(first.surviving[0]), *first.surviving[1:]]
    second = reducer.reduce([*stored, *_converse_turn(20, 60)[len(history):]])
    assert second.turn_steps_dropped
    question = second.surviving[0]["content"]
    assert question.count("[turn note: ") == 1 and question.startswith("turn 0: go\n\n")
    steps = first.turn_steps_dropped + second.turn_steps_dropped
    assert f"[turn note: {steps} earlier steps" in question


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
