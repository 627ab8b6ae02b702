"""Turns that outgrow the budget on their own, in real agents, with ``agent_config()``.

``create_agent`` + ``ReducingMiddleware`` and a ``StateGraph`` + ``ToolNode`` merged by
``reducing_add_messages``, driven by :class:`~conftest.AgentModel`, which calls a step
again whenever it cannot see its result, a placeholder of it, or the turn note naming
it. Every request is checked for every provider; each scenario prints requests, tool
re-runs and the largest request against the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from conftest import AgentModel, RequestCheck, ToolRuns, message_graph, turn_question
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate_reducer import MessageReducer, agent_config
from agentstate_reducer.langgraph import ReducingMiddleware, reducing_add_messages

pytestmark = pytest.mark.slow

SYSTEM = "You work through the steps with the step tool."


@dataclass(frozen=True)
class Scenario:
    name: str
    approach: str  # middleware | graph
    steps: int
    words: int
    most: int
    target: int
    turns: int = 1


SCENARIOS = [
    Scenario("middleware 20 steps of ~5,000 tokens, 3000/2000", "middleware", 20, 5000, 3000, 2000),
    Scenario("graph 20 steps of ~5,000 tokens, 3000/2000", "graph", 20, 5000, 3000, 2000),
    Scenario("middleware 120 steps of ~1,300 tokens, 3000/2000", "middleware", 120, 1300, 3000,
             2000),
    Scenario("graph 120 steps of ~1,300 tokens, 8000/6000", "graph", 120, 1300, 8000, 6000),
]


def build(s: Scenario, model: AgentModel, runs: ToolRuns, reducer: MessageReducer) -> Any:
    tools = [runs.tool()]
    if s.approach == "middleware":
        return create_agent(
            model, tools, system_prompt=SYSTEM, middleware=[ReducingMiddleware(reducer)],
            checkpointer=InMemorySaver(),
        )
    return message_graph(model, reducing_add_messages(reducer), InMemorySaver(), tools)


@pytest.mark.parametrize("s", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_turn_over_the_budget_finishes_without_a_tool_run_twice(s: Scenario) -> None:
    config = agent_config(max_tokens=s.most, target_tokens=s.target, token_counter="approximate")
    reducer = MessageReducer(config=config)
    runs = ToolRuns(words=s.words)
    check = RequestCheck()
    model = AgentModel(steps=s.steps, check=check)
    graph = build(s, model, runs, reducer)
    run = {"configurable": {"thread_id": "long"}, "recursion_limit": 3 * s.steps + 10}
    for turn in range(s.turns):
        update: list[Any] = [turn_question(turn)]
        if turn == 0 and s.approach == "graph":
            update.insert(0, SystemMessage(content=SYSTEM, id="system"))
        graph.invoke({"messages": update}, run)
    requests = [[m for m in c if not isinstance(m, SystemMessage)] for c in model.contexts]
    step = max(
        sum(reducer.count_tokens([c[i], c[i + 1]]))
        for c in requests
        for i in range(len(c) - 1)
        if isinstance(c[i + 1], ToolMessage)
    )
    largest = max(sum(reducer.count_tokens(c)) for c in requests)
    reruns = sum(runs.runs.values()) - len(runs.runs)
    print(
        f"\n{s.name}: {len(requests)} requests, tool re-runs {reruns}, largest request "
        f"{largest} tokens (max_tokens {s.most} + latest step {step}), invalid: "
        f"{dict(check.invalid) or 0}"
    )
    assert reruns == 0 and len(runs.runs) == s.turns * s.steps
    assert len(requests) == s.turns * (s.steps + 1)
    assert model.lost_question == 0
    assert all(
        any(isinstance(m, HumanMessage) and m.id == "question-0" for m in c) for c in requests
    )
    assert largest <= s.most + step
    assert not check.invalid, check.examples
