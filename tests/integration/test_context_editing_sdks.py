"""Context editing in the OpenAI Agents SDK and PydanticAI, with the real SDKs.

Each scenario runs 30 turns of two lookups a turn, one result of 3,500 tokens (turn 5)
and the others of 120, under a 1,500-token budget. The scripted model acts like an LLM
that re-calls a tool whose result it cannot see, but takes a placeholder or a preview
as the result already fetched: so a redundant call would show a result lost rather
than cleared. Every request must be within budget and valid for its provider, every
lookup run once, each original handed to the hooks once, and the oversized result read
back by the handle its preview names.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentstate_reducer import (
    ClearToolResults,
    MessageReducer,
    Offload,
    agent_config,
    validate_history,
)
from agentstate_reducer.langgraph import fetch_original, store_hook
from agentstate_reducer.read import message_id, package_note
from agentstate_reducer.tokens import approximate_text_tokens

pytestmark = pytest.mark.slow

TURNS, BUDGET, OVERSIZED = 30, 1_500, "5a"
NAMESPACE = ("memories", "alice")
_HANDLE = re.compile(r"handle (ctx_[0-9a-f]{16})")


def text_of(tokens: int, tag: str) -> str:
    """Text of about ``tokens`` tokens (the heuristic's count), distinct per ``tag``."""
    words = [f"{tag}-{i} lorem ipsum" for i in range(tokens)]
    low, high = 1, len(words)
    while low < high:
        mid = (low + high + 1) // 2
        if approximate_text_tokens(" ".join(words[:mid])) <= tokens:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low])


RESULTS = {f"{t}{s}": text_of(120, f"r{t}{s}") for t in range(TURNS) for s in "ab"}
RESULTS[OVERSIZED] = BIG = text_of(3_500, "big")


@dataclass
class Originals:
    """An ``on_prune`` hook counting the edited originals it gets, by handle."""

    counts: Counter[str] = field(default_factory=Counter)

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        for message in pruned:
            if (package_note(message) or {}).get("edit"):
                self.counts[message_id(message) or ""] += 1


def make_reducer(store: Any, originals: Originals) -> MessageReducer:
    return MessageReducer(
        config=agent_config(
            max_tokens=BUDGET,
            target_tokens=1_000,
            token_counter="approximate",
            context_edits=[ClearToolResults(keep=1), Offload(above=800, head=100, tail=50)],
            on_prune=[store_hook(store), originals],
        )
    )


def next_step(turn: int, fetched: set[str]) -> str | None:
    """The lookup the model makes next in ``turn`` (``None``: it answers), given the
    queries whose result (or placeholder, or preview) it sees in this turn."""
    for step in "ab":
        if f"{turn}{step}" not in fetched:
            return f"{turn}{step}"
    return None


def check_run(
    sizes: list[int], runs: Counter[str], originals: Originals, store: Any, seen: list[str]
) -> None:
    print(
        f"\n{len(sizes)} requests, largest {max(sizes)} tokens (budget {BUDGET}), "
        f"{sum(runs.values())} lookups for {len(RESULTS)} queries, "
        f"{len(originals.counts)} originals handed over"
    )
    assert max(sizes) <= BUDGET, max(sizes)
    assert set(runs) == set(RESULTS) and max(runs.values()) == 1  # no redundant call
    assert originals.counts and max(originals.counts.values()) == 1
    (preview,) = {text for text in seen if text.startswith("[offloaded: result of lookup")}
    (handle,) = _HANDLE.findall(preview)
    assert fetch_original(store, handle, namespace=NAMESPACE) == BIG


# -- OpenAI Agents SDK -------------------------------------------------------------------


