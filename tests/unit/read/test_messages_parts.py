"""What a message bills for (its record, message_parts), the reader's fast path, message states."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from fast_path import read_fast
from hypothesis import given, settings
from hypothesis import strategies as st
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

from agentstate_reducer.errors import MessageFormatError
from agentstate_reducer.read import (
    chat,
    copy_state,
    message_parts,
    message_state,
)
from agentstate_reducer.read.chat import _BY_KIND, _PYDANTIC, _plain_class, _read

IMAGE = "data:image/png;base64," + "iVBORw0KGgo" * 20_000


def test_plain_text_and_role() -> None:
    parts = message_parts({"role": "user", "content": "hello"})
    assert parts.role == "human"
    assert parts.texts == ("hello",)
    assert parts.tool_calls == ()
    assert parts.media == 0


def test_text_blocks_are_read_one_by_one_never_as_a_repr() -> None:
    content = [
        {"type": "text", "text": "first"},
        {"type": "input_text", "text": "second"},
        {"type": "image_url", "image_url": {"url": IMAGE}},
        "third",
    ]
    parts = message_parts({"role": "user", "content": content})
    assert parts.texts == ("first", "second", "third")
    assert parts.media == 1
    assert all("image_url" not in t and "{" not in t for t in parts.texts)


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image", "source": {"type": "base64", "data": IMAGE}},
        {"type": "image", "base64": IMAGE, "mime_type": "image/png"},
        {"type": "image_url", "image_url": {"url": IMAGE}},
        {"type": "input_image", "image_url": IMAGE},
        {"type": "input_audio", "input_audio": {"data": IMAGE, "format": "wav"}},
        {"type": "audio", "base64": IMAGE},
        {"type": "file", "file": {"file_data": IMAGE}},
        {"type": "input_file", "file_data": IMAGE},
        {"type": "document", "source": {"type": "base64", "data": IMAGE}},
        {"type": "video", "url": "v.mp4"},
    ],
)
def test_media_blocks_count_by_item(block: dict[str, Any]) -> None:
    parts = message_parts({"role": "user", "content": [block, copy.deepcopy(block)]})
    assert parts.media == 2
    assert parts.texts == ()


def test_openai_tool_calls_keep_name_and_json_arguments() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"q": "paris"}'},
            }
        ],
    }
    parts = message_parts(message)
    assert parts.role == "ai"
    assert parts.tool_calls == (("search", '{"q": "paris"}'),)
    assert parts.texts == ()


def test_langchain_tool_calls_serialise_args_compactly() -> None:
    message = AIMessage(
        content="", tool_calls=[{"name": "f", "args": {"a": 1, "b": "é"}, "id": "x"}]
    )
    assert message_parts(message).tool_calls == (("f", '{"a":1,"b":"é"}'),)


def test_invalid_tool_calls_are_billed_too() -> None:
    message = AIMessage(
        content="",
        invalid_tool_calls=[{"name": "f", "args": "{oops", "id": "x", "error": "bad json"}],
    )
    assert message_parts(message).tool_calls == (("f", "{oops"),)


def test_anthropic_tool_use_and_tool_result_blocks() -> None:
    call = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": 1}},
        ],
    }
    parts = message_parts(call)
    assert parts.texts == ("Let me look.",)
    assert parts.tool_calls == (("lookup", '{"q":1}'),)
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": [{"type": "text", "text": "7"}],
            },
        ],
    }
    parts = message_parts(result)
    assert parts.tool_result_ids == ("toolu_1", "toolu_2")
    assert parts.texts == ("42", "7")


def test_a_call_kept_both_in_content_and_tool_calls_counts_once() -> None:
    # LangChain's Anthropic messages hold each call as a tool_use block and in tool_calls.
    message = AIMessage(
        content=[{"type": "tool_use", "id": "t1", "name": "get", "input": {"a": 1}}],
        tool_calls=[{"name": "get", "args": {"a": 1}, "id": "t1"}],
    )
    assert message_parts(message).tool_calls == (("get", '{"a":1}'),)


def test_langchain_v1_tool_call_blocks() -> None:
    message = {
        "role": "assistant",
        "content": [{"type": "tool_call", "id": "t9", "name": "f", "args": {"x": [1, 2]}}],
    }
    assert message_parts(message).tool_calls == (("f", '{"x":[1,2]}'),)


def test_legacy_function_call() -> None:
    message = {
        "role": "assistant",
        "content": "",
        "function_call": {"name": "f", "arguments": "{}"},
    }
    assert message_parts(message).tool_calls == (("f", "{}"),)


def test_tool_message_id_and_name() -> None:
    parts = message_parts(ToolMessage(content="sunny", tool_call_id="c1", name="weather"))
    assert (parts.role, parts.tool_call_id, parts.name, parts.texts) == (
        "tool",
        "c1",
        "weather",
        ("sunny",),
    )


def test_reasoning_refusal_json_and_unknown_blocks() -> None:
    content = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig" * 100},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
        {"type": "reasoning", "reasoning": "why"},
        {"type": "refusal", "refusal": "no"},
        {"type": "json", "json": {"k": [1]}},
        {"type": "citation", "text": "cited"},
        {"type": "redacted_thinking", "data": "opaque" * 100},
    ]
    parts = message_parts({"role": "assistant", "content": content})
    # A signature is never billed; redacted thinking is, by the size of its data.
    assert parts.texts == ("hmm", "plan", "why", "no", '{"k":[1]}', "cited", "opaque" * 100)


@pytest.mark.parametrize(
    "shape",
    ["object", "openai", "messages_to_dict", "dumpd"],
)
def test_every_shape_yields_the_same_parts(shape: str) -> None:
    obj = AIMessage(
        content=[{"type": "text", "text": "Checking."}],
        tool_calls=[{"name": "search", "args": {"q": "x"}, "id": "c1"}],
        name="bot",
    )
    message: Any
    if shape == "object":
        message = obj
    elif shape == "openai":
        message = {
            "role": "assistant",
            "name": "bot",
            "content": [{"type": "text", "text": "Checking."}],
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q":"x"}'},
                }
            ],
        }
    elif shape == "messages_to_dict":
        message = messages_to_dict([obj])[0]
    else:
        message = json.loads(obj.model_dump_json())
        message = {"lc": 1, "type": "constructor", "id": ["x", "AIMessage"], "kwargs": message}
    parts = message_parts(message)
    assert parts.role == "ai"
    assert parts.name == "bot"
    assert parts.texts == ("Checking.",)
    assert parts.tool_calls == (("search", '{"q":"x"}'),)


def test_unreadable_message_names_its_index() -> None:
    with pytest.raises(MessageFormatError, match="index 3"):
        message_parts(42, 3)


# -- states: what the count cache compares ------------------------------------------


def _edits() -> list[tuple[str, Any, Any]]:
    """(label, message, in-place edit) triples; every edit changes what is billed."""
    blocks = {"role": "user", "content": [{"type": "text", "text": "a"}]}
    openai_call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    lc_call = AIMessage(content="", tool_calls=[{"name": "f", "args": {"q": [1]}, "id": "c"}])
    return [
        ("dict content", {"role": "user", "content": "a"}, lambda m: m.update(content="b")),
        ("dict name", {"role": "user", "content": "a"}, lambda m: m.update(name="n")),
        ("block text", blocks, lambda m: m["content"][0].update(text="b")),
        (
            "block added",
            copy.deepcopy(blocks),
            lambda m: m["content"].append({"type": "text", "text": "z"}),
        ),
        (
            "openai arguments",
            openai_call,
            lambda m: m["tool_calls"][0]["function"].update(arguments='{"q":2}'),
        ),
        ("lc content", HumanMessage(content="a"), lambda m: setattr(m, "content", "b")),
        ("lc args", lc_call, lambda m: m.tool_calls[0]["args"]["q"].append(2)),
        (
            "lc block text",
            HumanMessage(content=[{"type": "text", "text": "a"}]),
            lambda m: m.content[0].update(text="b"),
        ),
        (
            "tool_call_id",
            ToolMessage(content="r", tool_call_id="a"),
            lambda m: setattr(m, "tool_call_id", "b"),
        ),
        (
            "nested payload",
            messages_to_dict([HumanMessage(content="a")])[0],
            lambda m: m["data"].update(content="b"),
        ),
    ]


@pytest.mark.parametrize(("label", "message", "edit"), _edits(), ids=[e[0] for e in _edits()])
def test_a_saved_state_stops_matching_after_an_in_place_edit(
    label: str, message: Any, edit: Any
) -> None:
    saved = copy_state(message_state(message))
    assert saved == message_state(message)
    parts_before = message_parts(message)
    edit(message)
    assert message_parts(message) != parts_before, label
    assert saved != message_state(message), label


def test_a_dict_message_is_its_own_state() -> None:
    message = {"role": "user", "content": "a"}
    assert message_state(message) is message


def test_copies_share_strings_so_images_are_not_copied() -> None:
    message = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": IMAGE}}]}
    saved: Any = copy_state(message_state(message))
    assert saved["content"][0]["image_url"]["url"] is IMAGE
    assert saved["content"] is not message["content"]


def test_an_unknown_object_is_compared_by_identity() -> None:
    class Opaque:
        pass

    message = {"role": "user", "content": "a", "tool_calls": [{"args": {"x": Opaque()}}]}
    saved = copy_state(message_state(message))
    assert saved == message_state(message)
    message["tool_calls"][0]["args"]["x"] = Opaque()
    assert saved != message_state(message)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(args=_json_values, other=_json_values)
def test_a_saved_state_matches_exactly_while_the_arguments_are_unchanged(
    args: Any, other: Any
) -> None:
    message = {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "args": args}]}
    saved = copy_state(message_state(message))
    assert saved == message_state(message)
    message["tool_calls"][0]["args"] = other
    if other != args:  # (1 == True: such a change is not noticed, and costs no token)
        assert saved != message_state(message)


# -- the reader's one fast path ------------------------------------------------------


def _fast(message: Any) -> Any:
    return read_fast(message)


def _plain_agrees(message: Any) -> None:
    """The fast path, where it reads a message, gives exactly the general reader's record."""
    fast = _fast(message)
    if fast is not None:
        assert fast == _read(message, 0)
        assert fast.role in ("human", "ai", "system", "tool", "function")


