"""A bad message raises a MessageFormatError naming its index and field, never its content.

Every entry point x every bad input the reader can meet: a foreign object whose attribute
raises, tool calls that are not mappings, ids that are no ids, nesting too deep to read,
and messages that are no messages at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentstate_reducer import MessageFormatError, validate_history
from agentstate_reducer.messages import MAX_DEPTH, read_message, read_messages

SECRET = "SECRET-7f3a"
#: Where the bad message sits in every history below.
AT = 3


def _raising(field: str, error: type[Exception]) -> object:
    """An ai message object whose ``field`` is a property raising ``error``."""

    def fail(self: object) -> Any:
        raise error(SECRET)

    fields: dict[str, Any] = {
        "type": "ai",
        "content": SECRET,
        "id": "m1",
        "name": None,
        "tool_calls": [],
        "tool_call_id": None,
        "additional_kwargs": {},
    }
    fields[field] = property(fail)
    return type(f"Raising_{field}", (), fields)()


def _nested(depth: int, leaf: Any = SECRET, *, key: str | None = None) -> Any:
    value = leaf
    for _ in range(depth):
        value = {key: value} if key is not None else [value]
    return value


def _call(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": SECRET, **fields}


#: (bad message, the field the error must name)
BAD: dict[str, tuple[Callable[[], object], str]] = {
    **{
        f"raising-{field}-{error.__name__}": (
            lambda field=field, error=error: _raising(field, error),  # type: ignore[misc]
            f"messages[{AT}].{field}",
        )
        for field in ("type", "content", "id", "name", "tool_calls", "tool_call_id")
        for error in (RuntimeError, KeyError, AttributeError)
    },
    "tool-calls-int": (lambda: _call(tool_calls=[1]), f"messages[{AT}].tool_calls[0]"),
    "tool-calls-none": (lambda: _call(tool_calls=[None]), f"messages[{AT}].tool_calls[0]"),
    "tool-calls-str": (lambda: _call(tool_calls="x"), f"messages[{AT}].tool_calls"),
    "tool-calls-second": (
        lambda: _call(tool_calls=[{"id": "c1", "name": "f", "args": {}}, "x"]),
        f"messages[{AT}].tool_calls[1]",
    ),
    "function-int": (
        lambda: _call(tool_calls=[{"id": "c1", "function": 3}]),
        f"messages[{AT}].tool_calls[0].function",
    ),
    "function-str": (
        lambda: _call(tool_calls=[{"id": "c1", "function": SECRET}]),
        f"messages[{AT}].tool_calls[0].function",
    ),
    "function-call-int": (lambda: _call(function_call=5), f"messages[{AT}].function_call"),
    "id-list": (lambda: {"role": "user", "content": SECRET, "id": [1]}, f"messages[{AT}].id"),
    "id-dict": (lambda: {"role": "user", "content": SECRET, "id": {"a": 1}}, f"messages[{AT}].id"),
    "call-id-list": (
        lambda: _call(tool_calls=[{"id": ["c"], "name": "f", "args": {}}]),
        f"messages[{AT}].tool_calls[0].id",
    ),
    "tool-call-id-list": (
        lambda: {"role": "tool", "content": SECRET, "tool_call_id": ["c"]},
        f"messages[{AT}].tool_call_id",
    ),
    "tool-use-id-dict": (
        lambda: {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": {"c": 1}, "content": SECRET}],
        },
        f"messages[{AT}].content[0].tool_use_id",
    ),
    "deep-json-block": (
        lambda: {"role": "user", "content": [{"type": "json", "json": _nested(5_000, key="k")}]},
        f"messages[{AT}].content[0].json.k",
    ),
    "deep-tool-results": (
        lambda: {"role": "user", "content": _results(5_000)},
        f"messages[{AT}].content[0].content[0]",
    ),
    "none": (lambda: None, f"messages[{AT}]"),
    "int": (lambda: 5, f"messages[{AT}]"),
}


def _results(depth: int) -> list[Any]:
    content: list[Any] = [{"type": "text", "text": SECRET}]
    for i in range(depth):
        content = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": content}]
    return content


def _history(bad: object) -> list[Any]:
    return [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "more"},
        bad,
        {"role": "user", "content": "end"},
    ]


ENTRIES: dict[str, Callable[[list[Any]], object]] = {
    "read_message": lambda h: read_message(h[AT], AT),
    "read_messages": read_messages,
    "validate_history": validate_history,
    "validate_history-anthropic": lambda h: validate_history(h, provider="anthropic"),
}


def _assert_names_index_and_field(error: BaseException, field: str) -> None:
    text = str(error)
    assert type(error) is MessageFormatError, repr(error)
    assert f"index {AT}" in text
    assert field in text
    assert SECRET not in text


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_bad_message_names_its_index_and_field(entry: str, bad: str) -> None:
    make, field = BAD[bad]
    with pytest.raises(MessageFormatError) as info:
        ENTRIES[entry](_history(make()))
    _assert_names_index_and_field(info.value, field)


def test_the_foreign_error_is_chained_not_quoted() -> None:
    with pytest.raises(MessageFormatError) as info:
        read_message(_raising("content", RuntimeError), 2)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "RuntimeError" in str(info.value) and SECRET not in str(info.value)


def test_ints_and_uuids_are_ids() -> None:
    import uuid

    ident = uuid.UUID(int=7)
    assert read_message({"role": "user", "content": "x", "id": 7}).id == "7"
    assert read_message({"role": "user", "content": "x", "id": ident}).id == str(ident)
    call = {"id": 9, "name": "f", "args": {}}
    assert read_message(_call(tool_calls=[call])).calls == ("9",)


def test_nesting_within_max_depth_is_read() -> None:
    shallow = {"role": "user", "content": [{"type": "json", "json": _nested(MAX_DEPTH)}]}
    assert read_message(shallow).texts
    assert validate_history(_history(shallow)) == []
