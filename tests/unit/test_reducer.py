"""MessageReducer: the documented API, summaries, hooks, async, and its laws on real messages."""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
from typing import Annotated, Any, TypedDict

import pytest
from histories import ai, histories, human, results, system
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from strategies import histories as valid_histories

from agentstate_reducer import (
    DEFAULT_NAMESPACE_KEY,
    MessageFormatError,
    MessageReducer,
    OutboxError,
    ReducerConfig,
    ReducerResult,
)
from agentstate_reducer.read import read_message


def msgs(n: int, *, first: str = "system") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": first, "content": "sys", "id": "s"}]
    for i in range(n):
        out.append(
            {"role": "user" if i % 2 == 0 else "assistant", "content": str(i), "id": f"m{i}"}
        )
    return out


def contents(messages: list[Any]) -> list[Any]:
    return [m["content"] if isinstance(m, dict) else m.content for m in messages]


# -- construction ----------------------------------------------------------------------


def test_message_reducer_defaults_never_prune() -> None:
    reducer = MessageReducer()
    assert reducer.config.min_messages == 0
    assert reducer.config.max_messages is None
    assert reducer.reduce(existing=msgs(500)).pruned == []


def test_reducer_config_defaults_match_the_api_page() -> None:
    cfg = ReducerConfig()
    assert (cfg.min_messages, cfg.max_messages) == (10, 20)
    assert cfg.max_tokens is None and cfg.target_tokens is None and cfg.token_counter is None
    assert cfg.preserve_first and cfg.cascade_tool_messages
    assert cfg.summarize_fn is None and not cfg.inject_summary
    assert cfg.summary_message_factory is None
    assert cfg.on_prune == []
    assert cfg.namespace_key == DEFAULT_NAMESPACE_KEY == "memory_namespace"
    assert cfg.dedupe_on_prune and cfg.dedupe_window == 10_000


def test_config_overrides_positional_counts() -> None:
    reducer = MessageReducer(1, 2, config=ReducerConfig(min_messages=3, max_messages=4))
    assert (reducer.config.min_messages, reducer.config.max_messages) == (3, 4)


def test_settings_are_read_only_attributes() -> None:
    """0.5.0 users read reducer.min_messages / max_messages; every config field reads so."""
    hook = lambda pruned, namespace: None  # noqa: E731
    config = ReducerConfig(min_messages=3, max_messages=6, on_prune=[hook], start_on="human")
    reducer = MessageReducer(config=config)
    for name in ReducerConfig.__dataclass_fields__:
        assert getattr(reducer, name) == getattr(config, name), name
    assert (MessageReducer(2, 5).min_messages, MessageReducer(2, 5).max_messages) == (2, 5)
    assert (MessageReducer().min_messages, MessageReducer().max_messages) == (0, None)
    with pytest.raises(AttributeError, match="min_messages is read-only"):
        reducer.min_messages = 4  # type: ignore[misc]
    # A copy: appending to it cannot add a hook behind the reducer's back.
    reducer.on_prune.append(hook)
    assert reducer.config.on_prune == [hook]


def test_config_must_be_a_reducer_config() -> None:
    with pytest.raises(TypeError, match="ReducerConfig"):
        MessageReducer(config={"max_messages": 3})  # type: ignore[arg-type]


# -- count mode, as the seed page writes it -----------------------------------------------


def test_seed_basic_usage() -> None:
    reducer = MessageReducer(min_messages=10, max_messages=20)
    history = msgs(20)
    result = reducer.reduce(existing=history, new=[{"role": "user", "content": "new"}])
    assert isinstance(result, ReducerResult)
    assert len(result.surviving) == 10 + 1
    assert result.surviving[0] is history[0]
    assert result.surviving[-1]["content"] == "new"
    assert result.pruned == history[1:12]


def test_seed_tool_call_cascade_example() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "ai", "content": "", "tool_calls": [{"id": "tc1"}]},
        {"role": "tool", "content": "result", "tool_call_id": "tc1"},
    ] + [{"role": "human", "content": str(i)} for i in range(6)]
    result = MessageReducer(min_messages=6, max_messages=8).reduce(existing=messages)
    assert result.pruned == messages[1:3]
    assert all(m.get("role") != "tool" for m in result.surviving)