def _openai_call(ident: Any, name: Any = "f", arguments: Any = '{"q": 1}') -> dict[str, Any]:
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "hi", "id": "u1"},
        {"role": "assistant", "content": None},
        {"role": "system", "content": ""},
        {"role": "developer", "content": "rules", "name": "ops"},
        {"role": "tool", "content": "42", "tool_call_id": "c1", "id": 7},
        {"role": "tool", "content": "42", "tool_call_id": ""},
        {"role": "assistant", "content": "", "tool_calls": [_openai_call("c1")]},
        {"role": "assistant", "content": "", "tool_calls": [_openai_call(3), _openai_call(3)]},
        {"role": "assistant", "tool_calls": [_openai_call(None, None, {"a": [1]})]},
        {"role": "user", "tool_calls": [_openai_call("c1")]},  # calls billed, none issued
        {"role": "assistant", "tool_calls": [{"id": "c2", "name": "g", "args": {"x": "é"}}]},
        {"type": "human", "content": "a LangChain dict"},
        HumanMessage(content="hi", id="h1", name="ann"),
        AIMessage(content="", tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c1"}]),
        AIMessage(content="ok", additional_kwargs={"refusal": None}),
        ToolMessage(content="r", tool_call_id="c1"),
    ],
)
def test_the_fast_path_reads_common_shapes_as_the_general_reader_does(message: Any) -> None:
    assert _fast(message) is not None
    _plain_agrees(message)