async def test_agents_sdk_edits_within_budget_without_a_redundant_call() -> None:
    from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from langgraph.store.memory import InMemoryStore
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from agentstate_reducer.openai_agents import ReducingSession, reducing_input_filter

    class LookupModel(Model):
        def __init__(self) -> None:
            self.contexts: list[list[Any]] = []
            self.invalid: list[str] = []

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> ModelResponse:
            items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
            self.contexts.append(items)
            n = len(self.contexts)
            self.invalid += [str(p) for p in validate_history(items, provider="openai-responses")]
            (at, turn) = max(
                (i, int(item["content"].split()[1].rstrip(":")))
                for i, item in enumerate(items)
                if item.get("role") == "user" and str(item.get("content")).startswith("turn ")
            )
            queries = {
                item["call_id"]: json.loads(item["arguments"])["query"]
                for item in items[at:]
                if item.get("type") == "function_call"
            }
            fetched = {
                queries[item["call_id"]]
                for item in items[at:]
                if item.get("type") == "function_call_output" and item["call_id"] in queries
            }
            query = next_step(turn, fetched)
            if query is None:
                text = ResponseOutputText(type="output_text", text=f"answer {turn}", annotations=[])
                output: Any = ResponseOutputMessage(
                    id=f"msg_{n}", type="message", role="assistant", status="completed",
                    content=[text],
                )
            else:
                output = ResponseFunctionToolCall(
                    id=f"fc_{n}", type="function_call", call_id=f"call_{n}", name="lookup",
                    arguments=json.dumps({"query": query}), status="completed",
                )
            return ModelResponse(output=[output], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scenario does not stream")

    runs: Counter[str] = Counter()

    @function_tool
    def lookup(query: str) -> str:
        """Look a query up."""
        runs[query] += 1
        return RESULTS[query]

    store, originals = InMemoryStore(), Originals()
    reducer = make_reducer(store, originals)
    model = LookupModel()
    agent = Agent(name="looker", instructions="Answer with the lookup tool.", model=model,
                  tools=[lookup])
    session = ReducingSession(SQLiteSession("alice"), reducer, namespace=NAMESPACE)
    run_config = RunConfig(
        tracing_disabled=True,
        call_model_input_filter=reducing_input_filter(reducer, namespace=NAMESPACE),
    )
    for turn in range(TURNS):
        result = await Runner.run(
            agent, f"turn {turn}: look it up", session=session, run_config=run_config
        )
        assert result.final_output == f"answer {turn}"
    assert not model.invalid, model.invalid[:3]
    assert len(model.contexts) == 3 * TURNS
    sizes = [sum(reducer.count_tokens(c)) for c in model.contexts]
    seen = [str(i.get("output")) for c in model.contexts for i in c if "output" in i]
    check_run(sizes, runs, originals, store, seen)
    # The session stores the edited history: old results are placeholders there too.
    stored = await session.get_items()
    outputs = [str(i["output"]) for i in stored if i.get("type") == "function_call_output"]
    assert any(o.startswith("[cleared: result of lookup") for o in outputs)


# -- PydanticAI ----------------------------------------------------------------------------


async def test_pydantic_ai_edits_within_budget_without_a_redundant_call() -> None:
    from langgraph.store.memory import InMemoryStore
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from agentstate_reducer.pydantic_ai import ReducingCapability

    contexts: list[list[ModelMessage]] = []
    invalid: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        contexts.append(list(messages))
        for provider in ("openai", "anthropic"):
            invalid.extend(str(p) for p in validate_history(messages, provider=provider))
        (at, turn) = max(
            (i, int(p.content.split()[1].rstrip(":")))
            for i, m in enumerate(messages)
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, UserPromptPart) and str(p.content).startswith("turn ")
        )
        parts = [p for m in messages[at:] for p in m.parts]
        queries = {
            p.tool_call_id: p.args_as_dict()["query"] for p in parts if isinstance(p, ToolCallPart)
        }
        fetched = {
            queries[p.tool_call_id]
            for p in parts
            if isinstance(p, ToolReturnPart) and p.tool_call_id in queries
        }
        query = next_step(turn, fetched)
        if query is None:
            return ModelResponse(parts=[TextPart(f"answer {turn}")])
        call = ToolCallPart("lookup", {"query": query}, tool_call_id=f"c{len(contexts)}")
        return ModelResponse(parts=[call])

    runs: Counter[str] = Counter()
    store, originals = InMemoryStore(), Originals()
    reducer = make_reducer(store, originals)
    agent = Agent(
        FunctionModel(respond),
        system_prompt="Answer with the lookup tool.",
        capabilities=[ReducingCapability(reducer, namespace=NAMESPACE)],
    )

    @agent.tool_plain
    def lookup(query: str) -> str:
        """Look a query up."""
        runs[query] += 1
        return RESULTS[query]

    history: list[ModelMessage] | None = None
    for turn in range(TURNS):
        result = await agent.run(f"turn {turn}: look it up", message_history=history)
        assert result.output == f"answer {turn}"
        history = result.all_messages()
    assert not invalid, invalid[:3]
    assert len(contexts) == 3 * TURNS
    sizes = [sum(reducer.count_tokens(c)) for c in contexts]
    seen = [
        str(p.content)
        for c in contexts
        for m in c
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    check_run(sizes, runs, originals, store, seen)
    # The run's history holds the edited messages: old results are placeholders there too.
    assert history is not None
    returns = [str(p.content) for m in history for p in m.parts if isinstance(p, ToolReturnPart)]
    assert any(r.startswith("[cleared: result of lookup") for r in returns)
