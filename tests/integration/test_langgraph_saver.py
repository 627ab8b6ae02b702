"""ReducingSaver, apply_reducer and memory_namespace against real LangGraph savers."""

from __future__ import annotations

import asyncio
import copy
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import DetectedCapabilities
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from agentstate_reducer import MessageFormatError, MessageReducer, ReducerConfig
from agentstate_reducer.langgraph import (
    ReducingSaver,
    ThreadTTL,
    aapply_reducer,
    apply_reducer,
    memory_namespace,
)

THREAD = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}


def history(pairs: int) -> list[Any]:
    out: list[Any] = [SystemMessage(content="sys", id="sys")]
    for i in range(pairs):
        out += [HumanMessage(content=f"q{i}", id=f"h{i}"), AIMessage(content=f"a{i}", id=f"a{i}")]
    return out


def small_reducer(**options: Any) -> MessageReducer:
    return MessageReducer(config=ReducerConfig(min_messages=2, max_messages=4, **options))


def checkpoint_with(messages: Any, **other: Any) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": messages, **other}
    checkpoint["channel_versions"] = {"messages": 1}
    return checkpoint


def stored_messages(saver: BaseCheckpointSaver[Any], config: Any) -> list[Any]:
    found = saver.get_tuple(config)
    assert found is not None
    return list(found.checkpoint["channel_values"]["messages"])


# -- memory_namespace -----------------------------------------------------------


def test_memory_namespace_prefers_the_configured_key() -> None:
    reducer = MessageReducer(2, 4)
    config = {"configurable": {"thread_id": "t", "memory_namespace": ("users", "bob")}}
    assert memory_namespace(reducer, config) == ("users", "bob")  # type: ignore[arg-type]


def test_memory_namespace_reads_a_custom_key() -> None:
    reducer = MessageReducer(config=ReducerConfig(namespace_key="user"))
    config = {"configurable": {"thread_id": "t", "user": "bob", "memory_namespace": "x"}}
    assert memory_namespace(reducer, config) == "bob"  # type: ignore[arg-type]


def test_memory_namespace_falls_back_to_the_thread_then_none() -> None:
    reducer = MessageReducer(2, 4)
    assert memory_namespace(reducer, {"configurable": {"thread_id": 7}}) == ("memories", "7")
    assert memory_namespace(reducer, {"configurable": {}}) is None
    assert memory_namespace(reducer, {}) is None
    assert memory_namespace(reducer, None) is None


# -- apply_reducer ----------------------------------------------------------------


def test_apply_reducer_returns_a_reduced_copy_and_leaves_the_input_alone() -> None:
    delivered: list[tuple[list[Any], Any]] = []
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            on_prune=[lambda pruned, ns: delivered.append((pruned, ns))],
        )
    )
    messages = history(4)
    checkpoint = checkpoint_with(messages, other="kept")
    reduced = apply_reducer(reducer, checkpoint, {"configurable": {"thread_id": "t"}})
    assert reduced is not checkpoint
    assert checkpoint["channel_values"]["messages"] is messages
    assert len(messages) == 9
    assert [m.id for m in reduced["channel_values"]["messages"]] == ["sys", "h3", "a3"]
    assert reduced["channel_values"]["other"] == "kept"
    assert reduced["id"] == checkpoint["id"]
    assert [m.id for m in delivered[0][0]] == ["h0", "a0", "h1", "a1", "h2", "a2"]
    assert delivered[0][1] == ("memories", "t")


def test_apply_reducer_returns_the_same_checkpoint_when_nothing_is_pruned() -> None:
    reducer = MessageReducer(2, 40)
    checkpoint = checkpoint_with(history(4))
    assert apply_reducer(reducer, checkpoint, None) is checkpoint
    no_list = checkpoint_with("not a list")
    assert apply_reducer(MessageReducer(0, 0), no_list, None) is no_list
    missing = empty_checkpoint()
    assert apply_reducer(MessageReducer(0, 0), missing, None, messages_key="chat") is missing


async def test_aapply_reducer_awaits_async_hooks() -> None:
    seen: list[str] = []

    async def remember(pruned: list[Any], namespace: Any) -> None:
        await asyncio.sleep(0)
        seen.extend(m.id for m in pruned)

    reducer = small_reducer(on_prune=[remember])
    checkpoint = checkpoint_with(history(3))
    reduced = await aapply_reducer(reducer, checkpoint, THREAD)  # type: ignore[arg-type]
    assert [m.id for m in reduced["channel_values"]["messages"]] == ["sys", "h2", "a2"]
    assert seen == ["h0", "a0", "h1", "a1"]