class _Computed:
    """A duck-typed message whose fields are properties."""

    @property
    def type(self) -> str:
        return "human"

    content = "hi"


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": [{"type": "input_text", "text": "blocks"}]},
        {"role": "user", "content": [{"type": "text", "text": "blocks"}], "name": "ann"},
        {"role": "assistant", "content": "", "function_call": {"name": "f", "arguments": ""}},
        {"role": "assistant", "content": "", "function_call": {}},
        {"role": "assistant", "content": "", "invalid_tool_calls": [{"name": "f"}]},
        {"role": "assistant", "tool_calls": ({"id": "c", "name": "f", "args": {}},)},
        {"role": "assistant", "tool_calls": ["not a dict"]},
        {"role": "narrator", "content": "an unknown role is billed as text"},
        {"role": "User", "content": "case folded by the general reader"},
        {"role": "user", "content": 42},
        {"role": "user", "content": "x", "name": 5},
        messages_to_dict([HumanMessage(content="nested")])[0],
        {"lc": 1, "type": "constructor", "id": ["x", "HumanMessage"], "kwargs": {"content": "x"}},
        ChatMessage(content="x", role="user"),
        HumanMessage(content="x", tool_calls=[{"name": "f", "args": {}, "id": "c"}]),
        AIMessage(content="", additional_kwargs={"tool_calls": [_openai_call("c1")]}),
        AIMessage(content="", additional_kwargs={"function_call": {"name": "f"}}),
        _Computed(),
        {"role": "model", "parts": [{"text": "a Gemini content"}]},
        {"role": "user", "id": "g", "parts": [{"functionResponse": {"name": "f"}}]},
    ],
)
def test_the_fast_path_leaves_other_shapes_to_the_general_reader(message: Any) -> None:
    assert _fast(message) is None