def test_openai_lists_work_with_no_conversion() -> None:
    history = [{"role": "system", "content": "s"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": str(i)} for i in range(10)
    ]
    result = MessageReducer(min_messages=4, max_messages=6).reduce(existing=history)
    assert contents(result.surviving) == ["s", "6", "7", "8", "9"]


def test_langchain_messages() -> None:
    history = [SystemMessage("s", id="s")]
    for i in range(4):
        history += [
            HumanMessage(f"q{i}", id=f"h{i}"),
            AIMessage("", id=f"a{i}", tool_calls=[{"id": f"t{i}", "name": "f", "args": {}}]),
            ToolMessage(f"r{i}", tool_call_id=f"t{i}", id=f"x{i}"),
            AIMessage(f"done {i}", id=f"d{i}"),
        ]
    result = MessageReducer(min_messages=5, max_messages=10).reduce(existing=history)
    # The window [1, 12) ends on turn 2's tool result: its call goes, so the result goes too.
    assert [m.id for m in result.surviving] == ["s", "d2", "h3", "a3", "x3", "d3"]
    assert [m.id for m in result.pruned][-3:] == ["h2", "a2", "x2"]


def test_reduce_accepts_none_one_message_or_a_list() -> None:
    reducer = MessageReducer(min_messages=1, max_messages=3)
    one = {"role": "user", "content": "x"}
    assert reducer.reduce().surviving == []
    assert reducer.reduce(existing=None, new=one).surviving == [one]
    assert reducer.reduce(existing=one, new=(one,)).surviving == [one, one]


def test_reduce_never_mutates_inputs() -> None:
    existing = [system("openai", "s", "s")]
    for k in range(5):
        existing += [human("openai", "q", f"h{k}"), ai("openai", "", f"a{k}", [f"c{k}"])]
        existing += results("openai", [f"c{k}"], f"r{k}")
        existing.append(ai("openai", "done", f"d{k}"))
    new = [human("openai", "last", "h9")]
    snapshot = copy.deepcopy((existing, new))
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            summarize_fn=lambda pruned: "sum",
            inject_summary=True,
            on_prune=[lambda pruned, ns: pruned.clear()],
        )
    )
    result = reducer.reduce(existing=existing, new=new)
    assert (existing, new) == snapshot
    assert result.pruned  # the hook got a copy: clearing it did not touch the result


def test_unreadable_message_raises_type_error_naming_index() -> None:
    with pytest.raises(MessageFormatError, match="index 2"):
        MessageReducer(min_messages=0, max_messages=1).reduce(
            existing=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            new=[object()],
        )
    with pytest.raises(TypeError, match="index 0"):
        MessageReducer().reduce(new="just a string")


def test_unknown_roles_are_kept() -> None:
    history = [{"role": "critic", "content": str(i)} for i in range(10)]
    assert MessageReducer(min_messages=1, max_messages=2).reduce(existing=history).pruned == []


# -- token mode ----------------------------------------------------------------------------


def test_token_mode_takes_precedence_and_reserves_the_first_message() -> None:
    history = msgs(10)
    cfg = ReducerConfig(min_messages=0, max_messages=1, max_tokens=50, token_counter=lambda m: 10)
    result = MessageReducer(config=cfg).reduce(existing=history)
    assert len(result.surviving) == 5  # 1 first + 4 recent = 50 tokens
    assert result.surviving[0] is history[0]


def test_token_mode_hysteresis_gives_headroom() -> None:
    counter = lambda m: 10  # noqa: E731
    reducer = MessageReducer(
        config=ReducerConfig(max_tokens=100, target_tokens=60, token_counter=counter)
    )
    history = msgs(9)  # 100 tokens: at the limit, nothing happens
    assert reducer.reduce(existing=history).pruned == []
    result = reducer.reduce(existing=history, new=[{"role": "user", "content": "x"}])
    assert len(result.surviving) == 6
    # The next five appends fit under max_tokens again: no prune on each update.
    state = result.surviving
    for i in range(4):
        step = reducer.reduce(existing=state, new=[{"role": "user", "content": str(i)}])
        assert step.pruned == []
        state = step.surviving


def test_token_mode_never_truncates_content() -> None:
    big = {"role": "user", "content": "x" * 4000, "id": "big"}
    reducer = MessageReducer(config=ReducerConfig(max_tokens=50, token_counter="approximate"))
    result = reducer.reduce(existing=[{"role": "system", "content": "s"}], new=[big])
    assert result.pruned == [big]
    assert result.pruned[0]["content"] == "x" * 4000


# -- summaries -----------------------------------------------------------------------------


def test_summary_runs_only_when_something_was_pruned() -> None:
    calls: list[int] = []

    def summarize(pruned: list[Any]) -> str:
        calls.append(len(pruned))
        return "sum"

    reducer = MessageReducer(
        config=ReducerConfig(min_messages=2, max_messages=4, summarize_fn=summarize)
    )
    assert reducer.reduce(existing=msgs(3)).summary is None
    result = reducer.reduce(existing=msgs(6))
    assert result.summary == "sum"
    assert calls == [4]


def test_failing_summarize_without_injection_prunes_and_leaves_none(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def boom(pruned: list[Any]) -> str:
        raise RuntimeError("model down")

    reducer = MessageReducer(
        config=ReducerConfig(min_messages=2, max_messages=4, summarize_fn=boom)
    )
    with caplog.at_level(logging.WARNING, logger="agentstate_reducer"):
        result = reducer.reduce(existing=msgs(6))
    assert result.summary is None and result.summary_failed
    assert len(result.surviving) == 3  # the seed's behaviour: pruned all the same
    assert "summarize_fn failed" in caplog.text


def test_injected_summary_sits_where_the_pruned_block_was() -> None:
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            summarize_fn=lambda pruned: f"{len(pruned)} gone",
            inject_summary=True,
        )
    )
    result = reducer.reduce(existing=msgs(6))
    roles = [m["role"] for m in result.surviving]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert "4 gone" in result.surviving[1]["content"]
    assert result.surviving[2]["content"] == "OK"
    assert contents(result.surviving[3:]) == ["4", "5"]


