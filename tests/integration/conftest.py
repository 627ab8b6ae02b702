"""Shared pieces for the LangGraph integration tests: a scripted chat model that checks
every context it receives, a real tool, delivery counting, and a PostgreSQL fixture."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.base import BaseStore
from pydantic import Field
from typing_extensions import TypedDict

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.langgraph import store_hook

POSTGRES_URL_ENV = "AGENTSTATE_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
NAMESPACE = ("memories", "alice")
SYSTEM_PROMPT = "You answer questions with the lookup tool."


@tool
def lookup(query: str) -> str:
    """Look a query up."""
    return f"result for {query}: " + "lorem ipsum " * 12


def assert_tool_pairs(messages: Sequence[BaseMessage]) -> None:
    """Fail unless each ai tool call is directly followed by exactly its results.

    That rules out an orphaned tool result (no call before it) and a dangling tool
    call (no result after it), the two shapes chat APIs reject.
    """
    i = 0
    while i < len(messages):
        message = messages[i]
        if isinstance(message, ToolMessage):
            raise AssertionError(
                f"orphaned tool result {message.tool_call_id!r} at index {i}: "
                f"{[type(m).__name__ for m in messages]}"
            )
        i += 1
        if isinstance(message, AIMessage) and message.tool_calls:
            wanted = [call["id"] for call in message.tool_calls]
            answered = []
            while i < len(messages) and isinstance(messages[i], ToolMessage):
                answered.append(messages[i].tool_call_id)  # type: ignore[union-attr]
                i += 1
            if sorted(answered) != sorted(wanted):  # type: ignore[type-var]
                raise AssertionError(
                    f"dangling tool call: ai message {message.id!r} issued {wanted} "
                    f"but is followed by results for {answered}"
                )


def build_script(turns: int) -> list[AIMessage]:
    """The model's replies, in call order: per turn 0, 1 or 2 tool calls, then an answer."""
    script: list[AIMessage] = []
    for turn in range(turns):
        calls = (1, 2, 0)[turn % 3]
        if calls:
            script.append(
                AIMessage(
                    content="",
                    id=f"ai-{turn}-call",
                    tool_calls=[
                        {"name": "lookup", "args": {"query": f"q{turn}.{k}"}, "id": f"c{turn}.{k}"}
                        for k in range(calls)
                    ],
                )
            )
        script.append(AIMessage(content=f"answer {turn} " + "dolor sit " * 8, id=f"ai-{turn}"))
    return script


class ScriptedChatModel(GenericFakeChatModel):
    """Replies from a script; on every call, first checks the context it was given."""

    #: Every context received, system messages included.
    contexts: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        body = [m for m in messages if not isinstance(m, SystemMessage)]
        assert_tool_pairs(body)
        self.contexts.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def scripted_model(turns: int) -> ScriptedChatModel:
    return ScriptedChatModel(messages=iter(build_script(turns)))


def human(turn: int) -> HumanMessage:
    return HumanMessage(content=f"turn {turn}: please look this up", id=f"human-{turn}")


#: How a fact is written in scripted conversations: ``FACT[key=value]``, verbatim.
FACT = re.compile(r"FACT\[[^\]]*\]")


def facts_in(messages: Sequence[BaseMessage]) -> set[str]:
    """Every fact written in ``messages``' text."""
    return {f for m in messages for f in FACT.findall(m.text)}


class FactSummaryModel(BaseChatModel):
    """A scripted summary model: records every prompt it gets and answers with each
    distinct fact it was shown, as an LLM told to keep facts verbatim would.

    Calls numbered in ``fail_on`` (1-based) raise instead, like a provider outage.
    """

    #: The text of every prompt received, in call order.
    prompts: list[str] = Field(default_factory=list)
    fail_on: set[int] = Field(default_factory=set)

    @property
    def _llm_type(self) -> str:
        return "fact-summary"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        text = "\n".join(m.text for m in messages)
        self.prompts.append(text)
        if len(self.prompts) in self.fail_on:
            raise ConnectionError("summary model unavailable")
        found = sorted(set(FACT.findall(text)), key=text.index)
        reply = "## Facts\n" + "\n".join(f"- {f}" for f in found)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])


