"""The adapter reads every message shape into the same view."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from langchain_core.load import dumpd
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)

from agentstate_reducer import MessageFormatError
from agentstate_reducer.read import (
    message_id,
    message_parts,
    normalize_role,
    read_message,
)


@pytest.mark.parametrize(
    ("raw", "role"),
    [
        ("human", "human"),
        ("user", "human"),
        ("ai", "ai"),
        ("assistant", "ai"),
        ("agent", "ai"),
        ("system", "system"),
        ("developer", "system"),
        ("tool", "tool"),
        ("function", "function"),
        ("HumanMessage", "human"),
        ("AIMessageChunk", "ai"),
        ("USER", "human"),
        ("critic", "critic"),
        (None, ""),
    ],
)
def test_role_aliases(raw: object, role: str) -> None:
    assert normalize_role(raw) == role


def test_openai_dicts() -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    }
    assert read_message(call)[:4] == ("ai", None, ("c1", "c2"), ())
    result = {"role": "tool", "tool_call_id": "c1", "content": "x"}
    assert read_message(result)[:4] == ("tool", None, (), ("c1",))
    plain = {"role": "assistant", "content": "hi", "tool_calls": None, "id": "m1"}
    assert read_message(plain)[:4] == ("ai", "m1", (), ())


def test_anthropic_blocks() -> None:
    use = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "let me look"},
            {"type": "tool_use", "id": "tu1", "name": "f", "input": {}},
            {"type": "tool_use", "id": "tu2", "name": "f", "input": {}},
        ],
    }
    assert read_message(use).calls == ("tu1", "tu2")
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "tu1", "content": "a"},
            {"type": "tool_result", "tool_use_id": "tu2", "content": "b"},
        ],
    }
    view = read_message(result)
    assert view.role == "human"
    assert view.answers == ("tu1", "tu2")


def test_langchain_objects() -> None:
    ai = AIMessage(content="", tool_calls=[{"id": "t1", "name": "f", "args": {}}], id="a1")
    assert read_message(ai)[:4] == ("ai", "a1", ("t1",), ())
    assert read_message(ToolMessage(content="r", tool_call_id="t1")).answers == ("t1",)
    assert read_message(HumanMessage(content="hi")).role == "human"
    assert read_message(SystemMessage(content="s")).role == "system"
    assert read_message(AIMessageChunk(content="x")).role == "ai"
    assert read_message(FunctionMessage(content="x", name="f")).role == "function"
    assert read_message(ChatMessage(content="x", role="user")).role == "human"
    assert read_message(ChatMessage(content="x", role="assistant")).role == "ai"


def test_langchain_dict_forms() -> None:
    ai = AIMessage(content="", tool_calls=[{"id": "t1", "name": "f", "args": {}}], id="a1")
    tool = ToolMessage(content="r", tool_call_id="t1", id="x1")
    as_dicts = messages_to_dict([ai, tool])
    assert read_message(as_dicts[0])[:4] == ("ai", "a1", ("t1",), ())
    assert read_message(as_dicts[1])[:4] == ("tool", "x1", (), ("t1",))
    dumped = dumpd(ai)
    assert read_message(dumped)[:4] == ("ai", "a1", ("t1",), ())
    assert read_message(dumpd(ChatMessage(content="x", role="user"))).role == "human"
    simple = {"type": "ai", "content": "", "tool_calls": [{"id": "t9", "name": "f", "args": {}}]}
    assert read_message(simple).calls == ("t9",)


def test_duck_typed_objects() -> None:
    assert read_message(SimpleNamespace(role="user", content="x")).role == "human"
    assert read_message(SimpleNamespace(type="ai", content="x", id=7)).id == "7"
    responses_item = SimpleNamespace(type="message", role="assistant", content="x")
    assert read_message(responses_item).role == "ai"


def test_unreadable_message_names_its_index() -> None:
    with pytest.raises(MessageFormatError, match="index 3") as info:
        read_message(42, 3)
    assert isinstance(info.value, TypeError)


def test_odd_values_do_not_crash() -> None:
    weird = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"function": {"name": "f"}}, {"id": 12}],
    }
    assert read_message(weird).calls == ("12",)
    assert read_message({"role": "tool", "content": None}).answers == ()
    assert read_message({"content": "no role"}).role == ""
    assert read_message({"role": 5, "content": "x"}).role == ""


def test_message_id_of_every_shape() -> None:
    assert message_id({"role": "user", "id": "a"}) == "a"
    assert message_id(HumanMessage(content="x", id="b")) == "b"
    assert message_id(messages_to_dict([HumanMessage(content="x", id="c")])[0]) == "c"
    assert message_id({"role": "user"}) is None


def test_message_parts_reads_text_blocks_not_reprs() -> None:
    parts = message_parts(
        {
            "role": "user",
            "name": "ann",
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 999}},
            ],
        }
    )
    assert parts.texts == ("hello",)
    assert parts.media == 1
    assert parts.name == "ann"
    openai_call = message_parts(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
            ],
        }
    )
    assert openai_call.tool_calls == (("f", '{"a":1}'),)
    lc_call = message_parts(
        AIMessage(content="", tool_calls=[{"id": "c", "name": "g", "args": {"b": 2}}])
    )
    assert lc_call.tool_calls == (("g", '{"b":2}'),)


def test_synthetic_results_are_written_in_the_issuers_shape() -> None:
    from langchain_core.load import dumpd
    from langchain_core.messages import AIMessage, ToolMessage, messages_to_dict

    from agentstate_reducer.read import INTERRUPTED_RESULT, synthetic_results

    openai = {"role": "assistant", "content": None, "id": "a",
              "tool_calls": [{"id": "x", "type": "function", "function": {"name": "f"}}]}
    [result] = synthetic_results(openai, ("x",))
    assert result == {"role": "tool", "tool_call_id": "x", "content": INTERRUPTED_RESULT,
                      "id": "synthetic-result-x"}
    anthropic = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "x", "name": "f", "input": {}},
        {"type": "tool_use", "id": "y", "name": "f", "input": {}},
    ]}
    [user] = synthetic_results(anthropic, ("x", "y"))
    assert user["role"] == "user" and "id" not in user
    assert [b["tool_use_id"] for b in user["content"]] == ["x", "y"]
    assert all(b["type"] == "tool_result" and b["is_error"] for b in user["content"])
    message = AIMessage(content="", id="a", tool_calls=[{"id": "x", "name": "f", "args": {}}])
    [tool] = synthetic_results(message, ("x",))
    assert isinstance(tool, ToolMessage) and tool.status == "error"
    assert (tool.tool_call_id, tool.id) == ("x", "synthetic-result-x")
    for form in (messages_to_dict([message])[0], dumpd(message),
                 {"type": "ai", "content": "", "tool_calls": [{"id": "x"}]}):
        [written] = synthetic_results(form, ("x",))
        view = read_message(written)
        assert (view.role, view.answers) == ("tool", ("x",))


#: The names of ``agentstate_reducer.messages``, the reader's former path, when it became
#: a re-export of ``agentstate_reducer.read`` (46ae2c8): newer names are read's alone.
_FORMER_PATH = frozenset({
    "AI", "BLANK_PART", "CHAT", "EditablePart", "Extras", "FUNCTION", "GROUP_BOUNDARY",
    "GROUP_NONE", "GROUP_OUTPUT", "GROUP_REASONING", "HUMAN", "INJECTED_KEY",
    "INTERRUPTED_RESULT", "MAX_DEPTH", "MEDIA_PART", "MessageParts", "MessageRecord",
    "NO_EXTRAS", "OTHER_PART", "PACKAGE_NOTE", "PRUNABLE_ROLES", "REASONING_PART",
    "ReasoningPart", "Request", "SUMMARY_ACK_KIND", "SUMMARY_KIND", "SYSTEM", "Shape",
    "TEXT_PART", "TOOL", "TOOL_ARGS_PART", "TOOL_RESULT_PART", "TOOL_USE_PART",
    "TURN_NOTE_KIND", "args_text", "as_update", "call_signatures", "content_kinds",
    "copy_state", "editable_body", "editable_parts", "editable_size", "has_anthropic_blocks",
    "holding_block", "injected_kind", "injected_mark", "is_injected", "is_merge_update",
    "is_removal", "is_serialisation_stub", "is_summary", "item_type", "looks_like_message",
    "make_record", "match_shape", "message_content", "message_id", "message_parts",
    "message_state", "native_provider", "normalize_role", "package_note", "part_text",
    "raw_message_id", "read_message", "read_messages", "read_request", "reasoning_parts",
    "record_group", "reply_text", "reported_input_tokens", "request_instructions",
    "serialisation", "summary_covers", "synthetic_results", "text_block", "too_deep",
    "too_deep_among", "with_content", "with_parts", "without_reasoning", "write_message",
    "write_request",
})


def test_the_former_path_keeps_its_names_and_takes_no_newer_one() -> None:
    """Each of its names is read's own object, in read's order; a name read adds later
    (the turn note's, say) stays read's alone: add it to the del lines in messages.py."""
    import agentstate_reducer.messages as former
    import agentstate_reducer.read as read

    assert set(former.__all__) == _FORMER_PATH, set(former.__all__) ^ _FORMER_PATH
    assert list(former.__all__) == [n for n in read.__all__ if n in _FORMER_PATH]
    for name in former.__all__:
        assert getattr(former, name) is getattr(read, name)
    public = {n for n in vars(former) if not n.startswith("_") and n != "annotations"}
    assert public == _FORMER_PATH, public ^ _FORMER_PATH