def test_previous_summary_is_folded_into_the_next() -> None:
    seen: list[list[Any]] = []

    def summarize(pruned: list[Any]) -> str:
        seen.append(pruned)
        return f"summary {len(seen)}"

    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2, max_messages=5, summarize_fn=summarize, inject_summary=True
        )
    )
    state = reducer.reduce(existing=msgs(6)).surviving
    state = reducer.reduce(existing=state, new=msgs(4)[1:]).surviving
    assert any("summary 1" in str(m["content"]) for m in seen[1])
    assert sum("Summary of" in str(m["content"]) for m in state) == 1


def test_default_summary_matches_langchain_messages() -> None:
    history = [SystemMessage("s")] + [
        (HumanMessage if i % 2 == 0 else AIMessage)(str(i), id=str(i)) for i in range(6)
    ]
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2, max_messages=4, summarize_fn=lambda p: "sum", inject_summary=True
        )
    )
    block = reducer.reduce(existing=history).surviving[1:3]
    assert isinstance(block[0], HumanMessage) and "sum" in block[0].content
    assert isinstance(block[1], AIMessage) and block[1].content == "OK"
    assert block[0].id and block[1].id


def test_default_summary_keeps_langchain_dict_role_names() -> None:
    history = [{"role": "system", "content": "s"}] + [
        {"role": "human" if i % 2 == 0 else "ai", "content": str(i)} for i in range(6)
    ]
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2, max_messages=4, summarize_fn=lambda p: "sum", inject_summary=True
        )
    )
    block = reducer.reduce(existing=history).surviving[1:3]
    assert [m["role"] for m in block] == ["human", "ai"]


def test_custom_summary_factory() -> None:
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            summarize_fn=lambda p: "sum",
            inject_summary=True,
            summary_message_factory=lambda text, n: [{"role": "system", "content": f"{n}:{text}"}],
        )
    )
    assert reducer.reduce(existing=msgs(6)).surviving[1] == {"role": "system", "content": "4:sum"}


# -- on_prune hooks --------------------------------------------------------------------------


def test_hooks_run_in_order_with_the_namespace() -> None:
    log: list[tuple[str, int, Any]] = []
    cfg = ReducerConfig(
        min_messages=2,
        max_messages=4,
        summarize_fn=lambda p: log.append(("summary", len(p), None)) or "s",
        on_prune=[
            lambda p, ns: log.append(("first", len(p), ns)),
            lambda p, ns: log.append(("second", len(p), ns)),
        ],
    )
    reducer = MessageReducer(config=cfg)
    reducer.reduce(existing=msgs(6), namespace=("memories", "u1"))
    assert log == [
        ("summary", 4, None),
        ("first", 4, ("memories", "u1")),
        ("second", 4, ("memories", "u1")),
    ]
    log.clear()
    MessageReducer(config=cfg).reduce(existing=msgs(6))
    assert log[1][2] is None


def test_raising_hook_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    got: list[Any] = []

    def bad(pruned: list[Any], ns: Any) -> None:
        raise ValueError("store down")

    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2, max_messages=4, on_prune=[bad, lambda p, ns: got.extend(p)]
        )
    )
    with caplog.at_level(logging.ERROR, logger="agentstate_reducer"):
        result = reducer.reduce(existing=msgs(6))
    assert got == result.pruned
    assert "on_prune[0] failed" in caplog.text


def test_outbox_error_from_a_hook_propagates_and_a_retry_delivers_again() -> None:
    calls: list[list[Any]] = []

    def durable(pruned: list[Any], ns: Any) -> None:
        calls.append(pruned)
        if len(calls) == 1:
            raise OutboxError("the database is down")

    config = ReducerConfig(min_messages=2, max_messages=4, on_prune=[durable])
    reducer = MessageReducer(config=config)
    with pytest.raises(OutboxError, match="down"):
        reducer.reduce(existing=msgs(6))
    result = reducer.reduce(existing=msgs(6))  # the caller retries: the ledger forgot the ids
    assert calls == [result.pruned, result.pruned]


async def test_outbox_error_from_an_async_hook_propagates_too() -> None:
    calls: list[list[Any]] = []

    async def durable(pruned: list[Any], ns: Any) -> None:
        calls.append(pruned)
        if len(calls) == 1:
            raise OutboxError("the database is down")

    config = ReducerConfig(min_messages=2, max_messages=4, on_prune=[durable])
    reducer = MessageReducer(config=config)
    with pytest.raises(OutboxError):
        await reducer.areduce(existing=msgs(6))
    result = await reducer.areduce(existing=msgs(6))
    assert calls == [result.pruned, result.pruned]


