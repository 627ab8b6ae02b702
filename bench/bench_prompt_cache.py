"""How much of each model request repeats the previous request's prefix (a prompt cache's hits).

One scripted 300-turn agent run (``langchain.agents.create_agent``, a question, one tool
call, an answer per turn; tool results of about 400 tokens, every 25th one 3,000),
bounded to an 8,000-token budget these ways:

* pruning only (``ReducingMiddleware``, ``max_tokens=8000, target_tokens=6000``), and
  the same with ``cache_aware=True``;
* the same two reducers run on the outgoing request only, the stored history kept whole
  (a ``wrap_model_call`` middleware, as a flow that never writes the pruned list back);
* context editing, then pruning (the same, plus ``ClearToolResults(keep=3)`` and
  ``Offload(above=2000)``);
* the same with ``ClearToolResults(clear_at_least=2000)``;
* LangChain's ``ContextEditingMiddleware(ClearToolUsesEdit(trigger=8000, keep=3))``;
* LangChain's ``SummarizationMiddleware(trigger=("tokens", 8000), keep=("tokens", 6000))``
  with a deterministic summariser.

For each request, the share of its tokens that sit in the longest run of leading
messages identical to the previous request's (what a provider's prefix cache can
reuse); printed as the token-weighted mean over the run, with the largest request, and
the input cost of the run when cached tokens cost 0.1 and the rest 1.25 (written to the
cache) of an uncached token, relative to pruning alone.

    python bench/bench_prompt_cache.py
"""

from __future__ import annotations

import json
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    SummarizationMiddleware,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from pydantic import Field

from agentstate_reducer import ClearToolResults, MessageReducer, Offload, ReducerConfig
from agentstate_reducer.langgraph import ReducingMiddleware, store_hook
from agentstate_reducer.plan.cache import READ, WRITE
from agentstate_reducer.tokens import approximate_token_count

TURNS = 300
BUDGET = 8_000
SYSTEM = "You answer questions with the lookup tool."


def result_text(turn: int) -> str:
    words = 700 if turn % 25 == 0 else 83  # about 3,400 and 400 tokens
    return " ".join(f"fact{turn}.{k}" for k in range(words))


@tool
def lookup(query: str) -> str:
    """Look a query up."""
    return result_text(int(query.split("-")[1]))


class Scripted(BaseChatModel):
    """Calls the tool once per question, then answers; records every request."""

    requests: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        n = len(self.requests)
        last = messages[-1]
        if isinstance(last, HumanMessage):
            turn = int(str(last.content).split()[1])
            call = {"name": "lookup", "args": {"query": f"q-{turn}"}, "id": f"call-{n}"}
            reply = AIMessage("", tool_calls=[call], id=f"ai-{n}")
        else:
            reply = AIMessage(f"answer {n}: " + "done " * 15, id=f"ai-{n}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def summarise(messages: list[BaseMessage]) -> str:
    return f"Summary of {len(messages)} earlier messages: " + "kept fact " * 60


class RequestOnly(AgentMiddleware):  # type: ignore[type-arg]
    """Reduces each outgoing request; the agent's stored history is never pruned."""

    def __init__(self, reducer: MessageReducer) -> None:
        super().__init__()
        self.reducer = reducer

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        surviving = self.reducer.reduce(list(request.messages)).surviving
        return handler(request.override(messages=surviving))


def ours(*edits: Any, cache_aware: bool = False, stored: bool = True) -> Any:
    config = ReducerConfig(
        cache_aware=cache_aware,
        max_tokens=BUDGET,
        target_tokens=6_000,
        token_counter="approximate",
        preserve_first=False,
        context_edits=list(edits),
        on_prune=[store_hook(InMemoryStore())],
    )
    if not stored:
        return RequestOnly(MessageReducer(config=config))
    return ReducingMiddleware(MessageReducer(config=config))


def contenders() -> dict[str, Any]:
    return {
        "prune only": ours(),
        "prune only, cache_aware": ours(cache_aware=True),
        "request only, prune": ours(stored=False),
        "request only, cache_aware": ours(cache_aware=True, stored=False),
        "edit + prune": ours(ClearToolResults(keep=3), Offload(above=2_000)),
        "edit (clear_at_least=2000)": ours(
            ClearToolResults(keep=3, clear_at_least=2_000), Offload(above=2_000)
        ),
        "ContextEditingMiddleware": ContextEditingMiddleware(
            edits=[ClearToolUsesEdit(trigger=BUDGET, keep=3)]
        ),
        "SummarizationMiddleware": SummarizationMiddleware(
            Scripted(), trigger=("tokens", BUDGET), keep=("tokens", 6_000), summarizer=summarise
        ),
    }


def _key(message: BaseMessage) -> str:
    return json.dumps(
        [
            message.type,
            message.content,
            getattr(message, "tool_calls", None),
            getattr(message, "tool_call_id", None),
        ],
        sort_keys=True,
        default=str,
    )


def prefix_share(requests: list[list[BaseMessage]]) -> tuple[float, int, float]:
    """Token-weighted share of each request repeating the previous one's leading messages,
    the largest request, and the input cost: cached tokens at READ, the rest at WRITE
    (every request written to the cache), in uncached-token units."""
    reused = total = 0
    cost = 0.0
    largest = 0
    previous: list[str] = []
    for request in requests:
        keys = [_key(m) for m in request]
        tokens = [approximate_token_count(m) for m in request]
        same = 0
        while same < min(len(keys), len(previous)) and keys[same] == previous[same]:
            same += 1
        if previous:
            reused += sum(tokens[:same])
            total += sum(tokens)
        cost += READ * sum(tokens[:same]) + WRITE * sum(tokens[same:])
        largest = max(largest, sum(tokens))
        previous = keys
    return reused / total, largest, cost


def run(middleware: Any) -> tuple[float, int, int, float]:
    model = Scripted()
    agent = create_agent(
        model,
        [lookup],
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "bench"}}
    for turn in range(TURNS):
        agent.invoke({"messages": [HumanMessage(f"question {turn} please")]}, config)
    share, largest, cost = prefix_share(model.requests)
    return share, largest, len(model.requests), cost


def main() -> None:
    print(f"{TURNS} turns, budget {BUDGET} tokens (heuristic counts)")
    print(
        f"{'contender':<28} {'prefix reused':>13} {'largest request':>16} {'requests':>9} "
        f"{'input cost':>11} {'vs pruning':>10}"
    )
    base = None
    for name, middleware in contenders().items():
        share, largest, requests, cost = run(middleware)
        base = cost if base is None else base
        print(
            f"{name:<28} {share:>12.1%} {largest:>16} {requests:>9} {cost:>11,.0f} "
            f"{cost / base:>10.2f}"
        )


if __name__ == "__main__":
    main()