_ids = st.none() | st.just("") | st.text(alphabet="ab1", max_size=3) | st.integers(0, 3)
_strings = st.none() | st.just("") | st.text(alphabet="ab é", max_size=6)
_calls = st.lists(
    st.one_of(
        st.builds(_openai_call, _ids, _strings, _strings | st.dictionaries(st.just("k"), _ids)),
        st.fixed_dictionaries(
            {"id": _ids, "name": _strings, "args": st.dictionaries(st.just("k"), _ids)}
        ),
    ),
    max_size=3,
)
_dict_messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "ai", "tool", "system", "function", "x"])},
    optional={
        "content": _strings | st.just([{"type": "text", "text": "t"}]),
        "id": _ids,
        "name": _strings,
        "tool_call_id": _ids,
        "tool_calls": st.none() | _calls,
        "invalid_tool_calls": st.none() | st.just([]),
        "function_call": st.none() | st.just({"name": "f", "arguments": "{}"}),
    },
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_dict_messages)
def test_the_fast_path_agrees_with_the_general_reader_on_any_dict(
    message: dict[str, Any],
) -> None:
    _plain_agrees(message)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from([HumanMessage, AIMessage, SystemMessage]),
    content=st.text(alphabet="ab ", max_size=5),
    name=st.none() | st.text(alphabet="n", max_size=2),
    ident=st.none() | st.text(alphabet="i", max_size=2),
    calls=st.lists(
        st.fixed_dictionaries({"id": st.text(alphabet="c1", max_size=2), "name": st.just("f"),
                               "args": st.dictionaries(st.just("k"), st.integers(0, 2))}),
        max_size=2,
    ),
)
def test_the_fast_path_agrees_with_the_general_reader_on_langchain_objects(
    kind: Any, content: str, name: str | None, ident: str | None, calls: list[dict[str, Any]]
) -> None:
    extra: dict[str, Any] = {"tool_calls": calls} if kind is AIMessage else {}
    message = kind(content=content, name=name, id=ident, **extra)
    assert _fast(message) is not None
    _plain_agrees(message)


def _shortcut(message: Any) -> Any:
    """The LangChain shortcut's record of ``message``, or ``None`` where it declines (and
    would hand the message on to the rest of the fast path)."""
    kind = _plain_class(type(message))
    if kind <= _PYDANTIC:
        return None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chat, "_read_pydantic", lambda message: None)
        return _BY_KIND[kind](message)


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage(content="hi", id="h1"),
        HumanMessage(content=""),
        SystemMessage(content="rules", id=""),
        AIMessage(content="ok", id="a1"),
        AIMessage(content="", tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c1"}]),
        ToolMessage(content="r", tool_call_id="c1", id="t1"),
    ],
)
def test_the_langchain_shortcut_reads_the_commonest_messages(message: Any) -> None:
    assert _shortcut(message) is not None
    assert _shortcut(message) == read_fast(message) == _read(message, 0)


def _smuggled(message: Any, key: str, value: Any) -> Any:
    object.__setattr__(message, key, value)  # into __dict__, past pydantic
    return message


def _without(message: Any, key: str) -> Any:
    del message.__dict__[key]
    return message