# -- ReducingSaver: writes ------------------------------------------------------------


def test_put_stores_the_reduced_list_and_the_graph_state_is_untouched() -> None:
    saver = ReducingSaver(InMemorySaver(), MessageReducer(2, 4))
    messages = history(4)
    stored = saver.put(THREAD, checkpoint_with(messages), {}, {"messages": 1})  # type: ignore[arg-type]
    assert [m.id for m in stored_messages(saver, stored)] == ["sys", "h3", "a3"]
    assert len(messages) == 9


def test_a_summary_that_keeps_the_length_is_still_stored() -> None:
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=3,
            max_messages=5,
            summarize_fn=lambda pruned: "they said hello",
            inject_summary=True,
        )
    )
    messages = [*history(2), HumanMessage(content="q2", id="h2")]
    saver = ReducingSaver(InMemorySaver(), reducer)
    stored = saver.put(THREAD, checkpoint_with(messages), {}, {"messages": 1})  # type: ignore[arg-type]
    kept = stored_messages(saver, stored)
    assert len(kept) == len(messages)
    assert [m.id for m in kept][:1] == ["sys"]
    assert "they said hello" in kept[1].content
    assert [m.id for m in kept][3:] == ["h1", "a1", "h2"]


async def test_aput_reduces_through_areduce() -> None:
    seen: list[Any] = []

    async def remember(pruned: list[Any], namespace: Any) -> None:
        seen.append(namespace)

    reducer = small_reducer(on_prune=[remember])
    saver = ReducingSaver(InMemorySaver(), reducer)
    config = {"configurable": {"thread_id": "t-9", "checkpoint_ns": ""}}
    stored = await saver.aput(config, checkpoint_with(history(4)), {}, {"messages": 1})  # type: ignore[arg-type]
    found = await saver.aget_tuple(stored)
    assert found is not None
    assert [m.id for m in found.checkpoint["channel_values"]["messages"]] == ["sys", "h3", "a3"]
    assert seen == [("memories", "t-9")]


def test_sync_put_refuses_async_hooks_with_a_pointer_to_aput() -> None:
    async def remember(pruned: list[Any], namespace: Any) -> None:
        return None

    reducer = small_reducer(on_prune=[remember])
    saver = ReducingSaver(InMemorySaver(), reducer)
    with pytest.raises(TypeError, match="areduce"):
        saver.put(THREAD, checkpoint_with(history(4)), {}, {"messages": 1})  # type: ignore[arg-type]


@pytest.mark.parametrize("values", [list(range(30)), [str(i) for i in range(30)], [[1], [2]] * 9])
def test_a_list_of_non_messages_under_the_key_passes_through(values: list[Any]) -> None:
    saver = ReducingSaver(InMemorySaver(), small_reducer())
    checkpoint = checkpoint_with(values)
    assert apply_reducer(small_reducer(), checkpoint, None) is checkpoint
    saver.put(THREAD, checkpoint, {}, {"messages": 1})
    assert stored_messages(saver, THREAD) == values


def test_a_list_mixing_messages_and_garbage_is_still_refused() -> None:
    with pytest.raises(MessageFormatError, match="index 1"):
        apply_reducer(small_reducer(), checkpoint_with([HumanMessage("a"), 3]), None)


def test_a_custom_messages_key_is_reduced_and_others_are_not() -> None:
    saver = ReducingSaver(InMemorySaver(), MessageReducer(2, 4), messages_key="chat")
    checkpoint = checkpoint_with(history(4), chat=history(4))
    checkpoint["channel_versions"]["chat"] = 1
    stored = saver.put(THREAD, checkpoint, {}, {"messages": 1, "chat": 1})  # type: ignore[arg-type]
    found = saver.get_tuple(stored)
    assert found is not None
    assert len(found.checkpoint["channel_values"]["chat"]) == 3
    assert len(found.checkpoint["channel_values"]["messages"]) == 9


def test_tool_pairs_survive_a_reduced_checkpoint_together() -> None:
    messages = [
        SystemMessage(content="sys", id="sys"),
        HumanMessage(content="q", id="h0"),
        AIMessage(content="", id="a0", tool_calls=[{"name": "f", "args": {}, "id": "c0"}]),
        ToolMessage(content="r", tool_call_id="c0", id="t0"),
        AIMessage(content="done", id="a1"),
        HumanMessage(content="q2", id="h1"),
    ]
    saver = ReducingSaver(InMemorySaver(), MessageReducer(2, 4))
    stored = saver.put(THREAD, checkpoint_with(messages), {}, {"messages": 1})  # type: ignore[arg-type]
    assert [m.id for m in stored_messages(saver, stored)] == ["sys", "a1", "h1"]


