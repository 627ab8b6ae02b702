"""An edit never outlives its original (issue 25 item 1): a placeholder naming a handle
goes into the state only once the original is stored. A store that is down, a
``Background`` hook that fails, keep the original in the state, and a later reduce hands
it over again; inline hooks, ``Background``, ``store_hook`` and the outbox, sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from agentstate_reducer import ClearToolResults, MessageReducer, Offload, ReducerConfig
from agentstate_reducer.hooks import Background
from agentstate_reducer.langgraph import fetch_original, store_hook
from agentstate_reducer.outbox import AsyncOutboxHook, OutboxHook, SQLiteOutbox

NS = ("memories", "t-1")
LOG = "log line\n" * 3_000


def history() -> list[Any]:
    return [
        {"role": "user", "content": "fetch the log", "id": "u1"},
        {
            "role": "assistant",
            "content": None,
            "id": "a1",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": LOG, "id": "t1"},
        {"role": "assistant", "content": "done", "id": "a2"},
    ]


def reducer(hook: Any, edit: str = "offload") -> MessageReducer:
    clear = ClearToolResults(keep=0, trigger_messages=2)
    edits = [Offload(above=2_000)] if edit == "offload" else [clear]
    return MessageReducer(
        config=ReducerConfig(
            max_tokens=100_000,
            token_counter="approximate",
            context_edits=edits,
            on_prune=[hook],
        )
    )


def run(r: MessageReducer, messages: list[Any], is_async: bool) -> Any:
    if is_async:
        return asyncio.run(r.areduce(messages, namespace=NS))
    return r.reduce(messages, namespace=NS)


class FlakyStore(InMemoryStore):
    """A store that is down until ``up`` is set."""

    up = False

    def batch(self, ops: Any) -> Any:
        if not self.up:
            raise ConnectionError("store down")
        return super().batch(ops)

    async def abatch(self, ops: Any) -> Any:
        return self.batch(ops)


def tool_content(result: Any) -> str:
    return str(result.surviving[2]["content"])


@pytest.mark.parametrize("edit", ["offload", "clear"])
@pytest.mark.parametrize("is_async", [False, True])
def test_a_store_that_is_down_keeps_the_original(edit: str, is_async: bool) -> None:
    store = FlakyStore()
    r = reducer(store_hook(store), edit)
    first = run(r, history(), is_async)
    assert tool_content(first) == LOG  # the original stays: nothing names a lost handle
    assert first.edited == ()
    store.up = True
    # The next reduce (the state as the first left it) hands it over, then edits.
    second = run(r, first.surviving, is_async)
    assert len(second.edited) == 1 and tool_content(second) != LOG
    handle = second.edited[0].handle
    assert handle in tool_content(second)
    assert fetch_original(store, handle, namespace=NS) == LOG


@pytest.mark.parametrize("is_async", [False, True])
def test_a_working_store_edits_in_the_same_reduce(is_async: bool) -> None:
    store = InMemoryStore()
    r = reducer(store_hook(store))
    result = run(r, history(), is_async)
    assert len(result.edited) == 1 and tool_content(result) != LOG
    assert fetch_original(store, result.edited[0].handle, namespace=NS) == LOG


def test_a_failing_background_hook_keeps_the_original_until_it_is_stored() -> None:
    got: list[Any] = []
    down = [True]

    def remember(pruned: list[Any], namespace: Any) -> None:
        if down[0]:
            raise ConnectionError("store down")
        got.extend(pruned)

    with Background(remember) as hook:
        r = reducer(hook)
        first = r.reduce(history(), namespace=NS)
        assert tool_content(first) == LOG  # queued, not stored yet
        hook.join()  # it failed: released
        second = r.reduce(first.surviving, namespace=NS)  # handed over again
        assert tool_content(second) == LOG and second.edited == ()
        hook.join()  # the second attempt failed too
        down[0] = False
        third = r.reduce(second.surviving, namespace=NS)  # the third attempt is stored
        assert tool_content(third) == LOG
        hook.join()
        fourth = r.reduce(third.surviving, namespace=NS)
    assert len(fourth.edited) == 1 and tool_content(fourth) != LOG
    (original,) = got  # handed over until stored, stored once
    assert original["content"] == LOG and original["id"] == fourth.edited[0].handle
    assert hook.failed == 2


def test_a_background_hook_that_works_edits_once_it_ran() -> None:
    got: list[Any] = []
    with Background(lambda pruned, ns: got.extend(pruned)) as hook:
        r = reducer(hook)
        first = r.reduce(history(), namespace=NS)
        pending = r.reduce(first.surviving, namespace=NS)  # maybe not run yet: no repeat
        hook.join()
        done = r.reduce(pending.surviving, namespace=NS)
    # Edited only once it ran: queued, unless the worker stored it before the reduce returned.
    assert tool_content(first) == LOG or got
    # Edited by the first reduce after it ran (the second, if the worker was quick).
    assert len(pending.edited) + len(done.edited) == 1 and tool_content(done) != LOG
    assert len(got) == 1


@pytest.mark.parametrize("is_async", [False, True])
def test_the_outbox_stores_the_original_before_the_edit(tmp_path: Any, is_async: bool) -> None:
    outbox = SQLiteOutbox(str(tmp_path / "outbox.db"))
    hook = AsyncOutboxHook(outbox) if is_async else OutboxHook(outbox)
    try:
        result = run(reducer(hook), history(), is_async)
        assert len(result.edited) == 1
        handle = result.edited[0].handle
        assert outbox.original(handle, NS) == LOG
    finally:
        outbox.close()


def test_an_over_budget_state_that_keeps_an_original_says_so() -> None:
    store = FlakyStore()
    r = MessageReducer(
        config=ReducerConfig(
            max_tokens=3_000,
            token_counter="approximate",
            context_edits=[Offload(above=2_000)],
            on_prune=[store_hook(store)],
        )
    )
    result = r.reduce(history(), namespace=NS)
    assert tool_content(result) == LOG
    assert sum(r.count_tokens(result.surviving)) > 3_000
    assert result.over_budget and "original not stored yet" in result.over_because
