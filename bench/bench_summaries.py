"""Summaries side by side: this package's rolling fold against LangChain's
``SummarizationMiddleware`` and (when installed) langmem's ``SummarizationNode``, on the
same scripted 200-turn agent run, with no network.

Every agent is driven by the same scripted chat model; every summary comes from the same
scripted summary model, which answers with each ``FACT[...]`` it was shown (an LLM told
to keep facts verbatim at its best). Facts are stated in the first user turn (the task
brief), the second, and every tenth turn. Prints, per approach: the facts still in the
model's view at the end, the number of folds, the summary model's input per fold
(approximate tokens: mean, largest, total), and what a summary model that fails on
calls 3-5 does to the run.

    python bench/bench_summaries.py
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from agentstate_reducer import MessageReducer, ReducerConfig, summarize_with
from agentstate_reducer.langgraph import ReducingMiddleware
from agentstate_reducer.tokens import approximate_text_tokens

TURNS = 200
FACT = re.compile(r"FACT\[[^\]]*\]")
SYSTEM = "You are a travel agent."


def human(turn: int) -> HumanMessage:
    if turn == 0:
        text = "Plan my trip. FACT[budget=4200 EUR] FACT[traveller=Ada Lovelace]"
    elif turn == 1:
        text = "Booked: FACT[flight=TP 541] FACT[seat=14A] FACT[booking=QX7P2L]"
    elif turn % 10 == 0:
        text = f"turn {turn}: note FACT[ref-{turn}={turn * 37}] and go on"
    else:
        text = f"turn {turn}: what next? " + "tell me more " * 4
    return HumanMessage(text, id=f"human-{turn}")


ALL_FACTS = {f for t in range(TURNS) for f in FACT.findall(human(t).text)}
BRIEF_FACTS = set(FACT.findall(human(0).text) + FACT.findall(human(1).text))


class Agent(BaseChatModel):
    """The agent: answers every turn, recording what it was shown."""

    contexts: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-agent"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.contexts.append(list(messages))
        reply = AIMessage(f"answer {len(self.contexts)}: " + "here is what I found " * 4)
        return ChatResult(generations=[ChatGeneration(message=reply)])


class FactSummaries(BaseChatModel):
    """The summary model: every fact it was shown; calls in ``fail_on`` raise."""

    inputs: list[int] = Field(default_factory=list)
    fail_on: set[int] = Field(default_factory=set)

    @property
    def _llm_type(self) -> str:
        return "scripted-summaries"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        text = "\n".join(m.text for m in messages)
        self.inputs.append(approximate_text_tokens(text))
        if len(self.inputs) in self.fail_on:
            raise ConnectionError("summary model unavailable")
        found = sorted(set(FACT.findall(text)), key=text.index)
        reply = AIMessage("## Facts\n" + "\n".join(f"- {f}" for f in found))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def ours(summaries: FactSummaries, agent: Agent) -> Any:
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=10,
            max_messages=20,
            preserve_first=False,
            pin={"human-0"},
            summarize_fn=summarize_with(summaries, max_tokens=256),
            inject_summary=True,
        )
    )
    return create_agent(
        agent,
        [],
        system_prompt=SYSTEM,
        middleware=[ReducingMiddleware(reducer)],
        checkpointer=InMemorySaver(),
    )


def langchain_middleware(summaries: FactSummaries, agent: Agent) -> Any:
    middleware = SummarizationMiddleware(
        model=summaries, trigger=("messages", 20), keep=("messages", 10)
    )
    return create_agent(
        agent, [], system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver()
    )


def langmem_node(summaries: FactSummaries, agent: Agent) -> Any:
    from langchain_core.messages.utils import count_tokens_approximately
    from langgraph.prebuilt import create_react_agent
    from langgraph.prebuilt.chat_agent_executor import AgentState
    from langmem.short_term import RunningSummary, SummarizationNode

    # The state's annotations are read from this module's globals (postponed evaluation).
    globals()["RunningSummary"] = RunningSummary

    class State(AgentState):  # type: ignore[misc, valid-type]
        context: dict[str, RunningSummary]

    # About 20 messages of this run before a fold, about 10 kept, as for the others.
    node = SummarizationNode(
        model=summaries,
        token_counter=count_tokens_approximately,
        max_tokens_before_summary=20 * 22,
        max_tokens=10 * 22 + 256,
        max_summary_tokens=256,
        output_messages_key="llm_input_messages",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(
            agent,
            [],
            prompt=SYSTEM,
            pre_model_hook=node,
            state_schema=State,
            checkpointer=InMemorySaver(),
        )


def run(build: Callable[[FactSummaries, Agent], Any], fail_on: set[int]) -> dict[str, Any]:
    summaries, agent = FactSummaries(fail_on=fail_on), Agent()
    graph = build(summaries, agent)
    config = {"configurable": {"thread_id": "t"}}
    errors: list[str] = []
    for turn in range(TURNS):
        try:
            graph.invoke({"messages": [human(turn)]}, config)
        except Exception as exc:  # what a failing summary model does to the run
            errors.append(f"turn {turn}: {type(exc).__name__}")
    view = "\n".join(m.text for m in agent.contexts[-1])
    kept = set(FACT.findall(view))
    state = graph.get_state(config).values["messages"]
    stored = {f for m in state for f in FACT.findall(m.text)}
    return {
        "facts": len(kept & ALL_FACTS),
        "brief": len(kept & BRIEF_FACTS),
        "stored": len(stored & ALL_FACTS),
        "folds": len(summaries.inputs),
        "inputs": summaries.inputs,
        "errors": errors,
        "largest_view": max(len(c) for c in agent.contexts),
    }


def main() -> None:
    approaches: list[tuple[str, Callable[[FactSummaries, Agent], Any]]] = [
        ("agentstate-reducer summarize_with", ours),
        ("langchain SummarizationMiddleware", langchain_middleware),
    ]
    try:
        import langmem  # noqa: F401
    except ImportError:
        print("(langmem is not installed: its SummarizationNode is left out)")
    else:
        approaches.append(("langmem SummarizationNode", langmem_node))
    print(f"{TURNS} turns; {len(ALL_FACTS)} facts, {len(BRIEF_FACTS)} in the first two turns\n")
    print(
        f"{'':36} {'facts in view':>13} {'first 2 turns':>13} {'folds':>6} "
        f"{'input/fold mean':>15} {'max':>6} {'total':>7}"
    )
    for name, build in approaches:
        r = run(build, set())
        inputs = r["inputs"] or [0]
        print(
            f"{name:36} {r['facts']:>6}/{len(ALL_FACTS):<6} {r['brief']:>6}/{len(BRIEF_FACTS):<6} "
            f"{r['folds']:>6} {sum(inputs) / len(inputs):>15.0f} {max(inputs):>6} "
            f"{sum(inputs):>7}"
        )
    print("\nThe summary model fails on its calls 3, 4 and 5:")
    for name, build in approaches:
        r = run(build, {3, 4, 5})
        errors = r["errors"]
        raised = f"{len(errors)} turns raised ({', '.join(errors[:3])})" if errors else "no error"
        print(
            f"  {name:36} {raised}; facts in view {r['facts']}/{len(ALL_FACTS)}, "
            f"in the stored thread {r['stored']}/{len(ALL_FACTS)}; largest view "
            f"{r['largest_view']} messages"
        )


if __name__ == "__main__":
    main()