# -- ReducingSaver: who reduces ---------------------------------------------------------


class SelfReducingSaver(InMemorySaver):
    """A saver that reduces on its own once handed a reducer."""

    reducer: MessageReducer | None = None


def test_an_inner_saver_without_a_reducer_is_handed_ours_and_passed_through() -> None:
    reducer = MessageReducer(2, 4)
    inner = SelfReducingSaver()
    saver = ReducingSaver(inner, reducer)
    assert saver.passthrough
    assert inner.reducer is reducer
    assert (saver.inner, saver.reducer) == (inner, reducer)
    stored = saver.put(THREAD, checkpoint_with(history(4)), {}, {"messages": 1})  # type: ignore[arg-type]
    assert len(stored_messages(saver, stored)) == 9  # the inner saver's job now


def test_an_inner_saver_holding_the_same_reducer_is_passed_through() -> None:
    reducer = MessageReducer(2, 4)
    inner = ReducingSaver(InMemorySaver(), reducer)
    outer = ReducingSaver(inner, reducer)
    assert outer.passthrough and not inner.passthrough
    stored = outer.put(THREAD, checkpoint_with(history(4)), {}, {"messages": 1})  # type: ignore[arg-type]
    assert len(stored_messages(outer, stored)) == 3


def test_an_inner_saver_holding_another_reducer_is_refused() -> None:
    inner = SelfReducingSaver()
    inner.reducer = MessageReducer(2, 4)
    with pytest.raises(ValueError, match="different reducer"):
        ReducingSaver(inner, MessageReducer(2, 4))