def _retyped(message: Any, kind: str) -> Any:
    message.type = kind
    return message


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage(content="hi", name="ann"),
        HumanMessage(content=[{"type": "text", "text": "blocks"}]),
        HumanMessage(content="x", tool_calls=[{"name": "f", "args": {}, "id": "c"}]),
        AIMessage(content="", additional_kwargs={"refusal": None}),
        AIMessage(content="", tool_calls=[{"name": "f", "args": {}, "id": c} for c in "ab"]),
        AIMessage(content="", tool_calls=[{"name": "f", "args": {}, "id": None}]),
        AIMessage(content="", invalid_tool_calls=[{"name": "f", "args": "{", "id": "c",
                                                   "error": None}]),
        AIMessageChunk(content="a chunk class"),
        ToolMessage(content="r", tool_call_id=""),
        ToolMessage(content="r", tool_call_id="c1", name="lookup"),
        FunctionMessage(content="r", name="f"),
        _smuggled(HumanMessage(content="x"), "reasoning_content", "hidden"),
        _smuggled(AIMessage(content="x"), "function_call", {"name": "f"}),
        _smuggled(_without(HumanMessage(content="x"), "response_metadata"), "tool_calls",
                  [{"name": "f", "args": {}, "id": "c"}]),
        _without(ToolMessage(content="r", tool_call_id="c1"), "status"),
        _without(AIMessage(content="x"), "content"),
        _retyped(AIMessage(content="x", tool_calls=[{"name": "f", "args": {}, "id": "c"}]),
                 "human"),
        _retyped(ToolMessage(content="r", tool_call_id="c1"), "ai"),
    ],
)
def test_the_langchain_shortcut_declines_what_it_does_not_read_as_the_reader_would(
    message: Any,
) -> None:
    assert _shortcut(message) is None
    _plain_agrees(message)


_lc_ids = st.none() | st.just("") | st.text(alphabet="i", max_size=2)


@st.composite
def _langchain_messages(draw: st.DrawFn) -> Any:
    """LangChain messages of the classes the shortcut reads, now and then bent out of the
    shapes it reads (a name, blocks, calls it leaves alone, a field changed past pydantic)."""
    kind = draw(st.sampled_from([HumanMessage, SystemMessage, AIMessage, ToolMessage]))
    content = draw(st.text(alphabet="ab ", max_size=4) | st.just([{"type": "text", "text": "t"}]))
    fields: dict[str, Any] = {
        "content": content,
        "id": draw(_lc_ids),
        "name": draw(st.none() | st.text(alphabet="n", max_size=1)),
        "additional_kwargs": draw(st.sampled_from([{}, {"refusal": None}, {"k": 1}])),
    }
    if kind is AIMessage:
        fields["tool_calls"] = draw(st.lists(
            st.fixed_dictionaries({"id": _lc_ids, "name": st.sampled_from(["f", ""]),
                                   "args": st.dictionaries(st.just("k"), st.integers(0, 2))}),
            max_size=2,
        ))
    if kind is ToolMessage:
        fields["tool_call_id"] = draw(st.sampled_from(["", "c1"]))
    message = kind(**fields)
    bend = draw(st.sampled_from(["none", "none", "smuggle", "drop", "retype"]))
    if bend == "smuggle":
        key = draw(st.sampled_from(["reasoning_content", "function_call", "tool_calls",
                                    "tool_call_id", "invalid_tool_calls", "other"]))
        object.__setattr__(message, key, draw(st.sampled_from(["x", None, [], {"name": "f"}])))
    elif bend == "drop":
        del message.__dict__[draw(st.sampled_from(sorted(message.__dict__)))]
    elif bend == "retype":
        message.type = draw(st.sampled_from(["human", "ai", "tool", "system", "narrator"]))
    return message


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(_langchain_messages())
def test_the_langchain_shortcut_agrees_with_the_general_reader(message: Any) -> None:
    shortcut = _shortcut(message)
    if shortcut is not None:
        assert shortcut == _read(message, 0)
    try:
        fast = read_fast(message)
    except Exception:  # a field dropped past pydantic: getattr() fails as it would
        return
    if fast is not None:
        assert fast == _read(message, 0)


