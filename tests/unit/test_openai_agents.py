"""The OpenAI Agents SDK integration: ``reducing_input_filter`` and ``ReducingSession``.

Scenario tests with real runs are in ``tests/integration/test_openai_agents_sdk.py``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from agents import Agent, RunContextWrapper, SessionSettings, SQLiteSession, function_tool
from agents.run_config import CallModelData, ModelInputData

from agentstate_reducer import MessageReducer, ReducerConfig, agent_config, validate_history
from agentstate_reducer.openai_agents import ReducingSession, reducing_input_filter
from agentstate_reducer.read import INJECTED_KEY
from agentstate_reducer.tokens import request_overhead, resolve_token_counter


def turn(n: int) -> list[dict[str, Any]]:
    """A question, a response (reasoning and a call), the call's output, the answer."""
    return [
        {"role": "user", "content": f"question {n}"},
        {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": "hm"}]},
        {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "lookup",
         "arguments": "{}", "status": "completed"},
        {"type": "function_call_output", "call_id": f"call_{n}", "output": f"result {n}"},
        {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": f"answer {n}", "annotations": []}]},
    ]


def data(items: list[Any], agent: Any = None, instructions: str | None = "be brief") -> Any:
    agent = agent or Agent(name="a", instructions=instructions)
    return CallModelData(ModelInputData(input=items, instructions=instructions), agent, None)


@dataclass
class Hook:
    got: list[tuple[Any, Any]] = field(default_factory=list)

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        self.got.extend((namespace, item) for item in pruned)


async def test_filter_bounds_each_call_and_hands_each_item_over_once() -> None:
    hook = Hook()
    reducer = MessageReducer(config=agent_config(min_messages=5, max_messages=10, on_prune=[hook]))
    reduce_input = reducing_input_filter(reducer, namespace=lambda d: ("memories", "bob"))
    history: list[Any] = []
    for n in range(6):
        history += turn(n)
        sent = await reduce_input(data(list(history)))
        assert isinstance(sent, ModelInputData) and sent.instructions == "be brief"
        assert len(sent.input) <= 10
        assert validate_history(sent.input, provider="openai-responses") == []
    # The SDK hands the whole run's items every time; each pruned item went over once.
    ids = [id(item) for _, item in hook.got]
    assert len(ids) == len(set(ids)) > 0
    assert {ns for ns, _ in hook.got} == {("memories", "bob")}


async def test_filter_reduces_its_last_survivors_plus_what_the_run_added() -> None:
    reducer = MessageReducer(config=agent_config(min_messages=5, max_messages=10))
    given: list[list[Any]] = []
    areduce = reducer.areduce

    async def spy(messages: Any, **kwargs: Any) -> Any:
        given.append(list(messages))
        return await areduce(messages, **kwargs)

    reducer.areduce = spy  # type: ignore[method-assign]
    reduce_input = reducing_input_filter(reducer)
    run = turn(0) + turn(1) + turn(2)
    first = await reduce_input(data(list(run)))
    kept = [m for m in given[0] if any(m is s for s in first.input)]
    assert len(kept) < len(run)
    # The next call's input extends the last one: its survivors, then the new items.
    await reduce_input(data([*run, *turn(3)]))
    assert given[1][: len(kept)] == kept and all(
        a is b for a, b in zip(given[1], kept, strict=False)
    )
    assert given[1][len(kept) :] == turn(3)
    # Another input (a new run, another conversation) is reduced whole.
    await reduce_input(data(turn(7) + turn(8)))
    assert given[2] == turn(7) + turn(8)
    # So is the same input under another namespace.
    reduce_bob = reducing_input_filter(reducer, namespace=lambda d: d.agent.name)
    await reduce_bob(data(list(run)))
    await reduce_bob(data(list(run), Agent(name="b", instructions="be brief")))
    assert given[-1] == run


def long_turn(n: int, steps: int, words: int) -> list[dict[str, Any]]:
    """A question, ``steps`` calls each with an output of about ``words`` tokens, an answer."""
    items: list[dict[str, Any]] = [{"role": "user", "content": f"question {n}"}]
    for k in range(steps):
        items += [
            {"type": "function_call", "id": f"fc_{n}_{k}", "call_id": f"call_{n}_{k}",
             "name": "lookup", "arguments": "{}", "status": "completed"},
            {"type": "function_call_output", "call_id": f"call_{n}_{k}",
             "output": f"result {n}.{k}: " + "lorem ipsum dolor sit amet " * (words // 5)},
        ]
    return items + turn(n)[-1:]


async def test_a_turn_note_the_session_sent_unmarked_is_the_reducers_own_again() -> None:
    hook = Hook()
    reducer = MessageReducer(config=agent_config(
        max_tokens=3000, target_tokens=2000, token_counter="approximate", on_prune=[hook]
    ))
    session = ReducingSession(SQLiteSession("noted"), reducer)
    await session.add_items(long_turn(0, 60, 1300))
    stored = await session.get_items()
    notes = [i for i in stored if str(i.get("content", "")).startswith("[turn note: ")]
    assert len(notes) == 1 and INJECTED_KEY not in notes[0]  # sent as the API takes it
    # The next run's input is what the session sent, then the run's items: the filter
    # gives the reducer its note back, so pruning it hands nothing over.
    reduce_input = reducing_input_filter(reducer)
    history = list(stored)
    for n in range(1, 4):
        history += long_turn(n, 2, 700)
        sent = await reduce_input(data(list(history)))
        assert all(INJECTED_KEY not in i for i in sent.input)
    assert not any(i is notes[0] or i == notes[0] for i in sent.input)  # the note went
    handed = [str(i.get("content", "")) for _, i in hook.got]
    assert handed and not [t for t in handed if t.startswith("[turn note: ")]


async def test_filter_counts_tools_and_instructions_in_token_mode() -> None:
    @function_tool
    def lookup(query: str) -> str:
        """Look a query up in a long, long catalogue."""
        return query

    reducer = MessageReducer(
        config=ReducerConfig(max_tokens=4000, target_tokens=3000, token_counter="approximate")
    )
    instructions = "Answer in French. " * 40
    agent = Agent(name="a", instructions=instructions, tools=[lookup])
    await reducing_input_filter(reducer)(data(turn(0), agent, instructions))
    schema = {"type": "function", "name": "lookup", "description": lookup.description,
              "parameters": lookup.params_json_schema}
    counter = resolve_token_counter("approximate")
    expected = request_overhead(counter, tools=[schema], system_prompt=instructions)
    assert reducer._overhead == expected > request_overhead(counter, system_prompt=instructions)


class SpySession:
    """A session in memory that records how it was written."""

    def __init__(self) -> None:
        self.session_id = "spy"
        self.session_settings = None
        self.items: list[Any] = []
        self.clears = 0

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return list(self.items if limit is None else self.items[-limit:])

    async def add_items(self, items: list[Any]) -> None:
        self.items.extend(items)

    async def pop_item(self) -> Any:
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        self.clears += 1
        self.items.clear()


async def test_session_appends_under_the_window_and_rewrites_over_it() -> None:
    inner = SpySession()
    seen_at_hook: list[int] = []

    def hook(pruned: list[Any], namespace: Any) -> None:
        seen_at_hook.append(len(inner.items))  # the store still holds them when handed over

    reducer = MessageReducer(config=agent_config(min_messages=5, max_messages=10, on_prune=[hook]))
    session = ReducingSession(inner, reducer)
    assert session.session_id == "spy" and session.namespace == ("memories", "spy")
    await session.add_items(turn(0))
    assert inner.clears == 0 and len(inner.items) == 5
    for n in range(1, 6):
        await session.add_items(turn(n))
    assert inner.clears > 0 and len(inner.items) <= 10
    assert seen_at_hook and all(size > 10 - 5 for size in seen_at_hook)
    assert validate_history(await session.get_items(), provider="openai-responses") == []
    assert await session.pop_item() == turn(5)[-1]
    await session.clear_session()
    assert await session.get_items() == []


async def test_concurrent_adds_never_interleave() -> None:
    inner = SpySession()
    hook = Hook()
    reducer = MessageReducer(config=agent_config(min_messages=10, max_messages=20, on_prune=[hook]))
    session = ReducingSession(inner, reducer)
    await asyncio.gather(*(session.add_items(turn(n)) for n in range(8)))
    stored = [i for i in inner.items]
    handed = [i for _, i in hook.got]
    assert sorted(map(repr, stored + handed)) == sorted(repr(i) for n in range(8) for i in turn(n))


async def test_summaries_are_stored_marked_and_read_unmarked() -> None:
    inner = SQLiteSession("s")
    config = ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=lambda p: f"{len(p)} items",
        inject_summary=True,
    )
    session = ReducingSession(inner, MessageReducer(config=config))
    for n in range(4):
        await session.add_items(turn(n))
    stored = await inner.get_items()
    assert any(INJECTED_KEY in item for item in stored)
    read = await session.get_items()
    assert all(INJECTED_KEY not in item for item in read)
    assert validate_history(read, provider="openai-responses") == []


def test_bad_arguments() -> None:
    reducer = MessageReducer()
    with pytest.raises(TypeError, match="MessageReducer"):
        reducing_input_filter("nope")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Session protocol"):
        ReducingSession(object(), reducer)
    with pytest.raises(TypeError, match="MessageReducer"):
        ReducingSession(SpySession(), 3)  # type: ignore[arg-type]


def test_missing_agents_sdk_names_the_extra() -> None:
    script = textwrap.dedent(
        """
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "agents":
                    raise ImportError("blocked " + name)
                return None

        sys.meta_path.insert(0, Block())
        try:
            import agentstate_reducer.openai_agents
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert 'pip install "agentstate-reducer[openai-agents]"' in out.stdout


async def test_over_budget_is_warned_once_per_namespace_and_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A 5-item turn in progress is never cut apart, so a 3-message budget is exceeded.
    reducer = MessageReducer(config=agent_config(min_messages=2, max_messages=3))
    caplog.set_level("WARNING", logger="agentstate_reducer")
    for where in ("alice", "alice", "bob"):
        await reducing_input_filter(reducer, namespace=where)(data(turn(0)))
    session = ReducingSession(SpySession(), reducer)
    await session.add_items(turn(0))
    await session.add_items(turn(0)[-1:])
    warned = [r.getMessage() for r in caplog.records if "went over its budget" in r.getMessage()]
    assert len(warned) == 3, warned
    assert "'alice'" in warned[0] and "'bob'" in warned[1] and "'spy'" in warned[2]
    assert "5 messages kept, budget 3" in warned[0]


def test_twenty_threads_and_five_loops_store_every_item() -> None:
    # Nothing to prune: every add must reach the store, whichever loop or thread made it.
    inner = SQLiteSession("crowd")
    session = ReducingSession(inner, MessageReducer(config=ReducerConfig(max_messages=10_000)))
    sent = crowd_adds(session)
    stored = asyncio.run(inner.get_items())
    assert sorted(i["content"] for i in stored) == sorted(sent)
    inner.close()


def test_concurrent_rewrites_lose_nothing() -> None:
    # Pruning on the way: each item is in the store or was handed over, once, never lost.
    inner = SQLiteSession("crowd")
    hook = Hook()
    config = ReducerConfig(min_messages=20, max_messages=40, on_prune=[hook])
    reducer = MessageReducer(config=config)
    session = ReducingSession(inner, reducer)
    sent = crowd_adds(session)
    stored = [i["content"] for i in asyncio.run(inner.get_items())]
    handed = [i["content"] for _, i in hook.got]
    assert len(stored) <= 40 and handed
    assert sorted(stored + handed) == sorted(sent)
    inner.close()


def crowd_adds(session: ReducingSession, threads: int = 20, loops: int = 5) -> list[str]:
    """Each of ``threads`` threads adds 5 items through its own loop (``asyncio.run``) and 5
    through one of ``loops`` shared loops, all at once; returns what was sent."""
    shared = [asyncio.new_event_loop() for _ in range(loops)]
    runners = [threading.Thread(target=loop.run_forever, daemon=True) for loop in shared]
    for runner in runners:
        runner.start()
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        async def own_loop() -> None:
            items = [{"role": "user", "content": f"t{n} own {k}"} for k in range(5)]
            await asyncio.gather(*(session.add_items([item]) for item in items))

        try:
            start.wait(timeout=30)
            futures = [
                asyncio.run_coroutine_threadsafe(
                    session.add_items([{"role": "user", "content": f"t{n} shared {k}"}]),
                    shared[n % loops],
                )
                for k in range(5)
            ]
            asyncio.run(own_loop())
            for future in futures:
                future.result(timeout=60)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=120)
    for loop in shared:
        loop.call_soon_threadsafe(loop.stop)
    for runner in runners:
        runner.join(timeout=5)
    for loop in shared:
        loop.close()
    assert not errors, errors
    assert not any(thread.is_alive() for thread in workers)
    return [f"t{n} {where} {k}" for n in range(threads) for where in ("own", "shared")
            for k in range(5)]


class TenantSession(SpySession):
    """A context-aware session: every history method takes ``wrapper`` (the SDK's opt-in)."""

    def __init__(self) -> None:
        super().__init__()
        self.scopes: dict[str, list[Any]] = {}

    def _items(self, wrapper: Any) -> list[Any]:
        return self.scopes.setdefault("default" if wrapper is None else wrapper.context, [])

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Any]:
        items = self._items(wrapper)
        return list(items if limit is None else items[-limit:])

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        self._items(wrapper).extend(items)

    async def pop_item(self, *, wrapper: Any = None) -> Any:
        items = self._items(wrapper)
        return items.pop() if items else None

    async def clear_session(self, *, wrapper: Any = None) -> None:
        self.clears += 1
        self._items(wrapper).clear()


async def test_scopes_are_kept_through_rewrites() -> None:
    hook = Hook()
    reducer = MessageReducer(config=agent_config(min_messages=5, max_messages=10, on_prune=[hook]))
    inner = TenantSession()
    session = ReducingSession(
        inner, reducer, namespace=lambda w: ("memories", w.context if w else "none")
    )
    alice, bob = RunContextWrapper(context="alice"), RunContextWrapper(context="bob")
    for n in range(6):
        await session.add_items(turn(n), wrapper=alice)
    await session.add_items(turn(100), wrapper=bob)
    assert inner.clears > 0 and "default" not in inner.scopes
    assert inner.scopes["bob"] == turn(100)
    assert len(inner.scopes["alice"]) <= 10
    assert {ns for ns, _ in hook.got} == {("memories", "alice")}
    assert await session.get_items(wrapper=bob) == turn(100)
    assert await session.get_items(1, wrapper=alice) == turn(5)[-1:]
    assert await session.pop_item(wrapper=bob) == turn(100)[-1]
    await session.clear_session(wrapper=alice)
    assert inner.scopes["alice"] == [] and len(inner.scopes["bob"]) == 4


async def test_a_session_without_the_opt_in_gets_no_wrapper() -> None:
    inner = SpySession()
    session = ReducingSession(inner, MessageReducer())
    await session.add_items(turn(0), wrapper=RunContextWrapper(context="alice"))
    assert inner.items == turn(0)


class NoLimitSession(SpySession):
    async def get_items(self) -> list[Any]:  # type: ignore[override]
        return list(self.items)


async def test_limit_reaches_the_inner_session_only_when_it_takes_one() -> None:
    session = ReducingSession(NoLimitSession(), MessageReducer())
    await session.add_items(turn(0))
    assert await session.get_items() == turn(0)
    assert await session.get_items(limit=2) == turn(0)[-2:]
    assert await session.get_items(limit=0) == []
    assert await session.get_items(limit=-1) == turn(0)


async def test_a_settings_limit_never_costs_the_store_its_older_items() -> None:
    # The inner session reads only its latest 3 items by default: the reduce must see, and
    # the rewrite keep, all of them.
    inner = SQLiteSession("limited", session_settings=SessionSettings(limit=3))
    reducer = MessageReducer(config=agent_config(min_messages=8, max_messages=12))
    session = ReducingSession(inner, reducer)
    for n in range(4):
        await session.add_items(turn(n))
    everything = await inner.get_items(limit=1000)
    assert 8 <= len(everything) <= 12
    assert everything[-5:] == turn(3)
    assert await session.get_items() == everything[-3:]
    inner.close()


async def test_public_attributes_are_forwarded_and_private_ones_are_not() -> None:
    inner = SQLiteSession("fw")
    session = ReducingSession(inner, MessageReducer())
    assert session.db_path == inner.db_path == ":memory:"
    assert session.messages_table == "agent_messages"
    session.session_settings = SessionSettings(limit=7)
    assert inner.session_settings.limit == 7
    session.custom = "set on the inner session"
    assert inner.custom == "set on the inner session"  # type: ignore[attr-defined]
    del session.custom
    assert not hasattr(inner, "custom")
    # A private hook of the inner session would write past the reducer: not forwarded.
    assert hasattr(inner, "_get_compaction_snapshot")
    assert not hasattr(session, "_get_compaction_snapshot")
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        session.nope  # noqa: B018
    session.close()
    with pytest.raises(RuntimeError, match="closed"):
        await inner.get_items()


async def test_async_with_goes_to_the_inner_session() -> None:
    class Managed(SpySession):
        entered = exited = 0

        async def __aenter__(self) -> Managed:
            self.entered += 1
            return self

        async def __aexit__(self, *exc: Any) -> None:
            self.exited += 1

    inner = Managed()
    async with ReducingSession(inner, MessageReducer()) as session:
        assert isinstance(session, ReducingSession)
    assert (inner.entered, inner.exited) == (1, 1)
    with pytest.raises(TypeError, match="async with"):
        async with ReducingSession(SpySession(), MessageReducer()):
            pass
