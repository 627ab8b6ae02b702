"""Shared pieces for the LangGraph integration tests: the scripted LLM of the scenario
tests (:class:`AgentModel`, which checks every request for every provider), a fixed
script model, real tools and delivery counting; the fixtures are in ``conftest.py``."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

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

from agentstate_reducer import MessageReducer, ReducerConfig, validate_history
from agentstate_reducer.langgraph import store_hook
from agentstate_reducer.validate import PROVIDERS

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


# -- the scripted LLM: an agent that works through a plan per turn ------------------------

#: Tool calls one turn needs, in order: ``(tool name, arguments)``.
TurnPlan = list[tuple[str, dict[str, Any]]]
TURN_QUESTION = "turn {turn}: please work through the steps"
_HANDLE = re.compile(r"^\[offloaded: [^\n]*?handle (ctx_[0-9a-f]+)")


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


def as_gemini_contents(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The ``contents`` of the Gemini request a LangChain chat model builds from
    ``messages``: system messages go to the system instruction, a human message is a
    user content, an ai message a model content (its text, then one ``functionCall`` part
    per call), and the results of a call turn one user content of ``functionResponse``
    parts, in order."""
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for m in messages:
        if isinstance(m, SystemMessage):
            continue
        if isinstance(m, ToolMessage):
            part = {
                "functionResponse": {
                    "name": names.get(m.tool_call_id, m.name or ""),
                    "response": {"output": m.text},
                }
            }
            last = contents[-1] if contents else None
            if last and last["role"] == "user" and "functionResponse" in last["parts"][-1]:
                last["parts"].append(part)
            else:
                contents.append({"role": "user", "parts": [part]})
            continue
        parts: list[dict[str, Any]] = [{"text": m.text}] if m.text else []
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                names[str(call["id"])] = call["name"]
                parts.append({"functionCall": {"name": call["name"], "args": call["args"]}})
        contents.append({"role": "model" if isinstance(m, AIMessage) else "user", "parts": parts})
    return contents


def as_bedrock_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The ``messages`` of the Converse request a LangChain chat model builds from
    ``messages``: system messages go to ``system``, a human message is a user message of
    ``text`` blocks, a tool message a user message with one ``toolResult`` block, an ai
    message an assistant message (its text, then one ``toolUse`` block per call); then
    runs of one role are merged into one message, as the client does before sending."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            continue
        if isinstance(m, ToolMessage):
            result = {"toolUseId": m.tool_call_id, "content": [{"text": m.text}]}
            role, blocks = "user", [{"toolResult": result}]
        else:
            blocks = [{"text": m.text}] if m.text else []
            role = "assistant" if isinstance(m, AIMessage) else "user"
            if isinstance(m, AIMessage):
                for call in m.tool_calls:
                    use = {"toolUseId": call["id"], "name": call["name"], "input": call["args"]}
                    blocks.append({"toolUse": use})
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


#: How a provider whose validator reads its own wire shape gets LangChain messages.
_WIRE: dict[str, Callable[[Sequence[BaseMessage]], list[Any]]] = {
    "gemini": as_gemini_contents,
    "bedrock": as_bedrock_messages,
}


@dataclass
class RequestCheck:
    """Every request a model got, checked with ``validate_history`` for every provider
    the package validates (``PROVIDERS``: a provider added there is checked here too),
    as that provider's client would send it (Gemini: :func:`as_gemini_contents`, Bedrock:
    :func:`as_bedrock_messages`)."""

    providers: tuple[str, ...] = PROVIDERS
    requests: int = 0
    invalid: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def __call__(self, messages: Sequence[BaseMessage]) -> None:
        self.requests += 1
        for provider in self.providers:
            wire = _WIRE.get(provider)
            sent = wire(messages) if wire is not None else list(messages)
            problems = validate_history(sent, provider=provider)
            if problems:
                self.invalid[provider] += 1
                if len(self.examples) < 3:
                    self.examples.append(f"{provider}: {problems[0]}")


def _call_key(name: str, args: Any) -> tuple[str, str]:
    return name, json.dumps(args, sort_keys=True)


_NOTED = re.compile(r"^- (\S+) (\{.*?\})(?: -> ctx_[0-9a-f]+)?\]?$", re.M)
_EARLIER = re.compile(r"^- and (\d+) earlier calls", re.M)