@dataclass
class Deliveries:
    """An on_prune hook counting how often each message id reached the hooks."""

    counts: Counter[str] = field(default_factory=Counter)
    namespaces: set[Any] = field(default_factory=set)

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        self.namespaces.add(namespace if not isinstance(namespace, list) else tuple(namespace))
        for message in pruned:
            self.counts[message.id] += 1


@dataclass
class Memory:
    """A reducer wired to a store and a delivery counter."""

    reducer: MessageReducer
    deliveries: Deliveries


def make_memory(
    store: BaseStore, *, preserve_first: bool = True, min_messages: int = 10, max_messages: int = 20
) -> Memory:
    deliveries = Deliveries()
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=min_messages,
            max_messages=max_messages,
            preserve_first=preserve_first,
            on_prune=[store_hook(store), deliveries],
        )
    )
    return Memory(reducer, deliveries)


def ids_seen(model: ScriptedChatModel, final: Sequence[BaseMessage]) -> set[str]:
    """Ids of every message that ever was in the conversation (none is lost unseen)."""
    seen = {m.id for context in model.contexts for m in context if m.id is not None}
    seen.update(m.id for m in final if m.id is not None)
    return seen


def assert_memory_complete(
    items: Sequence[Any],
    namespaces: Sequence[tuple[str, ...]],
    memory: Memory,
    model: ScriptedChatModel,
    final: Sequence[BaseMessage],
    system_ids: Collection[str] = (),
) -> None:
    """Every message that left the conversation is in the store, once, under NAMESPACE."""
    assert list(namespaces) == [NAMESPACE]
    stored = {item.key for item in items}
    kept = {m.id for m in final}
    gone = ids_seen(model, final) - kept - set(system_ids)
    assert gone, "the run never pruned anything"
    assert stored == gone
    assert set(memory.deliveries.counts) == gone
    assert max(memory.deliveries.counts.values()) == 1, memory.deliveries.counts.most_common(3)
    assert memory.deliveries.namespaces == {NAMESPACE}
    by_key = {item.key: item.value for item in items}
    for turn_id in (k for k in gone if k.startswith("ai-") and k.endswith("-call")):
        assert by_key[turn_id]["role"] == "ai"
        assert by_key[turn_id]["tool_calls"][0]["name"] == "lookup"
        assert by_key[turn_id]["pruned_at"]


def max_context(model: ScriptedChatModel) -> int:
    return max(len([m for m in c if not isinstance(m, SystemMessage)]) for c in model.contexts)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A reachable PostgreSQL URL, or a skip saying how to provide one."""
    psycopg = pytest.importorskip("psycopg")
    url = os.environ.get(POSTGRES_URL_ENV, DEFAULT_POSTGRES_URL)
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        pytest.skip(
            f"PostgreSQL is not reachable at {url} ({str(exc).splitlines()[0]}); start a server "
            f"with trust auth and a database 'test', or set {POSTGRES_URL_ENV} to "
            "postgresql://USER@HOST:PORT/DB"
        )
    yield url


@pytest.fixture
def postgres(postgres_url: str) -> Iterator[dict[str, Any]]:
    """psycopg ``connect`` arguments for a fresh schema, dropped afterwards, so reruns
    and parallel runs never collide (what LangGraph's Postgres classes need, too)."""
    import psycopg
    from psycopg.rows import dict_row

    schema = f"agentstate_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield {
            "conninfo": postgres_url,
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "options": f"-c search_path={schema}",
        }
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def message_graph(
    model: Any, merge: Any, checkpointer: Any, tools: Sequence[Any] = (lookup,)
) -> Any:
    """agent -> tools -> agent ... over a ``messages`` channel merged by ``merge``."""
    # Functional syntax: the class form would resolve ``merge`` from module globals.
    state = TypedDict("state", {"messages": Annotated[list[AnyMessage], merge]})  # noqa: UP013

    def agent(s: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [model.invoke(s["messages"])]}

    async def aagent(s: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(s["messages"])]}

    builder = StateGraph(state)
    builder.add_node("agent", RunnableLambda(agent, afunc=aagent))
    builder.add_node("tools", ToolNode(list(tools)))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def turn_input(turn: int) -> dict[str, Any]:
    """Graph input for a turn of ``message_graph``: the system message comes first."""
    if turn == 0:
        return {"messages": [SystemMessage(content=SYSTEM_PROMPT, id="system"), human(0)]}
    return {"messages": [human(turn)]}