#: The dicts read_messages reads inline (text, a tool result, one OpenAI call).
_INLINE = (
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": ""},
    {"role": "system", "content": "s"},
    {"role": "tool", "content": "r", "tool_call_id": "c1"},
    {"role": "assistant", "content": None, "tool_calls": [_openai_call("c1")]},
    {"role": "assistant", "content": "t", "tool_calls": [_openai_call("c1")]},
)
#: What it hands to a shape's reader at once: Gemini contents, Responses items.
_DISPATCHED = (
    {"role": "model", "parts": [{"text": "a"}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"r": 1}}}]},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "r"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
    {"type": "human", "content": "q"},
)
#: Odd values for their fields, and for their calls.
_ODD = ("", None, 7, [1], "Tool")
_ODD_CALLS = (
    [_openai_call("")], [_openai_call(1)], [_openai_call("c1", None)], ["c1"], [], None,
    [{"id": "c1", "function": "f"}], [{"id": "c1", "name": "f", "args": {}}],
    [_openai_call("c1"), _openai_call("c2")], "c1",
)
_KEYS = ("id", "parts", "name", "tool_call_id", "tool_calls", "content", "function_call",
         "role", "type", "data")


def _bent(message: dict[str, Any]) -> list[dict[str, Any]]:
    """``message`` bent once every way: each key dropped, each key given each odd value."""
    out = []
    for key in message:
        out.append({k: v for k, v in message.items() if k != key})
    for key in _KEYS + tuple(k for k in message if k not in _KEYS):
        for value in _ODD_CALLS if key == "tool_calls" else _ODD:
            out.append({**message, key: value})
    return out


def _near_inline() -> list[dict[str, Any]]:
    """Each inline shape with and without an id, bent once and twice every way; each
    dispatched one bent once."""
    out = []
    for base in _INLINE + _DISPATCHED:
        for message in (base, {**base, "id": "m1"}):
            out.append(message)
            for once in _bent(message):
                out.append(once)
                if base in _INLINE:
                    out.extend(_bent(once))
    return out


def _one_by_one(messages: list[Any]) -> Any:
    try:
        return [chat.read_message(m, i) for i, m in enumerate(messages)]
    except MessageFormatError as exc:
        return type(exc), str(exc)


def _read_alone_as_one_by_one(messages: list[Any]) -> list[Any]:
    """Assert that each of ``messages``, alone in a list, reads (or fails) as
    read_message reads it; the readable ones."""
    readable = []
    for message in messages:
        try:
            got: Any = chat.read_messages([message])
        except MessageFormatError as exc:
            got = type(exc), str(exc)
        assert got == _one_by_one([message]), message
        if type(got) is list:
            readable.append(message)
    return readable


def test_the_dicts_read_inline_read_as_read_message_reads_them() -> None:
    """read_messages reads the commonest dicts inline and hands Gemini contents and
    Responses items to their shape's reader at once: each of them bent once or twice every
    way (a key dropped, a field given an odd value) reads as read_message reads it, alone
    and in one list."""
    readable = _read_alone_as_one_by_one(_near_inline())
    assert len(readable) > 1_000
    assert chat.read_messages(readable) == _one_by_one(readable)


def _langchain_bases() -> list[Any]:
    """The LangChain messages read_messages reads inline: text (human, system), an ai
    message issuing no call or one, a tool result; with and without an id."""
    out = []
    for ident in (None, "m1"):
        out += [
            HumanMessage("q", id=ident), SystemMessage("s", id=ident), AIMessage("", id=ident),
            AIMessage("t", id=ident, tool_calls=[{"id": "c1", "name": "f", "args": {"k": 1}}]),
            ToolMessage("r", tool_call_id="c1", id=ident),
        ]
    return out


def _langchain_bent() -> list[Any]:
    """Each of them bent once every way past pydantic: each field dropped, each field (and
    a few undeclared ones) given each odd value, the type changed to each role's."""
    odd = ("", None, 7, "x", [], [{"id": "c2", "name": "g", "args": {}}], {"k": 1},
           [{"type": "text", "text": "t"}])
    out: list[Any] = []
    for base in _langchain_bases():
        out.append(base)
        keys = [*base.__dict__, "reasoning_content", "function_call", "tool_calls",
                "tool_call_id", "invalid_tool_calls", "other"]
        for key in dict.fromkeys(keys):
            if key in base.__dict__:
                out.append(_without(base.model_copy(deep=True), key))
            for value in odd:
                out.append(_smuggled(base.model_copy(deep=True), key, value))
        for kind in ("human", "ai", "tool", "system", "function", "narrator"):
            out.append(_retyped(base.model_copy(deep=True), kind))
        extra = base.model_copy(deep=True)
        extra.__pydantic_extra__["tool_calls"] = [{"id": "c3", "name": "h", "args": {}}]
        out.append(extra)
    return out


