"""Checked by mypy --strict (tests/contracts/test_result_types.py), never run: what a reduce
is typed as."""

from __future__ import annotations

from typing import Any

from typing_extensions import assert_type

from agentstate_reducer import MessageReducer, ReducerResult


class Message:
    """A message class of the user's own (duck-typed messages are read too)."""

    def __init__(self, content: str) -> None:
        self.content = content


async def check(reducer: MessageReducer) -> None:
    dicts: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    result = reducer.reduce(dicts)
    assert_type(result, ReducerResult[dict[str, Any]])
    assert_type(result.surviving, list[dict[str, Any]])
    assert_type(result.pruned, list[dict[str, Any]])
    assert_type(result.repaired, list[dict[str, Any]])
    # existing + new, by position or keyword, and a tuple.
    assert_type(reducer.reduce(dicts, [{"role": "user", "content": "more"}]).surviving,
                list[dict[str, Any]])
    assert_type(reducer.reduce(existing=dicts, new=dicts), ReducerResult[dict[str, Any]])
    assert_type(reducer.reduce(None, dicts), ReducerResult[dict[str, Any]])
    assert_type(reducer.reduce(tuple(dicts)), ReducerResult[dict[str, Any]])
    objects = [Message("hi"), Message("there")]
    assert_type(reducer.reduce(objects).surviving, list[Message])
    assert_type((await reducer.areduce(objects)).surviving, list[Message])
    assert_type(await reducer.areduce(dicts, namespace="ns"), ReducerResult[dict[str, Any]])
    # A list and one more message: typed by the list.
    assert_type(reducer.reduce(dicts, {"role": "user", "content": "one"}).surviving,
                list[dict[str, Any]])
    assert_type(reducer.reduce(objects, Message("one")).surviving, list[Message])
    # One lone message (a dict is never a sequence of its keys), or none: typed loosely.
    assert_type(reducer.reduce(dicts[0]), ReducerResult[Any])
    assert_type(reducer.reduce(None, Message("one")), ReducerResult[Any])
    assert_type(reducer.reduce(), ReducerResult[Any])
    # The documented fields keep their types.
    assert_type(result.summary, str | None)
    assert_type(result.tokens_after, int | None)
    assert_type(result.pruned_by_reason, dict[str, int])