@dataclass(frozen=True)
class Kit:
    """What the agent tests share, handed out by the ``kit`` fixture."""

    namespace: tuple[str, ...] = NAMESPACE
    system_prompt: str = SYSTEM_PROMPT
    tools: tuple[Any, ...] = (lookup,)
    model: Callable[[int], ScriptedChatModel] = scripted_model
    human: Callable[[int], HumanMessage] = human
    memory: Callable[..., Memory] = make_memory
    assert_memory_complete: Callable[..., None] = assert_memory_complete
    assert_tool_pairs: Callable[[Sequence[BaseMessage]], None] = assert_tool_pairs
    max_context: Callable[[ScriptedChatModel], int] = max_context
    message_graph: Callable[..., Any] = message_graph
    turn_input: Callable[[int], dict[str, Any]] = turn_input
    summary_model: Callable[..., FactSummaryModel] = FactSummaryModel
    facts_in: Callable[[Sequence[BaseMessage]], set[str]] = facts_in
    deliveries: Callable[[], Deliveries] = Deliveries


@pytest.fixture
def kit() -> Kit:
    return Kit()


#: Tool calls one turn needs, in order: ``(tool name, arguments)``.
TurnPlan = list[tuple[str, dict[str, Any]]]
_HANDLE = re.compile(r"^\[offloaded: [^\n]*?handle (ctx_[0-9a-f]+)")


class ReactiveChatModel(BaseChatModel):
    """Acts like an LLM working through a plan: one tool call at a time, then an answer.

    On each call it reads the current turn (from the last human message, which names
    the turn as ``"turn N: ..."``) and calls the first planned tool whose result it
    cannot see in its context: a step that was pruned away is called again. A result
    cleared to a placeholder counts as already fetched. An offloaded preview makes it
    read the original back once with ``recall`` (the tool's name), from the handle the
    preview names. When every step is visible it answers.
    """

    #: Per turn, the tool calls it needs.
    plans: list[TurnPlan] = Field(default_factory=list)
    #: Name of the tool reading an offloaded original back (``None``: never).
    recall: str | None = None
    #: Every context received, system messages included.
    contexts: list[list[BaseMessage]] = Field(default_factory=list)
    #: How often each ``(tool, arguments as JSON)`` was called.
    calls: Counter[tuple[str, str]] = Field(default_factory=Counter)
    replies: int = 0

    @property
    def _llm_type(self) -> str:
        return "reactive-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ReactiveChatModel:  # type: ignore[override]
        return self

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        self.replies += 1
        human = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
        turn = int(str(human.content).split(":")[0].split()[1])
        issued: dict[str, tuple[str, str]] = {}
        visible: set[tuple[str, str]] = set()
        previews: list[str] = []
        for m in messages:
            if isinstance(m, AIMessage):
                for call in m.tool_calls:
                    args = json.dumps(call["args"], sort_keys=True)
                    issued[str(call["id"])] = (call["name"], args)
            elif isinstance(m, ToolMessage) and m.tool_call_id in issued:
                visible.add(issued[m.tool_call_id])
                found = _HANDLE.match(str(m.content))
                if found:
                    previews.append(found.group(1))
        wanted = [(name, args) for name, args in self.plans[turn]]
        if self.recall is not None:
            wanted += [(self.recall, {"handle": h}) for h in previews]
        for name, args in wanted:
            key = (name, json.dumps(args, sort_keys=True))
            if key not in visible:
                self.calls[key] += 1
                call = {"name": name, "args": args, "id": f"call-{self.replies}"}
                return AIMessage(content="", tool_calls=[call], id=f"ai-{self.replies}")
        return AIMessage(content=f"answer {turn}", id=f"ai-{self.replies}")

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        body = [m for m in messages if not isinstance(m, SystemMessage)]
        assert_tool_pairs(body)
        self.contexts.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self._next(body))])