def test_dedupe_delivers_each_id_once_but_never_filters_pruned() -> None:
    got: list[Any] = []
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[lambda p, ns: got.extend(p)])
    )
    history = msgs(6)
    first = reducer.reduce(existing=history)
    second = reducer.reduce(existing=history)  # the same history again: same ids pruned
    assert first.pruned == second.pruned == history[1:5]
    assert got == history[1:5]


def test_messages_without_ids_are_keyed_by_their_place_within_their_namespace() -> None:
    got: list[tuple[Any, Any]] = []
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2, max_messages=4, on_prune=[lambda p, ns: got.extend((ns, m) for m in p)]
        )
    )
    history = [{"role": "user", "content": str(i)} for i in range(7)]
    reducer.reduce(existing=history, namespace="a")
    reducer.reduce(existing=history, namespace="a")  # a replay: nothing new
    assert [m["content"] for _, m in got] == ["1", "2", "3", "4"]
    reducer.reduce(existing=history, namespace="b")  # another namespace: delivered
    edited = [history[0], {"role": "user", "content": "1!"}, *history[2:]]
    # New content: delivered, and so is what follows it (another place in another
    # conversation: nothing with an id ties it to the first).
    reducer.reduce(existing=edited, namespace="a")
    assert [(ns, m["content"]) for ns, m in got[4:]] == [
        ("b", "1"), ("b", "2"), ("b", "3"), ("b", "4"),
        ("a", "1!"), ("a", "2"), ("a", "3"), ("a", "4"),
    ]
    with_ids = [{**m, "id": f"m{i}"} if i == 2 else m for i, m in enumerate(history)]
    reducer.reduce(existing=with_ids, namespace="c")
    got.clear()
    changed = [with_ids[0], {"role": "user", "content": "1?"}, *with_ids[2:]]
    reducer.reduce(existing=changed, namespace="c")  # behind an id, a change stays local
    assert [m["content"] for _, m in got] == ["1?"]


def test_one_reducer_serves_threads_whose_ids_collide() -> None:
    """Per-thread ids like "msg-1": each namespace's messages reach the hooks."""
    got: list[tuple[Any, str]] = []
    lock = threading.Lock()

    def hook(pruned: list[Any], ns: Any) -> None:
        with lock:
            got.extend((ns, m["id"]) for m in pruned)

    reducer = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[hook]))
    history = [{"role": "user", "content": f"{i}", "id": f"msg-{i}"} for i in range(6)]
    pruned = [reducer.reduce(history, namespace=("memories", t)).pruned for t in ("t1", "t2")]
    assert pruned[0] == pruned[1] and len(pruned[0]) == 3
    assert got == [(("memories", t), m["id"]) for t in ("t1", "t2") for m in pruned[0]]


def test_ids_one_and_string_one_are_two_messages() -> None:
    got: list[Any] = []
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=0, max_messages=0, on_prune=[lambda p, ns: got.extend(p)])
    )
    for ident in (1, "1", 1, "1"):
        reducer.reduce(existing=[{"role": "system", "content": "s"}], new=[
            {"role": "user", "content": "x", "id": ident}
        ])
    assert [m["id"] for m in got] == [1, "1"]


def test_a_failed_hook_releases_the_batch_for_the_next_reduce(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[list[str]] = []

    def flaky(pruned: list[Any], ns: Any) -> None:
        calls.append([m["id"] for m in pruned])
        if len(calls) == 1:
            raise ValueError("secret content: hunter2")

    reducer = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[flaky]))
    with caplog.at_level(logging.ERROR, logger="agentstate_reducer"):
        reducer.reduce(existing=msgs(6))
    reducer.reduce(existing=msgs(6))  # replayed: handed over again, this time stored
    reducer.reduce(existing=msgs(6))  # and then never again
    assert calls == [["m0", "m1", "m2", "m3"]] * 2
    # The log names ids and the error type, never the error's text or the content.
    assert "ValueError" in caplog.text and "'m0'" in caplog.text
    assert "hunter2" not in caplog.text


def test_ctrl_c_inside_a_hook_releases_the_batch() -> None:
    calls: list[int] = []

    def hook(pruned: list[Any], ns: Any) -> None:
        calls.append(len(pruned))
        if len(calls) == 1:
            raise KeyboardInterrupt

    reducer = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[hook]))
    with pytest.raises(KeyboardInterrupt):
        reducer.reduce(existing=msgs(6))
    reducer.reduce(existing=msgs(6))
    assert calls == [4, 4]