def test_a_plain_inner_saver_is_not_passed_through() -> None:
    saver = ReducingSaver(InMemorySaver(), MessageReducer(2, 4))
    assert not saver.passthrough
    assert not hasattr(saver.inner, "reducer")


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("not a saver", MessageReducer()), TypeError, "inner must be"),
        ((InMemorySaver(), "not a reducer"), TypeError, "reducer must be"),
        # 0.5.0 raised ValueError here: a ConfigTypeError is both.
        ((InMemorySaver(), None), ValueError, "reducer must be a MessageReducer, got None"),
        ((InMemorySaver(), None), TypeError, "reducer must be a MessageReducer, got None"),
    ],
)
def test_bad_arguments_are_named(args: tuple[Any, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ReducingSaver(*args)


def test_an_empty_messages_key_is_refused() -> None:
    with pytest.raises(ValueError, match="messages_key must be a non-empty string, got ''"):
        ReducingSaver(InMemorySaver(), MessageReducer(), messages_key="")


# -- ReducingSaver: delegation and capabilities --------------------------------------------


class CopyingSaver(InMemorySaver):
    """InMemorySaver plus copy_thread, recording its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.copied: list[tuple[str, str]] = []

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copied.append((source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copied.append((source_thread_id, target_thread_id))


def detected(saver: BaseCheckpointSaver[Any]) -> set[str]:
    return {c.value for c in DetectedCapabilities.from_instance(saver).detected}


@pytest.mark.parametrize("inner_type", [InMemorySaver, CopyingSaver, SelfReducingSaver])
def test_capability_probes_see_the_inner_savers_truth(inner_type: type) -> None:
    inner = inner_type()
    saver = ReducingSaver(inner, MessageReducer(2, 4))
    assert detected(saver) == detected(inner)
    assert isinstance(saver, ReducingSaver)
    assert type(saver).__name__ == "ReducingSaver"


class BareSaver(BaseCheckpointSaver[Any]):
    """Only the abstract surface: no delete, copy, prune or delta-history override."""

    def __init__(self) -> None:
        super().__init__()
        self.memory = InMemorySaver()

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        return self.memory.get_tuple(config)

    def put(self, *args: Any) -> Any:
        return self.memory.put(*args)

    def put_writes(self, *args: Any) -> None:
        self.memory.put_writes(*args)


def overridden(saver: BaseCheckpointSaver[Any]) -> set[str]:
    names = ("delete_thread", "copy_thread", "delete_for_runs", "prune",
             "get_delta_channel_history", "aget_delta_channel_history")
    return {n for n in names
            if getattr(type(saver), n) is not getattr(BaseCheckpointSaver, n)}


@pytest.mark.parametrize("inner_type", [InMemorySaver, CopyingSaver, BareSaver])
def test_only_the_inner_savers_overrides_are_claimed(inner_type: type) -> None:
    inner = inner_type()
    assert overridden(ReducingSaver(inner, MessageReducer())) == overridden(inner)
    with SqliteSaver.from_conn_string(":memory:") as sqlite:
        assert overridden(ReducingSaver(sqlite, MessageReducer())) == overridden(sqlite)


def test_a_bare_saver_gets_the_base_delta_history() -> None:
    saver = ReducingSaver(BareSaver(), small_reducer())
    saver.put(THREAD, checkpoint_with(history(1)), {}, {"messages": 1})
    assert saver.get_delta_channel_history(config=THREAD, channels=[]) == {}


async def test_optional_capabilities_are_delegated() -> None:
    inner = CopyingSaver()
    saver = ReducingSaver(inner, MessageReducer(2, 4))
    assert "copy_thread" in detected(saver)
    saver.copy_thread("a", "b")
    await saver.acopy_thread("c", "d")
    assert inner.copied == [("a", "b"), ("c", "d")]
    with pytest.raises(NotImplementedError):
        saver.prune(["a"])


def test_everything_else_is_read_from_the_inner_saver() -> None:
    with SqliteSaver.from_conn_string(":memory:") as inner:
        saver = ReducingSaver(inner, MessageReducer(2, 4))
        saver.setup()
        assert saver.conn is inner.conn
        assert saver.serde is inner.serde
        assert saver.config_specs == inner.config_specs
        version = saver.get_next_version(None, None)
        assert isinstance(version, str) and version.startswith("00")
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            saver.nope  # noqa: B018


def test_copies_and_allowlists_keep_the_wrapper() -> None:
    saver = ReducingSaver(CopyingSaver(), MessageReducer(2, 4))
    clone = copy.copy(saver)
    assert type(clone) is type(saver)
    assert clone.inner is saver.inner and clone.reducer is saver.reducer
    # The default serializer allows every type: nothing to narrow, the saver is kept.
    assert saver.with_allowlist([("my.module", "MyType")]) is saver


def test_an_allowlist_reaches_the_inner_serializer() -> None:
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    saver = ReducingSaver(InMemorySaver(serde=strict), MessageReducer(2, 4))
    allowed = saver.with_allowlist([("my.module", "MyType")])
    assert isinstance(allowed, ReducingSaver)
    assert allowed.reducer is saver.reducer
    assert allowed.inner is not saver.inner
    assert allowed.serde is allowed.inner.serde is not saver.serde
    assert detected(allowed) == detected(saver.inner)


def test_graph_history_reads_through_the_wrapper() -> None:
    saver = ReducingSaver(InMemorySaver(), MessageReducer(2, 4))
    first = saver.put(THREAD, checkpoint_with(history(1)), {"step": 1}, {"messages": 1})  # type: ignore[arg-type]
    saver.put(first, checkpoint_with(history(4)), {"step": 2}, {"messages": 2})  # type: ignore[arg-type]
    listed = list(saver.list(THREAD))
    assert [len(t.checkpoint["channel_values"]["messages"]) for t in listed] == [3, 3]
    saver.delete_thread("t-1")
    assert saver.get_tuple(THREAD) is None


# -- conformance ------------------------------------------------------------------------------


class ThreadedSqliteSaver(SqliteSaver):
    """SqliteSaver whose async methods run its sync ones in a thread.

    The conformance suite drives savers only through their async methods, which the
    sync SqliteSaver refuses; this runs the suite against SqliteSaver's own storage code.
    """

    async def aget_tuple(self, config: Any) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(  # type: ignore[override]
        self,
        config: Any,
        *,
        filter: dict[str, Any] | None = None,
        before: Any = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    async def aput(self, *args: Any) -> Any:
        return await asyncio.to_thread(self.put, *args)

    async def aput_writes(self, *args: Any) -> None:
        await asyncio.to_thread(self.put_writes, *args)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)


@asynccontextmanager
async def memory_saver() -> AsyncIterator[InMemorySaver]:
    yield InMemorySaver()


@asynccontextmanager
async def sqlite_saver() -> AsyncIterator[ThreadedSqliteSaver]:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    try:
        yield ThreadedSqliteSaver(conn)
    finally:
        conn.close()


async def run_conformance(name: str, make_inner: Any, **retention: Any) -> tuple[Any, set[str]]:
    inner_caps: set[str] = set()

    @checkpointer_test(name=f"ReducingSaver({name})")
    async def factory() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        async with make_inner() as inner:
            inner_caps.update(detected(inner))
            yield ReducingSaver(inner, MessageReducer(2, 4), **retention)

    report = await validate(factory)
    return report, inner_caps


CONFORMANCE: dict[str, Any] = {
    "InMemorySaver": memory_saver,
    "SqliteSaver": sqlite_saver,
    "AsyncSqliteSaver": lambda: AsyncSqliteSaver.from_conn_string(":memory:"),
}


@pytest.mark.parametrize("name", sorted(CONFORMANCE))
async def test_conformance(name: str) -> None:
    report, inner_caps = await run_conformance(name, CONFORMANCE[name])
    failures = {k: r.failures for k, r in report.results.items() if r.failures}
    assert report.passed_all_base(), failures
    assert report.passed_all(), failures
    assert {k for k, r in report.results.items() if r.detected} == inner_caps
    assert sum(r.tests_passed for r in report.results.values()) > 20


@pytest.mark.parametrize("name", sorted(CONFORMANCE))
async def test_conformance_with_time_based_retention(name: str) -> None:
    # Nothing expires while the suite runs, and nothing is swept on a write: it all holds.
    ttl = ThreadTTL(idle=3600, age=86_400, strategy="keep_latest")
    report, inner_caps = await run_conformance(name, CONFORMANCE[name], ttl=ttl)
    failures = {k: r.failures for k, r in report.results.items() if r.failures}
    assert report.passed_all(), failures
    assert {k for k, r in report.results.items() if r.detected} == inner_caps


#: The conformance tests that read back a checkpoint keep_checkpoints=K has deleted by
#: design (docs/langgraph.md, "Retention and the conformance suite"), per K.
DELETED_BY_RETENTION = {
    1: {
        "put": {"test_put_incremental_channel_update", "test_put_multiple_checkpoints_same_thread",
                "test_put_parent_config"},
        "get_tuple": {"test_get_tuple_parent_config", "test_get_tuple_specific_checkpoint_id"},
        "list": {"test_list_all", "test_list_before", "test_list_by_thread",
                 "test_list_combined_thread_and_filter", "test_list_limit",
                 "test_list_limit_plus_before", "test_list_metadata_custom_keys",
                 "test_list_metadata_filter_single_key", "test_list_metadata_filter_step",
                 "test_list_ordering"},
    },
    3: {
        "list": {"test_list_all", "test_list_before", "test_list_by_thread",
                 "test_list_metadata_filter_single_key", "test_list_ordering"},
    },
}


@pytest.mark.parametrize("keep", sorted(DELETED_BY_RETENTION))
@pytest.mark.parametrize("name", sorted(CONFORMANCE))
async def test_conformance_with_keep_checkpoints_fails_only_where_it_deletes(
    name: str, keep: int
) -> None:
    report, inner_caps = await run_conformance(name, CONFORMANCE[name], keep_checkpoints=keep)
    failed = {
        k: {str(f).split(":")[0] for f in r.failures}
        for k, r in report.results.items()
        if r.failures
    }
    # Only tests that read an older checkpoint back fail; every other one, and every
    # optional capability claimed, passes.
    assert failed == DELETED_BY_RETENTION[keep]
    assert {k for k, r in report.results.items() if r.detected} == inner_caps


@pytest.mark.parametrize(
    "retention",
    [{}, {"ttl": ThreadTTL(idle=3600, strategy="keep_latest")}, {"keep_checkpoints": 1},
     {"keep_checkpoints": 3}],
    ids=["none", "ttl", "keep1", "keep3"],
)
async def test_conformance_on_postgres(postgres: dict[str, Any], retention: dict[str, Any]) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection

    @asynccontextmanager
    async def postgres_saver() -> AsyncIterator[AsyncPostgresSaver]:
        async with await AsyncConnection.connect(**postgres) as conn:
            saver = AsyncPostgresSaver(conn)  # type: ignore[arg-type]
            await saver.setup()
            yield saver

    report, inner_caps = await run_conformance("AsyncPostgresSaver", postgres_saver, **retention)
    failed = {
        k: {str(f).split(":")[0] for f in r.failures} for k, r in report.results.items()
        if r.failures
    }
    assert failed == DELETED_BY_RETENTION.get(retention.get("keep_checkpoints"), {})
    assert "prune" in inner_caps and report.results["prune"].tests_passed > 0
    assert {k for k, r in report.results.items() if r.detected} == inner_caps