@pytest.fixture
def reactive_model() -> type[ReactiveChatModel]:
    """The LLM-like scripted model class (see :class:`ReactiveChatModel`)."""
    return ReactiveChatModel


# -- an agent that works in turns of several steps ---------------------------------------

TURN_QUESTION = "turn {turn}: please work through the steps"


def turn_question(turn: int) -> HumanMessage:
    return HumanMessage(content=TURN_QUESTION.format(turn=turn), id=f"question-{turn}")


@dataclass
class ToolRuns:
    """A ``step`` tool whose every run is counted; each result is ``words`` words long."""

    words: int = 12
    #: Ask for approval with ``interrupt()`` before each run (human in the loop).
    interrupt: bool = False
    runs: Counter[str] = field(default_factory=Counter)

    def tool(self) -> Any:
        @tool
        def step(query: str) -> str:
            """Do one step of the task."""
            note = ""
            if self.interrupt:
                from langgraph.types import interrupt

                note = f"{interrupt({'approve': query})} "
            self.runs[query] += 1  # a run that completes (a resumed tool starts over)
            return f"result {query}: {note}" + "lorem ipsum dolor sit amet " * (self.words // 5)

        return step


def _result_key(message: BaseMessage) -> str | None:
    text = message.content if isinstance(message.content, str) else ""
    if isinstance(message, ToolMessage) and text.startswith("result "):
        return text[len("result ") :].split(":", 1)[0]
    return None


@dataclass
class RequestCheck:
    """Every request a model got, checked with ``validate_history`` for each provider."""

    providers: tuple[str, ...] = ("openai", "anthropic")
    requests: int = 0
    invalid: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def __call__(self, messages: Sequence[BaseMessage]) -> None:
        from agentstate_reducer import validate_history

        self.requests += 1
        for provider in self.providers:
            problems = validate_history(list(messages), provider=provider)
            if problems:
                self.invalid[provider] += 1
                if len(self.examples) < 3:
                    self.examples.append(f"{provider}: {problems[0]}")


class TurnModel(GenericFakeChatModel):
    """Acts like an LLM working through ``steps`` tool calls per turn.

    It reads the question of its turn from the latest human message and calls the
    ``step`` tool for each step in order; a step whose result it cannot see in its
    context is called again (``chain=False``: it needs every result of the turn, so it
    goes back to the first missing one; ``chain=True``: it goes on from the latest result
    it sees, as an autonomous agent would). When it has what it needs it answers.
    """

    steps: int = 3
    chain: bool = False
    check: Any = None
    #: Every context received, system messages included.
    contexts: list[list[BaseMessage]] = Field(default_factory=list)
    calls: int = 0
    lost_question: int = 0

    def bind_tools(self, tools: Any, **kwargs: Any) -> TurnModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        from langchain_core.outputs import ChatGeneration, ChatResult

        self.contexts.append(list(messages))
        if self.check is not None:
            self.check(messages)
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        asked = [
            i
            for i, m in enumerate(messages)
            if isinstance(m, HumanMessage) and isinstance(m.content, str)
            and m.content.startswith("turn ")
        ]
        if not asked:
            self.lost_question += 1
            return AIMessage(content="I lost the question.", id=f"lost-{self.calls}")
        text = messages[asked[-1]].content
        assert isinstance(text, str)
        turn = int(text.split()[1].rstrip(":"))
        seen = {_result_key(m) for m in messages[asked[-1] :]} - {None}
        done = [s for s in range(self.steps) if f"{turn}.{s}" in seen]
        if self.chain:
            nxt = max(done) + 1 if done else 0
        else:
            nxt = next((s for s in range(self.steps) if f"{turn}.{s}" not in seen), self.steps)
        if nxt < self.steps:
            call = {"name": "step", "args": {"query": f"{turn}.{nxt}"},
                    "id": f"call-{turn}-{nxt}-{self.calls}"}
            return AIMessage(content="", tool_calls=[call], id=f"ai-{turn}-{nxt}-{self.calls}")
        return AIMessage(content=f"answer {turn}: all {self.steps} steps done", id=f"answer-{turn}")