def test_the_langchain_messages_read_inline_read_as_read_message_reads_them() -> None:
    """read_messages reads LangChain's commonest messages inline: each of them bent once
    every way reads as read_message reads it (or fails as it fails), alone and in one
    list."""
    readable = _read_alone_as_one_by_one(_langchain_bent())
    assert len(readable) > 300
    assert chat.read_messages(readable) == _one_by_one(readable)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_near_inline()) | _dict_messages | _langchain_messages(),
                max_size=4))
def test_a_list_reads_as_its_messages_read_one_by_one(messages: list[Any]) -> None:
    """read_messages reads the commonest dicts inline and looks each class's fast path up
    once: every record (or the error naming the index) is read_message's."""
    try:
        got: Any = chat.read_messages(messages)
    except MessageFormatError as exc:
        got = type(exc), str(exc)
    assert got == _one_by_one(messages)


def test_with_parts_copies_a_langchain_message_deeply_sharing_nothing() -> None:
    from langchain_core.messages import AIMessage, ToolMessage

    from agentstate_reducer.read import with_parts

    call = {"id": "c1", "name": "lookup", "args": {"q": ["x"]}}
    ai = AIMessage("", tool_calls=[call], id="a1", additional_kwargs={"k": {"deep": [1]}},
                   response_metadata={"model": "m"}, extra_field={"n": [1]})
    tool = ToolMessage("r", tool_call_id="c1", id="t1", artifact={"rows": [[1]]})
    for message in (ai, tool):
        copied = with_parts(message, {})
        assert copied == message and copied is not message
        assert copied.model_dump() == message.model_dump()
        assert copied.__pydantic_extra__ == message.__pydantic_extra__
    edited = with_parts(ai, {("tool_calls", 0, "args"): {}})
    assert edited.tool_calls[0]["args"] == {} and ai.tool_calls[0]["args"] == {"q": ["x"]}
    copied = with_parts(ai, {})
    copied.additional_kwargs["k"]["deep"].append(2)
    copied.__pydantic_extra__["extra_field"]["n"].append(2)
    copied.tool_calls[0]["args"]["q"].append("y")
    assert ai.additional_kwargs == {"k": {"deep": [1]}}
    assert ai.__pydantic_extra__ == {"extra_field": {"n": [1]}}
    assert ai.tool_calls[0]["args"] == {"q": ["x"]}
    copied_tool = with_parts(tool, {("content",): "x"})
    copied_tool.artifact["rows"][0].append(2)
    assert tool.artifact == {"rows": [[1]]} and copied_tool.content == "x"


_blocks = st.lists(
    st.one_of(
        st.fixed_dictionaries({"type": st.just("text"), "text": _strings}),
        st.fixed_dictionaries(
            {"type": st.just("tool_use"), "id": _ids, "name": _strings, "input": _json_values}
        ),
        st.fixed_dictionaries(
            {"type": st.just("tool_result"), "tool_use_id": _ids},
            optional={"content": _strings | st.just([{"type": "text", "text": "r"}]),
                      "is_error": st.booleans()},
        ),
        st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _strings},
                              optional={"signature": _strings}),
        st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": _strings}),
        st.fixed_dictionaries({"type": st.sampled_from(["image", "reasoning", "tool_call"])}),
        _strings,
    ),
    max_size=4,
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    role=st.sampled_from(["user", "assistant", "tool", "system", "x"]),
    blocks=_blocks,
    ident=st.none() | _ids,
)
def test_the_fast_path_agrees_with_the_general_reader_on_anthropic_blocks(
    role: str, blocks: list[Any], ident: Any
) -> None:
    message: dict[str, Any] = {"role": role, "content": blocks}
    if ident is not None:
        message["id"] = ident
    _plain_agrees(message)


