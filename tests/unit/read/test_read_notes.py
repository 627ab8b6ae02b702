"""The turn note read by its wording (``read/notes.py``): strict enough that no user
message passes for one, and a message without the note a framework merged into it."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from pydantic_ai.messages import ModelRequest, SystemPromptPart, UserPromptPart

from agentstate_reducer._note import note_text, shown_args
from agentstate_reducer.read import (
    INJECTED_KEY,
    MERGED_NOTE_KEY,
    is_turn_note_text,
    turn_note_in,
    without_turn_note,
)

NOTE = note_text(
    3,
    [("step", shown_args({"query": "0.0"}), "ctx_0123456789abcdef"),
     ("lookup", shown_args([1, 2]), ""), ("step", "{}", "")],
    1000,
)

_line = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30)


@given(
    st.integers(1, 10_000),
    st.lists(st.tuples(_line, st.from_type(dict).map(shown_args) | _line, st.just("")),
             min_size=1, max_size=30),
    st.integers(64, 2000),
)
def test_every_note_the_package_writes_is_read_as_one(
    steps: int, entries: list[tuple[str, str, str]], cap: int
) -> None:
    assert is_turn_note_text(note_text(steps, entries, cap))


def test_a_text_that_only_looks_like_a_note_is_none() -> None:
    head = NOTE.partition("\n")[0]
    for text in (
        "[turn note: remember to call mum]",
        head + "]",  # no entry
        NOTE[:-1],  # not closed
        NOTE + "\nand what about step 4?",
        NOTE + " thanks",
        "please read this: " + NOTE,
        NOTE.replace("3 earlier steps", "0 earlier steps"),
        NOTE.replace("3 earlier steps", "1 earlier steps"),
        NOTE.replace("3 earlier steps", "2 earlier step "),
        NOTE.replace("save space", "save time"),
        head + "\nstep {}]",
        NOTE.replace("\n- ", "\n  - ", 1),
        None,
        42,
    ):
        assert not is_turn_note_text(text), text
    assert is_turn_note_text(NOTE)
    assert is_turn_note_text(NOTE.replace("3 earlier steps", "1 earlier step"))


def test_a_user_message_that_is_a_note_is_none_in_every_shape() -> None:
    for message in (
        {"role": "user", "content": NOTE},
        {"role": "user", "content": [{"type": "text", "text": NOTE}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": NOTE}]},
        {"role": "user", "content": NOTE},  # a Responses easy input message, unmarked
        {"role": "user", "content": [{"text": NOTE}]},  # Converse
        {"role": "user", "parts": [{"text": NOTE}]},  # Gemini
        HumanMessage(content=NOTE),
        ModelRequest(parts=[UserPromptPart(NOTE)]),
    ):
        assert without_turn_note(message) is None, message


def test_a_message_that_is_no_note_is_itself() -> None:
    for message in (
        {"role": "assistant", "content": NOTE},
        AIMessage(content=NOTE),
        {"role": "tool", "tool_call_id": "c1", "content": NOTE},
        {"role": "user", "content": NOTE + "\n\nand step 4?"},
        {"role": "user", "content": "a question"},
        {"role": "user", "content": [{"type": "text", "text": NOTE, "cache_control": {}}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
        ModelRequest(parts=[SystemPromptPart(NOTE)]),
    ):
        assert without_turn_note(message) is message, message


def test_a_note_merged_into_a_question_is_taken_out_of_a_copy() -> None:
    question = UserPromptPart("turn 0: go")
    merged: Any = ModelRequest(parts=[SystemPromptPart("s"), question, UserPromptPart(NOTE)])
    asked = without_turn_note(merged)
    assert asked is not None and asked.parts == [merged.parts[0], question]
    assert len(merged.parts) == 3  # the message itself is left alone
    converse = {
        "role": "user", "content": [{"text": "turn 0: go"}, {"text": NOTE}],
        INJECTED_KEY: {MERGED_NOTE_KEY: {"steps": 3, "entries": [], "keep": 1}},
    }
    assert without_turn_note(converse) == {"role": "user", "content": [{"text": "turn 0: go"}]}
    assert len(converse["content"]) == 2 and INJECTED_KEY in converse
    appended = {"role": "user", "content": "turn 0: go\n\n" + NOTE, "id": "q"}
    assert without_turn_note(appended) == {"role": "user", "content": "turn 0: go", "id": "q"}


def test_the_note_in_a_text_is_the_whole_text_or_its_last_paragraph() -> None:
    assert turn_note_in(NOTE) is NOTE
    assert turn_note_in("turn 0: go\n\n" + NOTE) == NOTE
    assert turn_note_in(NOTE + "\n\n" + NOTE) == NOTE  # the latest of two
    for text in ("turn 0: go", NOTE + "\n\nand then?", "go " + NOTE, None, 3, ["x"]):
        assert turn_note_in(text) is None, text


def test_a_reduce_looks_for_notes_in_the_records_it_read(monkeypatch: Any) -> None:
    """The summariser and the hand-over ask each pruned message for a note through the
    records the reduce already holds: no message is read again for it."""
    import agentstate_reducer.read.notes as notes
    from agentstate_reducer import MessageReducer, ReducerConfig

    again: list[Any] = []
    real = notes.read_message

    def reading(message: Any, *args: Any) -> Any:
        again.append(message)
        return real(message, *args)

    monkeypatch.setattr(notes, "read_message", reading)
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
               for i in range(200)]
    summarised: list[list[Any]] = []
    handed: list[Any] = []
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=20, max_messages=40, summarize_fn=lambda b: summarised.append(b) or "s",
        on_prune=[lambda pruned, namespace: handed.extend(pruned)],
    ))
    result = reducer.reduce(history)
    assert len(summarised[0]) == len(result.pruned) == len(handed) > 100
    assert again == []