def test_ctrl_c_after_a_hook_returned_releases_the_batch_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between the hook's return and the reduce's resumption: the batch is handed back
    as the error leaves reduce(), so a retry while the error (and its traceback) is still
    held hands it over again. It had waited for the traceback to be freed."""
    from agentstate_reducer import _drivers

    calls: list[int] = []
    real = _drivers._outcome

    def interrupted(call: Any) -> Any:
        got = real(call)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return got

    monkeypatch.setattr(_drivers, "_outcome", interrupted)
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[
            lambda pruned, ns: calls.append(len(pruned))])
    )
    with pytest.raises(KeyboardInterrupt) as raised:
        reducer.reduce(existing=msgs(6))
    reducer.reduce(existing=msgs(6))
    assert calls == [4, 4] and raised.traceback
    reducer.reduce(existing=msgs(6))
    assert calls == [4, 4]  # stored the second time: never again


async def test_a_cancelled_areduce_releases_the_batch() -> None:
    """A LangGraph run cancelled or timed out while a hook stores: the retry delivers."""
    stored: list[str] = []
    calls: list[int] = []
    started = asyncio.Event()

    async def slow_store(pruned: list[Any], ns: Any) -> None:
        calls.append(len(pruned))
        started.set()
        if len(calls) == 1:
            await asyncio.sleep(30)  # cancelled here
        stored.extend(m["id"] for m in pruned)

    reducer = MessageReducer(
        config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[slow_store])
    )
    task = asyncio.create_task(reducer.areduce(existing=msgs(6)))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await reducer.areduce(existing=msgs(6))
    assert calls == [4, 4] and stored == ["m0", "m1", "m2", "m3"]


def test_dedupe_off_redelivers() -> None:
    got: list[Any] = []
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            dedupe_on_prune=False,
            on_prune=[lambda p, ns: got.extend(p)],
        )
    )
    reducer.reduce(existing=msgs(6))
    reducer.reduce(existing=msgs(6))
    assert len(got) == 8


def test_dedupe_window_evicts_the_oldest_ids() -> None:
    got: list[Any] = []
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=0, max_messages=0, dedupe_window=2, on_prune=[lambda p, ns: got.extend(p)]
        )
    )
    a, b, c = ({"role": "user", "content": x, "id": x} for x in "abc")
    for message in (a, b, c, a, c):
        reducer.reduce(existing=[{"role": "system", "content": "s"}], new=[message])
    # a is evicted when c arrives (window of 2), so it is delivered again; c is not.
    assert [m["id"] for m in got] == ["a", "b", "c", "a"]


def test_concurrent_reduces_deliver_each_id_once() -> None:
    got: list[str] = []
    lock = threading.Lock()

    def hook(pruned: list[Any], ns: Any) -> None:
        with lock:
            got.extend(m["id"] for m in pruned)

    reducer = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[hook]))
    history = msgs(400)
    barrier = threading.Barrier(8)

    def run() -> None:
        barrier.wait()
        for _ in range(5):
            reducer.reduce(existing=history)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(m["id"] for m in history[1:399])


# -- async -----------------------------------------------------------------------------------


async def test_areduce_awaits_async_summary_and_hooks() -> None:
    got: list[tuple[int, Any]] = []

    async def summarize(pruned: list[Any]) -> str:
        await asyncio.sleep(0)
        return f"{len(pruned)} gone"

    async def remember(pruned: list[Any], ns: Any) -> None:
        await asyncio.sleep(0)
        got.append((len(pruned), ns))

    sync_got: list[int] = []
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            summarize_fn=summarize,
            inject_summary=True,
            on_prune=[remember, lambda p, ns: sync_got.append(len(p))],
        )
    )
    result = await reducer.areduce(msgs(6), None, "ns")
    assert result.summary == "4 gone"
    assert got == [(4, "ns")] and sync_got == [4]
    assert "4 gone" in result.surviving[1]["content"]


async def test_areduce_matches_reduce() -> None:
    history = msgs(30)
    cfg = ReducerConfig(min_messages=5, max_messages=12)
    assert (await MessageReducer(config=cfg).areduce(history)) == MessageReducer(config=cfg).reduce(
        history
    )


async def test_areduce_logs_failing_async_hook(caplog: pytest.LogCaptureFixture) -> None:
    async def bad(pruned: list[Any], ns: Any) -> None:
        raise RuntimeError("nope")

    reducer = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, on_prune=[bad]))
    with caplog.at_level(logging.ERROR, logger="agentstate_reducer"):
        result = await reducer.areduce(msgs(6))
    assert len(result.pruned) == 4
    assert "on_prune[0] failed" in caplog.text


def test_reduce_with_async_callables_names_areduce() -> None:
    async def summarize(pruned: list[Any]) -> str:
        return "x"

    async def hook(pruned: list[Any], ns: Any) -> None:
        return None

    for cfg in (
        ReducerConfig(min_messages=2, max_messages=4, summarize_fn=summarize),
        ReducerConfig(min_messages=2, max_messages=4, on_prune=[hook]),
    ):
        with pytest.raises(TypeError, match="areduce"):
            MessageReducer(config=cfg).reduce(existing=msgs(6))

    def sneaky(pruned: list[Any]) -> Any:
        return summarize(pruned)

    reducer = MessageReducer(
        config=ReducerConfig(min_messages=2, max_messages=4, summarize_fn=sneaky)
    )
    with pytest.raises(TypeError, match="areduce"):
        reducer.reduce(existing=msgs(6))


# -- LangGraph ---------------------------------------------------------------------------------


def test_as_langgraph_reducer_argument_forms() -> None:
    fn = MessageReducer(min_messages=1, max_messages=3).as_langgraph_reducer()
    one = {"role": "user", "content": "x"}
    assert fn(None, None) == []
    assert fn(None, one) == [one]
    assert fn([one], one) == [one, one]
    assert fn(one, [one]) == [one, one]
    assert len(fn([one] * 4, None)) == 2  # index 0 plus min_messages


def test_as_langgraph_reducer_in_a_state_graph() -> None:
    from langgraph.graph import END, START, StateGraph

    reducer = MessageReducer(min_messages=3, max_messages=5)

    State = TypedDict(  # noqa: UP013 - the annotation must be evaluated here, not deferred
        "State", {"messages": Annotated[list[Any], reducer.as_langgraph_reducer()]}
    )

    def one(state: Any) -> dict[str, Any]:
        return {"messages": HumanMessage(f"q{len(state['messages'])}")}

    def many(state: Any) -> dict[str, Any]:
        return {"messages": [AIMessage("a"), AIMessage("b")]}

    graph = StateGraph(State)
    graph.add_node("one", one)
    graph.add_node("many", many)
    graph.add_edge(START, "one")
    graph.add_edge("one", "many")
    graph.add_edge("many", END)
    app = graph.compile()
    state: dict[str, Any] = {"messages": [SystemMessage("sys")]}
    for _ in range(5):
        state = app.invoke(state)
        assert len(state["messages"]) <= 5 + 1
        assert isinstance(state["messages"][0], SystemMessage)
    assert [m.content for m in state["messages"][-2:]] == ["a", "b"]


# -- laws, on real messages of every shape ---------------------------------------------------


def orphan_free(messages: list[Any]) -> bool:
    issued: set[str] = set()
    for i, m in enumerate(messages):
        view = read_message(m, i)
        if i > 0 and any(a not in issued for a in view.answers):
            return False
        issued.update(view.calls)
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    histories(),
    st.integers(0, 10),
    st.integers(0, 10),
    st.booleans(),
    st.sampled_from([None, 60, 200]),
    st.integers(0, 50),
    st.sampled_from([None, "human"]),
    st.booleans(),
)
def test_laws(
    history: list[Any],
    lo: int,
    extra: int,
    first: bool,
    max_tokens: int | None,
    slack: int,
    start_on: str | None,
    repair: bool,
) -> None:
    target = None if max_tokens is None else max(1, max_tokens - slack)
    cfg = ReducerConfig(
        min_messages=lo,
        max_messages=lo + extra,
        max_tokens=max_tokens,
        target_tokens=target,
        token_counter="approximate" if max_tokens else None,
        preserve_first=first,
        start_on=start_on,
        repair_dangling_calls=repair,
    )
    reducer = MessageReducer(config=cfg)
    result = reducer.reduce(existing=history)
    assert result.repaired == []  # these histories have no dead call
    if start_on or repair:
        assert reducer.reduce(existing=result.surviving).pruned == []
        return
    # An order-preserving partition of the input, by identity.
    ids = {id(m): i for i, m in enumerate(history)}
    kept = [ids[id(m)] for m in result.surviving]
    gone = [ids[id(m)] for m in result.pruned]
    assert kept == sorted(kept) and gone == sorted(gone)
    assert sorted(kept + gone) == list(range(len(history)))
    if first and history:
        assert result.surviving[0] is history[0]
    assert orphan_free(result.surviving) or not first
    # Idempotence: reducing the survivors again prunes nothing.
    assert reducer.reduce(existing=result.surviving).pruned == []
    counts = reducer.count_tokens(history)
    if max_tokens is not None and target is not None and sum(counts) > max_tokens:
        busy = reducer.plan(history).protected  # the current turn stays
        fixed = sum(
            c
            for i, (m, c) in enumerate(zip(history, counts, strict=True))
            if (i == 0 and first)
            or i in busy
            or (read_message(m).role not in ("human", "ai") and not read_message(m).answers)
        )
        if fixed <= target:
            assert sum(reducer.count_tokens(result.surviving)) <= target


@settings(max_examples=60, deadline=None)
@given(histories())
def test_orphans_already_in_the_input_are_removed(history: list[Any]) -> None:
    result = MessageReducer(min_messages=0, max_messages=None).reduce(existing=history)
    assert orphan_free(result.surviving)


def test_injected_summaries_never_reach_on_prune() -> None:
    """Rolling folds prune the previous summary pair: memory gets conversation only."""
    from agentstate_reducer.read import is_injected

    got: list[Any] = []
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=3,
            max_messages=6,
            summarize_fn=lambda pruned: f"summary of {len(pruned)}",
            inject_summary=True,
            on_prune=[lambda pruned, ns: got.extend(pruned)],
        )
    )
    state: list[Any] = [{"role": "system", "content": "sys", "id": "s"}]
    conversation: list[str] = []
    injected_pruned = 0
    for turn in range(40):
        new = [{"role": "user", "content": f"q{turn}", "id": f"q{turn}"}]
        conversation.append(f"q{turn}")
        result = reducer.reduce(state, new)
        injected_pruned += sum(1 for m in result.pruned if is_injected(m))
        state = result.surviving
    assert injected_pruned > 0  # summaries were folded away...
    assert not any(is_injected(m) for m in got)  # ...but never delivered
    delivered = [m["id"] for m in got]
    assert len(delivered) == len(set(delivered))
    assert set(delivered) <= set(conversation) and len(delivered) > 20


# -- figures -----------------------------------------------------------------------------


def test_result_figures_count_mode() -> None:
    history = msgs(9)
    result = MessageReducer(min_messages=2, max_messages=4).reduce(history)
    assert (result.messages_before, result.messages_after) == (10, 3)
    assert result.pruned_by_reason == {"in window": 7}
    assert (result.tokens_before, result.tokens_after) == (None, None)
    assert not result.over_budget and not result.over_target and result.over_because == ()
    # The documented fields still work positionally.
    surviving, pruned, summary = result.surviving, result.pruned, result.summary
    assert ReducerResult(surviving, pruned, summary) == ReducerResult(surviving, pruned)


def agent_turn(shape: str, steps: int, tag: str) -> list[Any]:
    out = [human(shape, f"question {tag}", f"h{tag}")]
    for s in range(steps):
        out.append(ai(shape, "", f"a{tag}.{s}", [f"c{tag}.{s}"]))
        out.extend(results(shape, [f"c{tag}.{s}"], f"r{tag}.{s}"))
    return out


def test_result_figures_say_why_the_survivors_are_over_budget() -> None:
    history = [system("openai", "be brief", "s"), *agent_turn("openai", 5, "t")]
    result = MessageReducer(min_messages=4, max_messages=8).reduce(history)
    assert result.pruned == []
    assert result.over_budget and result.over_because == ("current turn",)
    cfg = ReducerConfig(max_tokens=60, target_tokens=40, token_counter=lambda m: 10)
    tokens = MessageReducer(config=cfg).reduce(history)
    assert tokens.tokens_before in (None, 120)  # None when the plan counted lazily
    assert tokens.tokens_after == 40  # system, question, and the latest step
    assert tokens.pruned_by_reason == {"old step": 4, "cascade": 4}
    assert not tokens.over_target


def _failing_summary(pruned: list[Any]) -> str:
    raise RuntimeError("the summariser is down")


#: Configs whose results each take another path to their figures: the plan's, the turn
#: ladder's note, context editing, an injected summary block, a fail-closed summary.
_OVER_KINDS = ("plain", "ladder", "edits", "summary", "failed summary")


def _over_config(kind: str, most: int, target: int) -> ReducerConfig:
    from agentstate_reducer import ClearToolResults, Offload, agent_config

    budget: dict[str, Any] = {
        "max_tokens": most, "target_tokens": target, "token_counter": "approximate"
    }
    if kind == "ladder":
        return agent_config(**budget)
    if kind == "edits":
        edits = [ClearToolResults(keep=1), Offload(above=20, head=4, tail=4)]
        return agent_config(context_edits=edits, **budget)
    if kind == "summary":
        return ReducerConfig(summarize_fn=lambda ms: "sum " * 10, inject_summary=True, **budget)
    if kind == "failed summary":
        return ReducerConfig(summarize_fn=_failing_summary, inject_summary=True, **budget)
    return ReducerConfig(**budget)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    valid_histories(),
    st.integers(5, 120),
    st.integers(1, 100),
    st.sampled_from(_OVER_KINDS),
    st.integers(0, 5),
)
def test_over_budget_says_whether_the_survivors_exceed_max_tokens(
    history: list[Any], most: int, share: int, kind: str, appended: int
) -> None:
    # Law, token mode: over_budget == (tokens of the survivors > max_tokens), and
    # over_target the same against target_tokens, whichever path the reduce took (a
    # reduce, then the rest appended to the list it returned: the incremental path).
    target = max(1, most * share // 100)
    reducer = MessageReducer(config=_over_config(kind, most, target))
    split = len(history) - min(appended, len(history))
    result = reducer.reduce(history[:split])
    if split < len(history):
        result = reducer.reduce(result.surviving, history[split:])
    kept = sum(reducer.count_tokens(result.surviving))
    assert result.over_budget == (kept > most), (kept, result)
    # over_target is said after a prune was triggered (above max_tokens) only.
    assert result.over_target <= (kept > target) and result.over_target >= (kept > most)
    assert bool(result.over_because) == result.over_target
    if kind != "summary":  # (tokens_after leaves out a summary block injected now)
        assert result.tokens_after == kept


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_histories(), st.integers(0, 10), st.integers(0, 10), st.booleans(), st.integers(0, 5))
def test_over_budget_says_whether_the_survivors_exceed_max_messages(
    history: list[Any], least: int, more: int, summarise: bool, appended: int
) -> None:
    most = least + more
    fn = (lambda ms: "sum") if summarise else _failing_summary
    config = ReducerConfig(
        min_messages=least, max_messages=most, summarize_fn=fn, inject_summary=True
    )
    reducer = MessageReducer(config=config)
    split = len(history) - min(appended, len(history))
    result = reducer.reduce(history[:split])
    if split < len(history):
        result = reducer.reduce(result.surviving, history[split:])
    assert result.messages_after == len(result.surviving)
    assert result.over_budget == result.over_target == (len(result.surviving) > most)


def test_a_failed_summary_that_keeps_everything_is_over_budget() -> None:
    history = msgs(5)  # 6 messages: over max_messages, within the hard limit (8)
    config = ReducerConfig(
        min_messages=2, max_messages=4, summarize_fn=_failing_summary, inject_summary=True
    )
    result = MessageReducer(config=config).reduce(history)
    assert result.summary_failed and result.pruned == [] and len(result.surviving) == 6
    assert result.over_budget and result.over_because == ("summary failed",)  # was False


# -- repair_dangling_calls ----------------------------------------------------------------


SHAPES = ("openai", "anthropic", "langchain")


@pytest.mark.parametrize("shape", SHAPES)
def test_a_dead_call_gets_a_synthetic_result_in_the_conversations_shape(shape: str) -> None:
    from agentstate_reducer import agent_config, validate_history

    history = [
        system(shape, "be brief", "s"),
        human(shape, "book it", "h1"),
        ai(shape, "", "a1", ["book"]),
        human(shape, "never mind, what time is it?", "h2"),  # the interrupt was abandoned
    ]
    provider = "anthropic" if shape == "anthropic" else "openai"
    assert validate_history(history, provider=provider) != []
    reducer = MessageReducer(config=agent_config(min_messages=10, max_messages=20))
    result = reducer.reduce(history)
    assert validate_history(result.surviving, provider=provider) == []
    assert len(result.repaired) == 1 and result.surviving[3] is result.repaired[0]
    assert read_message(result.repaired[0]).answers == ("book",)
    assert result.pruned == [] and result.messages_before == 4 and result.messages_after == 5
    # Deterministic: the same dead call always gets the same result, once.
    again = reducer.reduce(history)
    assert again.surviving == result.surviving
    assert reducer.reduce(result.surviving).repaired == []
    assert reducer.reduce(result.surviving).surviving == result.surviving
    # Off by default: the documented API is unchanged.
    assert MessageReducer(10, 20).reduce(history).surviving == history


@pytest.mark.parametrize("shape", SHAPES)
def test_pending_calls_are_never_repaired(shape: str) -> None:
    from agentstate_reducer import agent_config

    reducer = MessageReducer(config=agent_config(min_messages=10, max_messages=20))
    pending = [human(shape, "book it", "h1"), ai(shape, "", "a1", ["x", "y"])]
    assert reducer.reduce(pending).surviving == pending
    part = [*pending, *results(shape, ["x"], "r")]
    assert reducer.reduce(part).surviving == part
    assert reducer.reduce(part).repaired == []


def test_a_synthetic_result_of_a_pruned_call_is_never_reported_as_pruned() -> None:
    history = [
        system("openai", "s", "s"),
        human("openai", "q1", "h1"),
        ai("openai", "", "a1", ["dead"]),
        human("openai", "q2", "h2"),
        ai("openai", "a2", "a2"),
        human("openai", "q3", "h3"),
        ai("openai", "a3", "a3"),
    ]
    cfg = ReducerConfig(min_messages=2, max_messages=4, repair_dangling_calls=True)
    result = MessageReducer(config=cfg).reduce(history)
    assert [m["id"] for m in result.pruned] == ["h1", "a1", "h2", "a2"]
    assert result.repaired == []
    assert result.pruned_by_reason == {"in window": 4}


def test_repair_dangling_calls_must_be_a_bool() -> None:
    from agentstate_reducer import ConfigError

    with pytest.raises(ConfigError, match="repair_dangling_calls must be True or False, got 1"):
        ReducerConfig(repair_dangling_calls=1)  # type: ignore[arg-type]


def test_agent_config_is_the_provider_valid_combination() -> None:
    from agentstate_reducer import agent_config

    cfg = agent_config(min_messages=4, max_messages=8)
    assert (cfg.start_on, cfg.repair_dangling_calls, cfg.cascade_tool_messages) == (
        "human",
        True,
        True,
    )
    assert agent_config(start_on=None).start_on is None
    assert MessageReducer(config=cfg).repair_dangling_calls is True