def test_the_fast_path_reads_anthropic_blocks() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "f", "input": {"q": 1}}
    think = {"type": "thinking", "thinking": "hm", "signature": "s"}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "r"}
    for message in (
        {"role": "assistant", "content": [think, use]},
        {"role": "user", "content": [result], "id": "u"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
    ):
        assert _fast(message) is not None
        _plain_agrees(message)


_block_values = st.sampled_from([None, "", "a b", 3, ["x"]])
_blocks = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "output_text", "input_text", "refusal", "thinking",
                                  "tool_use", "input_image", None])},
        optional={"text": _block_values, "thinking": _block_values, "id": _block_values,
                  "name": _block_values, "input": st.just({})},
    ),
    st.sampled_from(["plain", 4]),
    st.fixed_dictionaries({"type": st.sampled_from(["output_text", "input_text"]),
                           "text": st.sampled_from(["", "a", "b c"])}),
)
_items = st.fixed_dictionaries(
    {"content": st.lists(_blocks, max_size=3)},
    optional={
        "role": st.sampled_from(["assistant", "user", "Assistant", "narrator", 2]),
        "id": st.sampled_from([None, "", "msg_1", 5]),
        "type": st.sampled_from(["message", "other", None, 1]),
        "status": st.sampled_from(["completed", None]),
        "name": st.just("ann"),
    },
) | st.fixed_dictionaries(  # a Responses message item, now and then odd
    {"role": st.sampled_from(["assistant", "user"]), "type": st.just("message"),
     "content": st.lists(_blocks, min_size=1, max_size=2)},
    optional={"id": st.sampled_from(["msg_1", None, 5]), "status": st.just("completed")},
)


@settings(max_examples=400, deadline=None)
@given(message=_items)
def test_a_responses_message_item_reads_as_the_general_walk_reads_it(
    message: dict[str, Any],
) -> None:
    """A dict of a role and typed content blocks takes the general reader's shortcut; the
    same fields as another mapping take the walk: the record (or the error) is the same."""
    from types import MappingProxyType

    def read(m: Any) -> Any:
        try:
            return _read(m, 0)
        except Exception as exc:  # the two readers must fail alike
            return type(exc), str(exc)

    assert read(message) == read(MappingProxyType(message))


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
    | st.sampled_from([1j, b"x", frozenset({1})]),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner)
    | st.dictionaries(st.text(max_size=3) | st.integers() | st.booleans(), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=_json_values)
def test_arguments_are_billed_as_json_dumps_writes_them(value: Any) -> None:
    """The encoder built once writes what json.dumps writes; a cycle bills as str()."""
    import json

    from agentstate_reducer.read.fields import _json

    expected = value if isinstance(value, str) else json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), default=str
    )
    assert _json(value) == expected
    cycle: list[Any] = [value]
    cycle.append(cycle)
    assert _json(cycle) == str(cycle)


def test_a_cycle_in_arguments_is_found_whatever_the_recursion_limit() -> None:
    """A raised recursion limit lets an encoder with no cycle check recurse past the C
    stack (the interpreter crashed); the cycle is found and billed as str()."""
    import subprocess
    import sys

    script = (
        "import sys; sys.setrecursionlimit(200_000)\n"
        "from agentstate_reducer.tokens import approximate_token_count\n"
        "args = {'a': [1]}; args['a'].append(args)\n"
        "call = {'id': 'c1', 'function': {'name': 'f', 'arguments': args}}\n"
        "print(approximate_token_count({'role': 'assistant', 'tool_calls': [call]}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-500:]
    assert int(done.stdout) > 0


def test_a_value_json_cannot_write_is_not_held_and_reads_again() -> None:
    """What a failed encode was writing is neither kept alive nor taken for a cycle later."""
    import gc
    import weakref

    from agentstate_reducer.read.fields import _json

    class Args(dict[Any, Any]):
        pass

    for _ in range(2):  # the second time: no stale marker reads as a cycle
        args = Args(a=Args({("a", "tuple"): 1}))
        held = weakref.ref(args)
        assert _json(args) == str(args)
        assert _json({"ok": [1]}) == '{"ok":[1]}'
        del args
        gc.collect()
        assert held() is None


def test_the_same_arguments_are_billed_alike_from_threads() -> None:
    """Threads writing one value at once (its str() lets another thread run) each get
    json.dumps's text, never a false cycle's str()."""
    import threading
    import time

    from agentstate_reducer.read.fields import _json

    class Slow:
        def __str__(self) -> str:
            time.sleep(0.0005)
            return "slow"

    value = {"a": [Slow(), {"b": Slow()}], "c": 1}
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    got: list[str] = []

    def run() -> None:
        got.extend(_json(value) for _ in range(20))

    threads = [threading.Thread(target=run) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == [expected] * 120