def _noted(messages: Sequence[BaseMessage], plan: TurnPlan) -> set[tuple[str, str]]:
    """The calls a turn note in ``messages`` says were done, as an LLM reads it: each
    listed call, and for "and N earlier calls" the first N calls of the plan. Only a note
    after the turn's question counts: one before it speaks of an earlier turn."""
    seen: set[tuple[str, str]] = set()
    asked = [
        i for i, m in enumerate(messages)
        if isinstance(m, HumanMessage) and isinstance(m.content, str)
        and m.content.startswith("turn ")
    ]
    for m in messages[asked[-1] if asked else 0 :]:
        text = m.content if isinstance(m, HumanMessage) else None
        if not isinstance(text, str) or not text.startswith("[turn note: "):
            continue
        for name, args in _NOTED.findall(text):
            try:
                seen.add(_call_key(name, json.loads(args)))
            except ValueError:
                continue
        earlier = _EARLIER.search(text)
        if earlier:
            seen.update(_call_key(n, a) for n, a in plan[: int(earlier.group(1))])
    return seen


class AgentModel(BaseChatModel):
    """Acts like an LLM working through a plan per turn: one tool call at a time, then
    an answer. The one scripted model of the scenario tests.

    Each call reads its turn from the latest human message ``"turn N: ..."`` (with none
    left in its context it says it lost the question, counted in ``lost_question``).
    The turn's plan is ``plans[N]``, or without plans ``steps`` calls of the ``step``
    tool (:class:`ToolRuns`) with query ``"N.k"``. A planned call counts as done when a
    result of it is in the context, a cleared placeholder included (already fetched)
    but not an error result (a synthetic one for an abandoned call). It calls the first
    planned call not done (``chain=True``: the one after the latest done, as an
    autonomous agent goes on), so a step pruned away is called again. An offloaded
    preview in its context makes it read the original back once with the ``recall``
    tool, from the handle the preview names. With everything done it answers
    ``"answer N: ..."`` (id ``answer-N``).

    Every request is checked first: each call directly followed by its results
    (``pairs``), and :class:`RequestCheck` (``check``) for every provider.
    """

    #: Per turn, the tool calls it needs (``None``: ``steps`` calls of ``step``).
    plans: list[TurnPlan] | None = None
    steps: int = 3
    chain: bool = False
    #: Name of the tool reading an offloaded original back (``None``: never).
    recall: str | None = None
    pairs: bool = True
    check: Any = Field(default_factory=RequestCheck)
    #: Every context received, system messages included.
    contexts: list[list[BaseMessage]] = Field(default_factory=list)
    #: How often each ``(tool, arguments as JSON)`` was called.
    calls: Counter[tuple[str, str]] = Field(default_factory=Counter)
    replies: int = 0
    lost_question: int = 0

    @property
    def _llm_type(self) -> str:
        return "agent-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> AgentModel:  # type: ignore[override]
        return self

    def plan(self, turn: int) -> TurnPlan:
        if self.plans is not None:
            return self.plans[turn]
        return [("step", {"query": f"{turn}.{k}"}) for k in range(self.steps)]

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.contexts.append(list(messages))
        self.check(messages)
        if self.pairs:
            assert_tool_pairs([m for m in messages if not isinstance(m, SystemMessage)])
        self.replies += 1
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        asked = [
            m.content
            for m in messages
            if isinstance(m, HumanMessage) and isinstance(m.content, str)
            and m.content.startswith("turn ")
        ]
        if not asked:
            self.lost_question += 1
            return AIMessage(content="I lost the question.", id=f"lost-{self.replies}")
        turn = int(asked[-1].split()[1].rstrip(":"))
        issued: dict[str, tuple[str, str]] = {}
        done: set[tuple[str, str]] = set()
        previews: list[str] = []
        for m in messages:
            if isinstance(m, AIMessage):
                for call in m.tool_calls:
                    issued[str(call["id"])] = _call_key(call["name"], call["args"])
            elif isinstance(m, ToolMessage) and m.tool_call_id in issued and m.status != "error":
                done.add(issued[m.tool_call_id])
                found = _HANDLE.match(str(m.content))
                if found:
                    previews.append(found.group(1))
        plan = self.plan(turn)
        done |= _noted(messages, plan)
        finished = [k for k, (name, args) in enumerate(plan) if _call_key(name, args) in done]
        if self.chain:
            todo = list(range(max(finished) + 1 if finished else 0, len(plan)))
        else:
            todo = [k for k in range(len(plan)) if k not in finished]
        wanted = [plan[k] for k in todo]
        if self.recall is not None:
            wanted += [(self.recall, {"handle": h}) for h in previews]
        for name, args in wanted:
            key = _call_key(name, args)
            if key not in done:
                self.calls[key] += 1
                call = {"name": name, "args": args, "id": f"call-{turn}-{self.replies}"}
                return AIMessage(content="", tool_calls=[call], id=f"ai-{turn}-{self.replies}")
        return AIMessage(content=f"answer {turn}: all {len(plan)} steps done", id=f"answer-{turn}")
