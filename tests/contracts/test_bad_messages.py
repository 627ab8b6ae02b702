"""A bad message raises a MessageFormatError naming its index and field, never its content.

Every entry point x every bad input the reader can meet: a foreign object whose attribute
raises, tool calls that are not mappings, ids that are no ids, nesting too deep to read,
and messages that are no messages at all.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentstate_reducer import (
    ClearToolResults,
    MessageFormatError,
    MessageReducer,
    ReducerConfig,
    check_history,
    trim_messages,
    validate_history,
)
from agentstate_reducer.read import MAX_DEPTH, read_message, read_messages

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
BAD: dict[str, tuple[Callable[[], object], str | tuple[str, ...]]] = {
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
    "function-call-int": (
        lambda: _call(function_call=5),
        # LangChain keeps it in additional_kwargs once it made a message of the dict.
        (f"messages[{AT}].function_call", f"messages[{AT}].additional_kwargs.function_call"),
    ),
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


def _reducer(**options: Any) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(**{"min_messages": 1, **options}))


def _count_mode(**options: Any) -> MessageReducer:
    return _reducer(max_messages=2, **options)


def _token_mode(counter: str = "approximate", **options: Any) -> MessageReducer:
    return _reducer(max_messages=None, max_tokens=40, token_counter=counter, **options)


def _one_message(message: dict[str, Any]) -> int:  # a per-message counter (annotated)
    return 1


def _summary(messages: list[Any]) -> str:
    return "what happened"


def _trim(**options: Any) -> Callable[[list[Any]], object]:
    return lambda h: trim_messages(h, max_tokens=1_000, **options)


def _langgraph() -> Any:
    return pytest.importorskip("agentstate_reducer.langgraph")


def _merge(reducer: MessageReducer) -> Callable[[list[Any]], object]:
    return lambda h: _langgraph().reducing_add_messages(reducer)(h[:AT], h[AT:])


def _middleware(
    reducer: MessageReducer, run: str = "before_model"
) -> Callable[[list[Any]], object]:
    def call(h: list[Any]) -> object:
        middleware = _langgraph().ReducingMiddleware(reducer)
        if run == "abefore_model":
            return asyncio.run(middleware.abefore_model({"messages": h}, None))
        return middleware.before_model({"messages": h}, None)

    return call


def _saver(reducer: MessageReducer) -> Callable[[list[Any]], object]:
    def put(h: list[Any]) -> object:
        from langgraph.checkpoint.base import empty_checkpoint
        from langgraph.checkpoint.memory import InMemorySaver

        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": h}
        checkpoint["channel_versions"] = {"messages": 1}
        saver = _langgraph().ReducingSaver(InMemorySaver(), reducer)
        thread = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        return saver.put(thread, checkpoint, {}, {"messages": 1})

    return put


def _pre_model_hook(reducer: MessageReducer) -> Callable[[list[Any]], object]:
    return lambda h: _langgraph().reducing_pre_model_hook(reducer).invoke({"messages": h})


#: Entry points that count tokens: they walk a tool call's arguments too.
TOKEN_ENTRIES: dict[str, Callable[[list[Any]], object]] = {
    "trim-approximate-last": _trim(token_counter="approximate"),
    "trim-approximate-first": _trim(token_counter="approximate", strategy="first"),
    "trim-approximate-partial": _trim(token_counter="approximate", allow_partial=True),
    "trim-exact": _trim(token_counter="o200k_base"),
    "trim-exact-first-partial": _trim(
        token_counter="o200k_base", strategy="first", allow_partial=True
    ),
    "reduce-tokens": lambda h: _token_mode().reduce(h),
    "reduce-tokens-exact": lambda h: _token_mode("o200k_base").reduce(h),
    "reduce-tokens-new": lambda h: _token_mode().reduce(h[:AT], h[AT:]),
    "reduce-tokens-edits": lambda h: _token_mode(context_edits=[ClearToolResults(keep=0)]).reduce(
        h
    ),
    "reduce-tokens-summary": lambda h: _token_mode(
        summarize_fn=_summary, inject_summary=True
    ).reduce(h),
    "areduce-tokens": lambda h: asyncio.run(_token_mode().areduce(h)),
    "areduce-tokens-edits": lambda h: asyncio.run(
        _token_mode(context_edits=[ClearToolResults(keep=0)]).areduce(h)
    ),
    "count_tokens": lambda h: _token_mode().count_tokens(h),
    "count_tokens-exact": lambda h: _token_mode("o200k_base").count_tokens(h),
    "count_tokens-count-mode": lambda h: _count_mode().count_tokens(h),
    "plan-tokens": lambda h: _token_mode().plan(h),
    "langgraph-merge-tokens": lambda h: _merge(_token_mode())(h),
    "langgraph-middleware-tokens": lambda h: _middleware(_token_mode())(h),
    "langgraph-saver-tokens": lambda h: _saver(_token_mode())(h),
}

#: Every entry point: each reads every message of these histories.
ENTRIES: dict[str, Callable[[list[Any]], object]] = {
    "read_message": lambda h: read_message(h[AT], AT),
    "read_messages": read_messages,
    "validate_history": validate_history,
    "validate_history-anthropic": lambda h: validate_history(h, provider="anthropic"),
    "check_history": check_history,
    "trim-len": _trim(token_counter=len),
    "trim-len-first": _trim(token_counter=len, strategy="first"),
    "trim-per-message": _trim(token_counter=_one_message),
    "trim-no-pairs": _trim(token_counter="approximate", keep_tool_pairs=False),
    "reduce-count": lambda h: _count_mode().reduce(h),
    "reduce-count-new": lambda h: _count_mode().reduce(h[:AT], h[AT:]),
    "reduce-count-edits": lambda h: _count_mode(context_edits=[ClearToolResults(keep=0)]).reduce(
        h
    ),
    "reduce-count-summary": lambda h: _count_mode(
        summarize_fn=_summary, inject_summary=True
    ).reduce(h),
    "areduce-count": lambda h: asyncio.run(_count_mode().areduce(h)),
    "areduce-count-summary": lambda h: asyncio.run(
        _count_mode(summarize_fn=_summary, inject_summary=True).areduce(h)
    ),
    "langgraph-merge": lambda h: _merge(_count_mode())(h),
    "langgraph-middleware": lambda h: _middleware(_count_mode())(h),
    "langgraph-middleware-async": lambda h: _middleware(_count_mode(), "abefore_model")(h),
    "langgraph-saver": lambda h: _saver(_count_mode())(h),
    "langgraph-pre-model-hook": lambda h: _pre_model_hook(_count_mode())(h),
    **TOKEN_ENTRIES,
}

#: Arguments too deep for their JSON: read everywhere, refused where they are counted.
DEEP_ARGS: dict[str, tuple[Callable[[], object], str | tuple[str, ...]]] = {
    "deep-openai-arguments": (
        lambda: _call(
            content="",
            tool_calls=[
                {"id": "c9", "type": "function",
                 "function": {"name": "f", "arguments": _nested(5_000, key="k")}}
            ],
        ),
        # LangChain's AIMessage keeps them as the call's args.
        (f"messages[{AT}].tool_calls[0].function.arguments", f"messages[{AT}].tool_calls[0].args"),
    ),
    "deep-langchain-args": (
        lambda: _call(
            content="", tool_calls=[{"id": "c9", "name": "f", "args": _nested(5_000, key="k")}]
        ),
        f"messages[{AT}].tool_calls[0].args",
    ),
    "deep-tool-use-input": (
        lambda: _call(
            content=[{"type": "tool_use", "id": "c9", "name": "f",
                      "input": _nested(5_000, key="k")}],
        ),
        f"messages[{AT}].content[0].input",
    ),
}


def _assert_names_index_and_field(error: BaseException, field: str | tuple[str, ...]) -> None:
    text = str(error)
    assert type(error) is MessageFormatError, repr(error)
    assert f"index {AT}" in text
    assert any(f in text for f in ((field,) if isinstance(field, str) else field)), text
    assert SECRET not in text


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_bad_message_names_its_index_and_field(entry: str, bad: str) -> None:
    make, field = BAD[bad]
    with pytest.raises(MessageFormatError) as info:
        ENTRIES[entry](_history(make()))
    _assert_names_index_and_field(info.value, field)


@pytest.mark.parametrize("entry", sorted(TOKEN_ENTRIES))
@pytest.mark.parametrize("bad", sorted(DEEP_ARGS))
def test_arguments_too_deep_to_count_name_their_index_and_field(entry: str, bad: str) -> None:
    make, field = DEEP_ARGS[bad]
    with pytest.raises(MessageFormatError) as info:
        TOKEN_ENTRIES[entry](_history(make()))
    _assert_names_index_and_field(info.value, field)


@pytest.mark.parametrize("entry", ["validate_history", "trim-len", "reduce-count",
                                   "reduce-count-summary", "langgraph-merge"])
@pytest.mark.parametrize("bad", sorted(DEEP_ARGS))
def test_deep_arguments_are_read_where_nothing_counts_them(entry: str, bad: str) -> None:
    ENTRIES[entry](_history(DEEP_ARGS[bad][0]()))


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


def _within_max_depth() -> dict[str, Any]:
    """An ai message whose content and call arguments nest as deep as MAX_DEPTH allows,
    counted from the message (``.content[0].json`` is three levels)."""
    return _call(
        content=[{"type": "json", "json": _nested(MAX_DEPTH - 4)}],
        tool_calls=[{"id": "c9", "name": "f", "args": _nested(MAX_DEPTH - 5, key="k")}],
    )


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_nesting_within_max_depth_is_read_everywhere(entry: str) -> None:
    history = _history(_within_max_depth())
    history.insert(AT + 1, {"role": "tool", "tool_call_id": "c9", "content": "done"})
    ENTRIES[entry](history)


def test_nesting_within_max_depth_is_stored_by_the_outbox(tmp_path: Path) -> None:
    from agentstate_reducer.outbox import SQLiteOutbox

    outbox = SQLiteOutbox(str(tmp_path / "outbox.db"))
    try:
        assert outbox.enqueue([_within_max_depth()]) == 1
    finally:
        outbox.close()


# -- the command line -------------------------------------------------------------------

#: The bad messages a JSON file can hold.
JSON_BAD = sorted(
    name
    for name in BAD
    if name.startswith(("tool-calls", "function", "id-", "call-id", "tool-call-id", "tool-use"))
)
COMMANDS = {
    "count": ["count"],
    "reduce": ["reduce", "--max-messages", "2"],
    "trim": ["trim", "--max-tokens", "1000"],
}


def _run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from agentstate_reducer import cli

    with pytest.raises(SystemExit) as info:
        cli.main(args, prog="agentstate-reducer")
    return int(info.value.code or 0), capsys.readouterr().err


def _documents(history: list[Any]) -> dict[str, str]:
    return {
        "list": json.dumps(history),
        "request": json.dumps({"model": "m", "messages": history}),
        # The system message is planned first: the error still counts as the file does.
        "anthropic": json.dumps({"model": "m", "system": "be brief", "messages": history}),
        "jsonl": "\n".join(json.dumps(m) for m in history) + "\n",
    }


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("shape", ["list", "request", "anthropic", "jsonl"])
@pytest.mark.parametrize("bad", JSON_BAD)
def test_the_cli_names_the_index_and_field(
    bad: str, shape: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, field = BAD[bad]
    path = tmp_path / "request.json"
    path.write_text(_documents(_history(make()))[shape], encoding="utf-8")
    status, err = _run_cli([*COMMANDS[command], str(path)], capsys)
    assert status == 1
    assert f"index {AT}" in err and "Traceback" not in err and SECRET not in err
    assert any(f in err for f in ((field,) if isinstance(field, str) else field)), err
    if shape == "jsonl":
        assert f"(line {AT + 1})" in err


def _deep_json(depth: int) -> str:
    return "[" * depth + '"' + SECRET + '"' + "]" * depth


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("shape", ["list", "request", "jsonl"])
def test_the_cli_refuses_a_file_too_deep_to_parse_with_a_clear_error(
    shape: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = '{"role": "user", "content": [{"type": "json", "json": ' + _deep_json(5_000) + "}]}"
    first = '{"role": "user", "content": "hi"}'
    text = {
        "list": f"[{first}, {deep}]",
        "request": f'{{"messages": [{first}, {deep}]}}',
        "jsonl": f"{first}\n{deep}\n",
    }[shape]
    path = tmp_path / "deep.json"
    path.write_text(text, encoding="utf-8")
    status, err = _run_cli([*COMMANDS[command], str(path)], capsys)
    assert status == 1
    assert "nested too deeply" in err and f"within {MAX_DEPTH} levels" in err
    assert "Traceback" not in err and SECRET not in err
    if shape == "jsonl":
        assert "line 2" in err


# -- the outbox -------------------------------------------------------------------------


class _Secret:
    def __repr__(self) -> str:
        return SECRET


@pytest.mark.parametrize("run", ["reduce", "areduce"])
def test_an_unstorable_message_is_named_by_its_index_in_existing_and_new(
    run: str, tmp_path: Path
) -> None:
    from agentstate_reducer import UnstorableError
    from agentstate_reducer.outbox import AsyncOutboxHook, OutboxHook, SQLiteOutbox

    outbox = SQLiteOutbox(str(tmp_path / "outbox.db"))
    hook = OutboxHook(outbox) if run == "reduce" else AsyncOutboxHook(outbox)
    reducer = _reducer(max_messages=3, on_prune=[hook])
    history = [{"role": "user", "content": f"m{i}", "id": f"m{i}"} for i in range(6)]
    history[AT] = {**history[AT], "when": _Secret()}
    try:
        def reduce(existing: list[Any], new: list[Any]) -> object:
            if run == "reduce":
                return reducer.reduce(existing, new)
            return asyncio.run(reducer.areduce(existing, new))

        # Delivered once already: the ledger leaves m1 out of the next batch.
        reduce(history[:2], [{"role": "user", "content": "x", "id": "x"}] * 2)
        with pytest.raises(UnstorableError) as info:
            reduce(history[:2], history[2:])
    finally:
        outbox.close()
    text = str(info.value)
    assert info.value.index == AT
    assert text.startswith(f"message at index {AT} of existing + new (index {AT - 2} of ")
    assert "field ['when']" in text and "_Secret" in text and SECRET not in text


@pytest.mark.parametrize("edit", ["clear", "offload"])
@pytest.mark.parametrize("run", ["reduce", "areduce"])
def test_an_unstorable_edited_original_is_named_by_its_index_in_existing_and_new(
    run: str, edit: str, tmp_path: Path
) -> None:
    from agentstate_reducer import Offload, UnstorableError
    from agentstate_reducer.outbox import AsyncOutboxHook, OutboxHook, SQLiteOutbox

    outbox = SQLiteOutbox(str(tmp_path / "outbox.db"))
    hook = OutboxHook(outbox) if run == "reduce" else AsyncOutboxHook(outbox)
    edits = (
        [ClearToolResults(keep=0, trigger_messages=1)]
        if edit == "clear"
        else [Offload(above=10, head=2, tail=2)]
    )
    # a1 is pruned; the edited original of t4 travels after it in the batch.
    reducer = _reducer(max_messages=4, context_edits=edits, on_prune=[hook])
    history: list[Any] = [
        {"role": "user", "content": "look it up", "id": "u0"},
        {"role": "assistant", "content": "which one?", "id": "a1"},
        {"role": "user", "content": "the first", "id": "u2"},
        _call(content="", id="a3", tool_calls=[{"id": "c1", "name": "f", "args": {}}]),
        {"role": "tool", "tool_call_id": "c1", "id": "t4", "content": "lorem ipsum " * 100,
         "when": _Secret()},
        {"role": "assistant", "content": "done", "id": "a5"},
    ]
    try:
        with pytest.raises(UnstorableError) as info:
            if run == "reduce":
                reducer.reduce(history[:2], history[2:])
            else:
                asyncio.run(reducer.areduce(history[:2], history[2:]))
    finally:
        outbox.close()
    text = str(info.value)
    assert info.value.index == 4, text
    assert text.startswith("message at index 4 of existing + new (index 1 of "), text
    assert "field ['when']" in text and SECRET not in text
