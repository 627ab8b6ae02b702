"""One LLM-like scripted agent for the turn scenarios, in each of the four integrations.

The same :class:`Policy` decides in every framework, as an LLM would: its turn is the
latest user text ``"turn N: ..."`` (none left: it lost the question); the turn's plan is
``N.0 .. N.k`` of the ``step`` tool plus one step per interjection ``"also: run step Q"``
typed after the question; a step counts as done when the request holds a result of it (a
cleared placeholder or an offloaded preview included, an error result not) or a turn
note naming it (``"- and N earlier calls"``: the first N steps of the plan). It calls the
first step not done, one call per response (so a step it cannot see is run again), and
answers ``"answer N: ..."`` when none is left.

Each framework's model reads its own request into that view and records it in
:class:`Requests`: its tokens (the reducer's counter) against ``max_tokens`` plus the
request's latest step, and every provider's rules (``validate_history``; LangChain
messages as each client sends them, :class:`~conftest.RequestCheck`; PydanticAI messages
as they are; Agents SDK items as Responses input and as the SDK's own chat-completions
converter turns them). :class:`Agent` drives the real framework: ``create_agent`` +
``ReducingMiddleware``, ``StateGraph`` + ``ToolNode`` merged by ``reducing_add_messages``,
PydanticAI with ``ReducingCapability``, the Agents SDK with ``ReducingSession`` and
``reducing_input_filter``, each as its docs recommend.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import Agent as SDKAgent
from agents import RunConfig, Runner, SQLiteSession, function_tool
from agents.agent import ToolsToFinalOutputResult
from agents.items import ModelResponse as SDKResponse
from agents.models.chatcmpl_converter import Converter
from agents.models.interface import Model
from agents.usage import Usage
from integration_kit import _WIRE, message_graph
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import UsageLimits
from pydantic_ai.agent import ModelRequestNode
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from test_pydantic_ai_agents import pairing_problems

from agentstate_reducer import MessageReducer, validate_history
from agentstate_reducer.langgraph import ReducingMiddleware, reducing_add_messages
from agentstate_reducer.messages import package_note
from agentstate_reducer.openai_agents import ReducingSession, reducing_input_filter
from agentstate_reducer.pydantic_ai import ReducingCapability
from agentstate_reducer.validate import PROVIDERS

SYSTEM = "You work through the steps with the step tool."
INTEGRATIONS = ("middleware", "graph", "pydantic-ai", "agents-sdk")
#: What the user types while the agent works: one more step for the current turn.
INTERJECTION = "also: run step {query}"

_ALSO = re.compile(r"^also: run step (\S+)$")
_RESULT = re.compile(r"^result (\S+):")
_CALLED = re.compile(r"; called with (\{.*\})\]\s*$", re.S)
_NOTED = re.compile(r"^- step (\{.*?\})(?: -> ctx_[0-9a-f]+)?\]?$", re.M)
_EARLIER = re.compile(r"^- and (\d+) earlier calls", re.M)
NOTE_PREFIX = "[turn note: "


def result_text(query: str, words: int) -> str:
    """A step's result, about ``words`` tokens long."""
    return f"result {query}: " + "lorem ipsum dolor sit amet " * (words // 5)


def _query(args: Any) -> str | None:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    return args.get("query") if isinstance(args, dict) else None


def result_query(content: str, args: Any) -> str | None:
    """The step a result answers, as the model reads it: the call's arguments, else the
    ones a placeholder names, else the result's own first words."""
    query = _query(args)
    if query:
        return query
    called = _CALLED.search(content)
    if called and (query := _query(called.group(1))):
        return query
    found = _RESULT.match(content)
    return found.group(1) if found else None


@dataclass
class Policy:
    """The LLM's decision, given what it can read in one request."""

    #: turn -> how many steps its question asks for.
    steps: Callable[[int], int]
    #: How often each step was called (a step called twice is a re-run).
    calls: Counter[str] = field(default_factory=Counter)
    lost_question: int = 0
    #: The turn each request was expected to be about (set by the driver).
    expected: int = 0
    wrong_turn: int = 0
    #: Requests holding a turn note (the ladder dropped steps of the turn).
    noted: int = 0

    def plan(self, turn: int, texts: Sequence[str]) -> list[str]:
        plan = [f"{turn}.{k}" for k in range(self.steps(turn))]
        plan += [m.group(1) for t in texts if (m := _ALSO.match(t))]
        return plan

    def decide(self, texts: Sequence[str], done: set[str]) -> tuple[int | None, str | None]:
        """``texts``: the user texts of the request in order; ``done``: the steps whose
        results it holds. Returns the turn and the step to call (``None``: answer)."""
        asked = [i for i, t in enumerate(texts) if t.startswith("turn ")]
        if not asked:
            self.lost_question += 1
            return None, None
        turn = int(texts[asked[-1]].split()[1].rstrip(":"))
        if turn != self.expected:
            self.wrong_turn += 1
        after = texts[asked[-1] + 1 :]
        plan = self.plan(turn, after)
        seen = set(done)
        self.noted += any(t.startswith(NOTE_PREFIX) for t in after)
        for text in after:
            if not text.startswith(NOTE_PREFIX):
                continue
            seen.update(q for a in _NOTED.findall(text) if (q := _query(a)))
            if earlier := _EARLIER.search(text):
                seen.update(plan[: int(earlier.group(1))])
        for query in plan:
            if query not in seen:
                self.calls[query] += 1
                return turn, query
        return turn, None

    def answer(self, turn: int | None) -> str:
        return "I lost the question." if turn is None else f"answer {turn}: all steps done"


@dataclass
class Requests:
    """Every request the model got: its size against the budget, its problems."""

    max_tokens: int | None
    count: int = 0
    invalid: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    largest: int = 0
    #: The latest step of the largest request.
    largest_step: int = 0
    most_messages: int = 0
    #: Requests above max_tokens plus their latest step: ``(tokens, latest step)``.
    over: list[tuple[int, int]] = field(default_factory=list)

    def add(self, tokens: int, step: int, messages: int, problems: dict[str, list[Any]]) -> None:
        self.count += 1
        self.most_messages = max(self.most_messages, messages)
        if tokens > self.largest:
            self.largest, self.largest_step = tokens, step
        if self.max_tokens is not None and tokens > self.max_tokens + step:
            self.over.append((tokens, step))
        for provider, found in problems.items():
            if found:
                self.invalid[provider] += 1
                if len(self.examples) < 4:
                    self.examples.append(f"request {self.count}, {provider}: {found[0]}")


@dataclass
class Deliveries:
    """An ``on_prune`` hook counting what reached it: an edited original by its edit and
    handle, a pruned message by its id (PydanticAI: its repr; SDK items: their JSON)."""

    counts: Counter[str] = field(default_factory=Counter)
    #: What reached the hooks holding a turn note's text (never conversation).
    notes: list[str] = field(default_factory=list)

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        for m in pruned:
            text = json.dumps(m, default=str) if isinstance(m, dict) else repr(m)
            if NOTE_PREFIX in text:
                self.notes.append(text)
            note = package_note(m)
            if note is not None:
                key = f"{note.get('edit')} {note.get('handle')}"
            elif isinstance(m, dict):
                key = json.dumps(m, sort_keys=True, default=str)
            else:
                key = getattr(m, "id", None) or repr(m)
            self.counts[key] += 1

    @property
    def twice(self) -> list[str]:
        return [k[:80] for k, n in self.counts.items() if n > 1]


def _latest_step(counts: Sequence[int], first: int | None, last: int) -> int:
    return 0 if first is None else sum(counts[first : last + 1])


# -- LangChain: create_agent + ReducingMiddleware, StateGraph + reducing_add_messages --------


def langchain_problems(messages: Sequence[BaseMessage]) -> dict[str, list[Any]]:
    """Each provider's problems with ``messages`` as its LangChain client sends them."""
    out: dict[str, list[Any]] = {}
    for provider in PROVIDERS:
        wire = _WIRE.get(provider)
        out[provider] = validate_history(wire(messages) if wire else list(messages),
                                         provider=provider)
    return out


class LangChainModel(BaseChatModel):
    """The policy as a LangChain chat model."""

    policy: Any
    requests: Any
    reducer: Any
    replies: int = 0

    @property
    def _llm_type(self) -> str:
        return "turn-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> LangChainModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        body = [m for m in messages if not isinstance(m, SystemMessage)]
        counts = self.reducer.count_tokens(body)
        calls = [i for i, m in enumerate(body) if isinstance(m, AIMessage) and m.tool_calls]
        first = calls[-1] if calls else None
        last = first if first is not None else 0
        while last + 1 < len(body) and isinstance(body[last + 1], ToolMessage):
            last += 1
        self.requests.add(sum(counts), _latest_step(counts, first, last), len(body),
                          langchain_problems(body))
        texts = [m.text for m in body if isinstance(m, HumanMessage)]
        args = {c["id"]: c["args"] for m in body if isinstance(m, AIMessage) for c in m.tool_calls}
        done = {
            q
            for m in body
            if isinstance(m, ToolMessage) and m.status != "error"
            and (q := result_query(m.text, args.get(m.tool_call_id)))
        }
        turn, query = self.policy.decide(texts, done)
        self.replies += 1
        n = self.replies
        if query is None:
            reply = AIMessage(content=self.policy.answer(turn), id=f"answer-{n}")
        else:
            call = {"name": "step", "args": {"query": query}, "id": f"call-{n}"}
            reply = AIMessage(content="", tool_calls=[call], id=f"ai-{n}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


# -- PydanticAI: ReducingCapability ------------------------------------------------------------


def _pydantic_ai_texts(part: Any) -> str | None:
    content = part.content
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(c for c in content if isinstance(c, str))
    return None


def pydantic_ai_wire(messages: Sequence[Any], provider: str) -> list[dict[str, Any]]:
    """The Gemini ``contents`` or Bedrock Converse ``messages`` PydanticAI's model class
    sends for ``messages``: system prompts go to the request's system field, a request is
    one user content (prompts as text, tool returns as function responses / tool
    results), a response one model content (text, then one call part per tool call);
    Bedrock then merges runs of user messages into one, as PydanticAI does."""
    gemini = provider == "gemini"
    out: list[dict[str, Any]] = []
    for m in messages:
        parts: list[dict[str, Any]] = []
        if isinstance(m, ModelRequest):
            role = "user"
            for p in m.parts:
                if isinstance(p, UserPromptPart):
                    parts.append({"text": _pydantic_ai_texts(p) or ""})
                elif isinstance(p, ToolReturnPart | RetryPromptPart) and p.tool_name:
                    text = p.model_response() if isinstance(p, RetryPromptPart) else str(p.content)
                    if gemini:
                        parts.append({"function_response": {
                            "id": p.tool_call_id, "name": p.tool_name, "response": {"result": text}
                        }})
                    else:
                        parts.append({"toolResult": {
                            "toolUseId": p.tool_call_id, "content": [{"text": text}],
                        }})
                elif isinstance(p, RetryPromptPart):
                    parts.append({"text": p.model_response()})
        else:
            role = "model" if gemini else "assistant"
            for p in m.parts:
                if isinstance(p, TextPart) and p.content:
                    parts.append({"text": p.content})
                elif isinstance(p, ToolCallPart):
                    if gemini:
                        parts.append({"function_call": {
                            "id": p.tool_call_id, "name": p.tool_name, "args": p.args_as_dict()
                        }})
                    else:
                        parts.append({"toolUse": {
                            "toolUseId": p.tool_call_id, "name": p.tool_name,
                            "input": p.args_as_dict(),
                        }})
        if not parts:
            continue
        if gemini:
            out.append({"role": role, "parts": parts})
        elif out and out[-1]["role"] == role == "user":
            out[-1]["content"].extend(parts)
        else:
            out.append({"role": role, "content": parts})
    return out


def pydantic_ai_problems(messages: Sequence[Any]) -> dict[str, list[Any]]:
    """PydanticAI's own pairing rules; OpenAI's and Anthropic's on the messages as they
    are, Gemini's and Bedrock's on what PydanticAI sends them (:func:`pydantic_ai_wire`)."""
    out: dict[str, list[Any]] = {"pydantic-ai": pairing_problems(messages)}
    for provider in ("openai", "anthropic"):
        out[provider] = validate_history(list(messages), provider=provider)
    for provider in ("gemini", "bedrock"):
        out[provider] = validate_history(pydantic_ai_wire(messages, provider), provider=provider)
    return out


# -- Agents SDK: ReducingSession + reducing_input_filter -------------------------------------


def agents_sdk_problems(items: Sequence[Any]) -> dict[str, list[Any]]:
    """The Responses API's rules on the items, and every chat provider's on the messages
    the SDK's chat-completions converter makes of them (what a LiteLLM or chat model is
    sent), as each client sends them."""
    out: dict[str, list[Any]] = {
        "openai-responses": validate_history(list(items), provider="openai-responses")
    }
    chat = convert_to_messages(Converter.items_to_messages(list(items)))  # type: ignore[arg-type]
    for provider, found in langchain_problems(chat).items():
        if provider != "openai-responses":
            out[provider] = found
    return out


# -- the agents ----------------------------------------------------------------------------------


@dataclass
class Agent:
    """A real agent of one integration, run turn by turn.

    ``turn(n, stop_after=k)`` stops the run after the turn's k-th tool run (as a user
    pressing stop), then sends :data:`INTERJECTION` and runs the turn to its answer.
    """

    integration: str
    reducer: MessageReducer
    policy: Policy
    requests: Requests
    words: Callable[[str], int]
    #: A run's step limit (LangGraph recursion limit, PydanticAI request limit, SDK turns).
    limit: int = 100
    runs: Counter[str] = field(default_factory=Counter)
    answers: list[str] = field(default_factory=list)
    _impl: Any = None
    _stop: int | None = None
    _tools_this_run: int = 0

    def __post_init__(self) -> None:
        build = {
            "middleware": self._langchain,
            "graph": self._langchain,
            "pydantic-ai": self._pydantic_ai,
            "agents-sdk": self._agents_sdk,
        }[self.integration]
        build()

    def _run_step(self, query: str) -> str:
        self.runs[query] += 1
        self._tools_this_run += 1
        return result_text(query, self.words(query))

    @property
    def reruns(self) -> int:
        return sum(self.runs.values()) - len(self.runs)

    async def turn(self, turn: int, stop_after: int | None = None) -> None:
        self.policy.expected = turn
        question = f"turn {turn}: please work through the steps"
        if stop_after is None:
            await self._send(turn, question, None)
            return
        await self._send(turn, question, stop_after)
        await self._send(turn, INTERJECTION.format(query=f"{turn}.also"), None)

    async def _send(self, turn: int, text: str, stop_after: int | None) -> None:
        self._tools_this_run = 0
        self._stop = stop_after
        await {
            "middleware": self._send_langchain,
            "graph": self._send_langchain,
            "pydantic-ai": self._send_pydantic_ai,
            "agents-sdk": self._send_agents_sdk,
        }[self.integration](turn, text, stop_after)

    # LangChain --------------------------------------------------------------------------

    def _langchain(self) -> None:
        @tool
        def step(query: str) -> str:
            """Do one step of the task."""
            return self._run_step(query)

        model = LangChainModel(policy=self.policy, requests=self.requests, reducer=self.reducer)
        if self.integration == "middleware":
            self._impl = create_agent(
                model, [step], system_prompt=SYSTEM,
                middleware=[ReducingMiddleware(self.reducer)], checkpointer=InMemorySaver(),
            )
        else:
            self._impl = message_graph(
                model, reducing_add_messages(self.reducer), InMemorySaver(), [step]
            )
        self._first = True

    async def _send_langchain(self, turn: int, text: str, stop_after: int | None) -> None:
        update: list[Any] = [HumanMessage(content=text)]
        if self._first and self.integration == "graph":
            update.insert(0, SystemMessage(content=SYSTEM, id="system"))
        self._first = False
        run = {"configurable": {"thread_id": "t"}, "recursion_limit": self.limit}
        if stop_after is None:
            out = self._impl.invoke({"messages": update}, run)
            self.answers.append(out["messages"][-1].text)
            return
        for _ in self._impl.stream({"messages": update}, run, stream_mode="updates"):
            if self._tools_this_run >= stop_after:
                break  # the user stops the agent after its stop_after-th step

    # PydanticAI ---------------------------------------------------------------------------

    def _pydantic_ai(self) -> None:
        replies = Counter[str]()

        def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
            counts = self.reducer.count_tokens(messages)
            calls = [i for i, m in enumerate(messages)
                     if isinstance(m, ModelResponse) and m.tool_calls]
            first = calls[-1] if calls else None
            last = min(first + 1, len(messages) - 1) if first is not None else 0
            self.requests.add(sum(counts), _latest_step(counts, first, last), len(messages),
                              pydantic_ai_problems(messages))
            texts: list[str] = []
            args: dict[str, Any] = {}
            done: set[str] = set()
            for m in messages:
                if isinstance(m, ModelResponse):
                    args.update((p.tool_call_id, p.args) for p in m.parts
                                if isinstance(p, ToolCallPart))
                    continue
                for p in m.parts:
                    if isinstance(p, UserPromptPart) and (t := _pydantic_ai_texts(p)):
                        texts.append(t)
                    elif isinstance(p, ToolReturnPart):
                        q = result_query(str(p.content), args.get(p.tool_call_id))
                        if q:
                            done.add(q)
            turn, query = self.policy.decide(texts, done)
            replies["n"] += 1
            n = replies["n"]
            if query is None:
                return ModelResponse(parts=[TextPart(self.policy.answer(turn))])
            return ModelResponse(parts=[ToolCallPart("step", {"query": query},
                                                     tool_call_id=f"call-{n}")])

        agent = PydanticAgent(FunctionModel(respond), system_prompt=SYSTEM,
                              capabilities=[ReducingCapability(self.reducer)])

        @agent.tool_plain
        def step(query: str) -> str:
            """Do one step of the task."""
            return self._run_step(query)

        self._impl = agent
        self._history: list[Any] | None = None

    async def _send_pydantic_ai(self, turn: int, text: str, stop_after: int | None) -> None:
        limits = UsageLimits(request_limit=self.limit)
        if stop_after is None:
            result = await self._impl.run(text, message_history=self._history,
                                          usage_limits=limits)
            self.answers.append(str(result.output))
            self._history = result.all_messages()
            return
        async with self._impl.iter(text, message_history=self._history,
                                   usage_limits=limits) as run:
            async for node in run:
                if self._tools_this_run >= stop_after and isinstance(node, ModelRequestNode):
                    # The results are in, the model not asked yet: the user stops it.
                    self._history = [*run.all_messages(), node.request]
                    break

    # Agents SDK ---------------------------------------------------------------------------

    def _agents_sdk(self) -> None:
        @function_tool
        def step(query: str) -> str:
            """Do one step of the task."""
            return self._run_step(query)

        def stop(context: Any, results: Any) -> ToolsToFinalOutputResult:
            # The user stops the agent once its stop_after-th step has run.
            stopped = self._stop is not None and self._tools_this_run >= self._stop
            return ToolsToFinalOutputResult(is_final_output=stopped, final_output="(stopped)")

        self._session = ReducingSession(SQLiteSession("t"), self.reducer)
        self._run_config = RunConfig(
            tracing_disabled=True,
            call_model_input_filter=reducing_input_filter(
                self.reducer, namespace=self._session.namespace
            ),
        )
        self._impl = SDKAgent(name="worker", instructions=SYSTEM, model=AgentsSDKModel(self),
                              tools=[step], tool_use_behavior=stop)

    async def _send_agents_sdk(self, turn: int, text: str, stop_after: int | None) -> None:
        result = await Runner.run(self._impl, text, session=self._session,
                                  run_config=self._run_config, max_turns=self.limit)
        if stop_after is None:
            self.answers.append(str(result.final_output))


def _sdk_text(item: Any) -> str | None:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return None


class AgentsSDKModel(Model):
    """The policy as an Agents SDK ``Model``: a call comes after a reasoning item."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.n = 0

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> SDKResponse:
        agent = self.agent
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        items = [i if isinstance(i, dict) else i.model_dump(exclude_unset=True) for i in items]
        counts = agent.reducer.count_tokens(items)
        calls = [i for i, it in enumerate(items) if it.get("type") == "function_call"]
        first: int | None = None
        last = 0
        if calls:
            first = calls[-1]
            while first > 0 and items[first - 1].get("type") in ("function_call", "reasoning"):
                first -= 1
            ids = {it.get("call_id") for it in items[first : calls[-1] + 1]}
            last = max(
                (i for i, it in enumerate(items)
                 if it.get("type") == "function_call_output" and it.get("call_id") in ids),
                default=calls[-1],
            )
        agent.requests.add(sum(counts), _latest_step(counts, first, last), len(items),
                           agents_sdk_problems(items))
        texts = [t for it in items if it.get("role") == "user" and (t := _sdk_text(it))]
        args = {it.get("call_id"): it.get("arguments") for it in items
                if it.get("type") == "function_call"}
        done = {
            q for it in items if it.get("type") == "function_call_output"
            and (q := result_query(str(it.get("output", "")), args.get(it.get("call_id"))))
        }
        turn, query = agent.policy.decide(texts, done)
        self.n += 1
        n = self.n
        output: list[Any]
        if query is None:
            text = ResponseOutputText(type="output_text", text=agent.policy.answer(turn),
                                      annotations=[])
            output = [ResponseOutputMessage(id=f"msg_{n}", type="message", role="assistant",
                                            status="completed", content=[text])]
        else:
            output = [
                ResponseReasoningItem(
                    id=f"rs_{n}", type="reasoning",
                    summary=[Summary(type="summary_text", text=f"next: {query}")],
                ),
                ResponseFunctionToolCall(
                    id=f"fc_{n}", type="function_call", call_id=f"call_{n}", name="step",
                    arguments=json.dumps({"query": query}), status="completed",
                ),
            ]
        return SDKResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scenarios do not stream")
