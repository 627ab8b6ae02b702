"""A bad message in the other shapes (Gemini, Bedrock Converse, Responses items, PydanticAI)
raises a MessageFormatError naming its index and the field in that shape's own terms,
never its content: parts and blocks that are no parts, call bodies that are no objects,
ids that are no ids. Every entry point, the CLI on a request file of the shape, and the
PydanticAI and OpenAI Agents SDK integrations.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentstate_reducer import (
    ClearToolResults,
    MessageFormatError,
    MessageReducer,
    ReducerConfig,
    trim_messages,
    validate_history,
)
from agentstate_reducer.read import read_message, read_messages

SECRET = "SECRET-7f3a"
#: Where the bad message sits in every history below.
AT = 3


def _gemini_history(bad: object) -> list[Any]:
    return [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"text": "hello"}]},
        {"role": "user", "parts": [{"text": "more"}]},
        bad,
        {"role": "user", "parts": [{"text": "end"}]},
    ]


def _bedrock_history(bad: object) -> list[Any]:
    return [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"text": "hello"}]},
        {"role": "user", "content": [{"text": "more"}]},
        bad,
        {"role": "user", "content": [{"text": "end"}]},
    ]


def _responses_history(bad: object) -> list[Any]:
    return [
        {"role": "user", "content": "hi"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "o"}]},
        {"role": "user", "content": "more"},
        bad,
        {"role": "user", "content": "end"},
    ]


def _model(*parts: object) -> dict[str, Any]:
    return {"role": "model", "parts": [{"text": SECRET}, *parts]}


def _call(body: object, key: str = "functionCall") -> dict[str, Any]:
    return _model({key: body})


def _converse(*blocks: object) -> dict[str, Any]:
    return {"role": "assistant", "content": [*blocks]}


_USE = {"toolUse": {"toolUseId": "t1", "name": "f", "input": {"q": SECRET}}}

#: shape -> (history around the bad message, {case: (bad message, field named)})
CASES: dict[str, tuple[Callable[[object], list[Any]], dict[str, tuple[Any, str]]]] = {
    "gemini": (
        _gemini_history,
        {
            "part-int": (lambda: _model(5), f"messages[{AT}].parts[1]"),
            "part-none": (lambda: _model(None), f"messages[{AT}].parts[1]"),
            "part-list": (lambda: _model([SECRET]), f"messages[{AT}].parts[1]"),
            "call-body-int": (lambda: _call(3), f"messages[{AT}].parts[1].functionCall"),
            "call-body-str": (
                lambda: _call(SECRET, "function_call"), f"messages[{AT}].parts[1].function_call"
            ),
            "response-body-list": (
                lambda: {"role": "user", "parts": [{"functionResponse": [SECRET]}]},
                f"messages[{AT}].parts[0].functionResponse",
            ),
            "call-id-list": (
                lambda: _call({"id": ["x"], "name": "f", "args": {}}),
                f"messages[{AT}].parts[1].functionCall.id",
            ),
            "call-id-dict": (
                lambda: _call({"id": {"x": SECRET}, "name": "f", "args": {}}),
                f"messages[{AT}].parts[1].functionCall.id",
            ),
            "call-id-float": (
                lambda: _call({"id": 1.5, "name": "f", "args": {}}),
                f"messages[{AT}].parts[1].functionCall.id",
            ),
            "response-id-list": (
                lambda: {
                    "role": "user",
                    "parts": [{"function_response": {"id": ["x"], "name": "f", "response": {}}}],
                },
                f"messages[{AT}].parts[0].function_response.id",
            ),
        },
    ),
    "bedrock": (
        _bedrock_history,
        {
            "block-int": (lambda: _converse(_USE, 5), f"messages[{AT}].content[1]"),
            "block-none": (lambda: _converse(_USE, None), f"messages[{AT}].content[1]"),
            "block-str": (lambda: _converse(_USE, SECRET), f"messages[{AT}].content[1]"),
            "tool-use-int": (
                lambda: _converse({"toolUse": 5}), f"messages[{AT}].content[0].toolUse"
            ),
            "tool-result-str": (
                lambda: {"role": "user", "content": [{"toolResult": SECRET}]},
                f"messages[{AT}].content[0].toolResult",
            ),
            "tool-use-id-list": (
                lambda: _converse({"toolUse": {"toolUseId": ["t"], "name": "f", "input": {}}}),
                f"messages[{AT}].content[0].toolUse.toolUseId",
            ),
            "tool-result-id-dict": (
                lambda: {
                    "role": "user",
                    "content": [{"toolResult": {"toolUseId": {"t": 1}, "content": []}}],
                },
                f"messages[{AT}].content[0].toolResult.toolUseId",
            ),
            "result-content-int": (
                lambda: {
                    "role": "user",
                    "content": [
                        {"toolResult": {"toolUseId": "t", "content": [{"text": SECRET}, 5]}}
                    ],
                },
                f"messages[{AT}].content[0].toolResult.content[1]",
            ),
        },
    ),
    "openai-responses": (
        _responses_history,
        {
            "call-id-list": (
                lambda: {"type": "function_call", "call_id": ["c"], "name": "f", "arguments": "{}"},
                f"input[{AT}].call_id",
            ),
            "output-call-id-dict": (
                lambda: {"type": "function_call_output", "call_id": {"c": 1}, "output": SECRET},
                f"input[{AT}].call_id",
            ),
            "call-id-float": (
                lambda: {"type": "custom_tool_call", "call_id": 2.5, "name": "f", "input": SECRET},
                f"input[{AT}].call_id",
            ),
            "item-id-list": (
                lambda: {"type": "reasoning", "id": ["rs"], "summary": []},
                f"input[{AT}].id",
            ),
            "output-part-int": (
                lambda: {
                    "type": "function_call_output",
                    "call_id": "c",
                    "output": [{"type": "input_text", "text": SECRET}, 5],
                },
                f"input[{AT}].output[1]",
            ),
            "summary-part-none": (
                lambda: {"type": "reasoning", "id": "rs", "summary": [None]},
                f"input[{AT}].summary[0]",
            ),
        },
    ),
}


def _reducer(**options: Any) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(**{"min_messages": 1, **options}))


def _count_mode(**options: Any) -> MessageReducer:
    return _reducer(max_messages=2, **options)


def _token_mode(**options: Any) -> MessageReducer:
    return _reducer(max_messages=None, max_tokens=40, token_counter="approximate", **options)


def _entries(provider: str) -> dict[str, Callable[[list[Any]], object]]:
    edits = [ClearToolResults(keep=0)]
    return {
        "read_message": lambda h: read_message(h[AT], AT),
        "read_messages": read_messages,
        "validate_history": lambda h: validate_history(h, provider=provider),
        "trim-len": lambda h: trim_messages(h, max_tokens=1_000, token_counter=len),
        "trim-approximate": lambda h: trim_messages(
            h, max_tokens=1_000, token_counter="approximate"
        ),
        "trim-first-partial": lambda h: trim_messages(
            h, max_tokens=1_000, token_counter="approximate", strategy="first",
            allow_partial=True,
        ),
        "reduce-count": lambda h: _count_mode().reduce(h),
        "reduce-count-new": lambda h: _count_mode().reduce(h[:AT], h[AT:]),
        "reduce-tokens": lambda h: _token_mode().reduce(h),
        "reduce-tokens-edits": lambda h: _token_mode(context_edits=edits).reduce(h),
        "areduce-count": lambda h: asyncio.run(_count_mode().areduce(h)),
        "areduce-tokens": lambda h: asyncio.run(_token_mode().areduce(h[:AT], h[AT:])),
        "count_tokens": lambda h: _token_mode().count_tokens(h),
    }


MATRIX = [
    (shape, case, entry)
    for shape, (_, cases) in CASES.items()
    for case in cases
    for entry in _entries(shape)
]


def _assert_names_index_and_field(error: BaseException, field: str) -> None:
    text = str(error)
    assert isinstance(error, MessageFormatError), repr(error)
    assert f"message at index {AT} ({field})" in text, text
    assert SECRET not in text


@pytest.mark.parametrize(("shape", "case", "entry"), MATRIX)
def test_a_bad_message_of_each_shape_names_its_index_and_field(
    shape: str, case: str, entry: str
) -> None:
    history, cases = CASES[shape]
    make, field = cases[case]
    with pytest.raises(MessageFormatError) as info:
        _entries(shape)[entry](history(make()))
    _assert_names_index_and_field(info.value, field)


def test_ints_and_uuids_are_ids_in_every_shape() -> None:
    ident = uuid.UUID(int=7)
    gemini = _call({"id": 7, "name": "f", "args": {}})
    assert read_message(gemini).calls == ("7",)
    converse = _converse({"toolUse": {"toolUseId": ident, "name": "f", "input": {}}})
    assert read_message(converse).calls == (str(ident),)
    item = {"type": "function_call", "call_id": 9, "id": ident, "name": "f", "arguments": "{}"}
    record = read_message(item)
    assert record.calls == ("9",) and record.id == str(ident)


def test_unknown_keys_are_read_and_left_untouched() -> None:
    gemini = _model({"functionCall": {"name": "f", "args": {}, "future": [1]}, "extra": {}})
    converse = _converse({"toolUse": {"toolUseId": "t", "name": "f", "input": {}, "new": 5}})
    item = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "x": [1]}
    for message in (gemini, converse, item):
        before = json.dumps(message)
        read_message(message)
        assert json.dumps(message) == before


# -- the command line, on a request file of each shape -----------------------------------

#: A request holding each shape's history, as the provider's API takes it.
REQUESTS: dict[str, Callable[[list[Any]], dict[str, Any]]] = {
    "gemini": lambda h: {"contents": h},
    "bedrock": lambda h: {"modelId": "m", "messages": h},
    "openai-responses": lambda h: {"model": "m", "input": h},
}
COMMANDS = {
    "count": ["count"],
    "reduce": ["reduce", "--max-messages", "2"],
    "trim": ["trim", "--max-tokens", "1000"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    ("shape", "case"), [(shape, case) for shape, (_, cases) in CASES.items() for case in cases]
)
def test_the_cli_names_the_index_and_field_in_a_request_of_each_shape(
    shape: str, case: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentstate_reducer import cli

    history, cases = CASES[shape]
    make, field = cases[case]
    path = tmp_path / "request.json"
    path.write_text(json.dumps(REQUESTS[shape](history(make()))), encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        cli.main([*COMMANDS[command], str(path)], prog="agentstate-reducer")
    err = capsys.readouterr().err
    assert info.value.code == 1
    assert f"message at index {AT} ({field})" in err, err
    assert "Traceback" not in err and SECRET not in err


# -- PydanticAI ---------------------------------------------------------------------------


def _pydantic_ai_cases() -> dict[str, tuple[Callable[[], object], str]]:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        NativeToolCallPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )

    class Raising:
        part_kind = "text"

        @property
        def content(self) -> str:
            raise RuntimeError(SECRET)

    return {
        "part-raising": (
            lambda: ModelResponse(parts=[TextPart("x"), Raising()]),
            f"messages[{AT}].parts[1].content",
        ),
        "part-int": (
            lambda: ModelResponse(parts=[TextPart(SECRET), 5]), f"messages[{AT}].parts[1]"
        ),
        "part-none": (lambda: ModelRequest(parts=[None]), f"messages[{AT}].parts[0]"),
        "part-dict": (
            lambda: ModelResponse(parts=[{"content": SECRET}]), f"messages[{AT}].parts[0]"
        ),
        "parts-str": (lambda: ModelRequest(parts=SECRET), f"messages[{AT}].parts"),
        "call-id-list": (
            lambda: ModelResponse(parts=[ToolCallPart("f", {}, tool_call_id=["c"])]),
            f"messages[{AT}].parts[0].tool_call_id",
        ),
        "builtin-call-id-dict": (
            lambda: ModelResponse(parts=[NativeToolCallPart("web", {}, tool_call_id={"c": 1})]),
            f"messages[{AT}].parts[0].tool_call_id",
        ),
        "return-id-dict": (
            lambda: ModelRequest(parts=[ToolReturnPart("f", SECRET, tool_call_id={"c": 1})]),
            f"messages[{AT}].parts[0].tool_call_id",
        ),
    }


PYDANTIC_AI_CASES = [
    "part-raising", "part-int", "part-none", "part-dict", "parts-str", "call-id-list",
    "builtin-call-id-dict", "return-id-dict",
]


def _pydantic_ai_history(bad: object) -> list[Any]:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    return [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("hello")]),
        ModelRequest(parts=[UserPromptPart("more")]),
        bad,
        ModelRequest(parts=[UserPromptPart("end")]),
    ]


def _capability(reducer: MessageReducer, history: list[Any]) -> object:
    from agentstate_reducer.pydantic_ai import ReducingCapability

    ctx: Any = SimpleNamespace(conversation_id="c", messages=list(history))
    request: Any = SimpleNamespace(messages=list(history), model_request_parameters=None)
    return asyncio.run(ReducingCapability(reducer).before_model_request(ctx, request))


PYDANTIC_AI_ENTRIES: dict[str, Callable[[list[Any]], object]] = {
    "history_processor": lambda h: _pydantic_ai().history_processor(_count_mode())(_CTX, h),
    "history_processor-tokens": lambda h: _pydantic_ai().history_processor(_token_mode())(
        _CTX, h
    ),
    "ahistory_processor": lambda h: asyncio.run(
        _pydantic_ai().ahistory_processor(_count_mode())(_CTX, h)
    ),
    "ReducingCapability": lambda h: _capability(_count_mode(), h),
    "ReducingCapability-tokens": lambda h: _capability(_token_mode(), h),
    "reduce": lambda h: _count_mode().reduce(h),
    "trim": lambda h: trim_messages(h, max_tokens=1_000, token_counter="approximate"),
    "validate_history": lambda h: validate_history(h, provider="openai"),
    "count_tokens": lambda h: _token_mode().count_tokens(h),
}
_CTX: Any = SimpleNamespace(conversation_id="c")


def _pydantic_ai() -> Any:
    return pytest.importorskip("agentstate_reducer.pydantic_ai")


@pytest.mark.parametrize("entry", sorted(PYDANTIC_AI_ENTRIES))
@pytest.mark.parametrize("case", PYDANTIC_AI_CASES)
def test_a_bad_pydantic_ai_message_names_its_index_and_field(case: str, entry: str) -> None:
    make, field = _pydantic_ai_cases()[case]
    with pytest.raises(MessageFormatError) as info:
        PYDANTIC_AI_ENTRIES[entry](_pydantic_ai_history(make()))
    _assert_names_index_and_field(info.value, field)


# -- the OpenAI Agents SDK ------------------------------------------------------------------


class _Session:
    """A session in memory (the SDK's Session protocol)."""

    def __init__(self, items: list[Any]) -> None:
        self.session_id = "s"
        self.items = list(items)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return list(self.items)

    async def add_items(self, items: list[Any]) -> None:
        self.items.extend(items)

    async def pop_item(self) -> Any:
        return self.items.pop()

    async def clear_session(self) -> None:
        self.items.clear()


def _input_filter(reducer: MessageReducer, history: list[Any]) -> object:
    agents = pytest.importorskip("agents")
    from agents.run_config import CallModelData, ModelInputData

    from agentstate_reducer.openai_agents import reducing_input_filter

    data = CallModelData(ModelInputData(input=history, instructions="be brief"),
                         agents.Agent(name="a"), None)
    return asyncio.run(reducing_input_filter(reducer)(data))


def _session(reducer: MessageReducer, stored: list[Any], new: list[Any]) -> object:
    pytest.importorskip("agents")
    from agentstate_reducer.openai_agents import ReducingSession

    return asyncio.run(ReducingSession(_Session(stored), reducer).add_items(new))


AGENTS_ENTRIES: dict[str, Callable[[list[Any]], object]] = {
    "reducing_input_filter": lambda h: _input_filter(_count_mode(), h),
    "reducing_input_filter-tokens": lambda h: _input_filter(_token_mode(), h),
    "ReducingSession-new": lambda h: _session(_count_mode(), [], h),
    "ReducingSession-stored": lambda h: _session(_count_mode(), h[:AT], h[AT:]),
    "ReducingSession-tokens": lambda h: _session(_token_mode(), h[:AT + 1], h[AT + 1:]),
}


@pytest.mark.parametrize("entry", sorted(AGENTS_ENTRIES))
@pytest.mark.parametrize("case", sorted(CASES["openai-responses"][1]))
def test_a_bad_agents_sdk_item_names_its_index_and_field(case: str, entry: str) -> None:
    make, field = CASES["openai-responses"][1][case]
    with pytest.raises(MessageFormatError) as info:
        AGENTS_ENTRIES[entry](_responses_history(make()))
    _assert_names_index_and_field(info.value, field)


# -- ids, by property ----------------------------------------------------------------------

#: shape -> (a message holding ``ident`` where the shape keeps a call id, the field)
ID_FIELDS: dict[str, tuple[Callable[[object], object], str]] = {
    "gemini": (
        lambda ident: _call({"id": ident, "name": "f", "args": {}}), ".parts[1].functionCall.id"
    ),
    "bedrock": (
        lambda ident: _converse({"toolUse": {"toolUseId": ident, "name": "f", "input": {}}}),
        ".content[0].toolUse.toolUseId",
    ),
    "openai-responses": (
        lambda ident: {"type": "function_call", "call_id": ident, "name": "f", "arguments": "{}"},
        ".call_id",
    ),
}
_NO_IDS = st.one_of(
    st.floats(), st.booleans(), st.binary(), st.lists(st.text(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3), st.tuples(st.text()),
)


@given(shape=st.sampled_from(sorted(ID_FIELDS)), ident=_NO_IDS)
def test_a_value_that_is_no_id_is_refused_naming_its_field(shape: str, ident: object) -> None:
    make, field = ID_FIELDS[shape]
    with pytest.raises(MessageFormatError) as info:
        read_message(make(ident), AT)
    listed = "input" if shape == "openai-responses" else "messages"
    assert f"({listed}[{AT}]{field}): expected a string id, got {type(ident).__name__}" in str(
        info.value
    )


@given(
    shape=st.sampled_from(sorted(ID_FIELDS)),
    ident=st.one_of(st.text(min_size=1), st.integers(), st.uuids()),
)
def test_strings_ints_and_uuids_are_ids_as_text(shape: str, ident: object) -> None:
    assert read_message(ID_FIELDS[shape][0](ident)).calls == (str(ident),)
