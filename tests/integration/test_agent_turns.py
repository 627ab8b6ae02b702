"""Agents that work in turns of several tool calls, under windows smaller than one turn.

Real ``create_agent`` + ``ReducingMiddleware``, a ``StateGraph`` + ``ToolNode`` merged by
``reducing_add_messages``, and ``ReducingSaver`` over a real ``SqliteSaver``, each driven
for 30+ turns by :class:`~conftest.AgentModel`, which calls a tool again whenever it cannot
see the result. Every request the model gets is checked with ``validate_history`` for
every provider (the recipe configuration, :func:`agent_config`). Each scenario
prints its figures: turns, requests checked, invalid requests, tool runs against runs
needed.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from typing import Any

import pytest
from integration_kit import AgentModel, RequestCheck, ToolRuns, message_graph, turn_question
from langchain.agents import create_agent
from langchain_core.messages import SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import add_messages
from langgraph.types import Command

from agentstate_reducer import MessageReducer, ReducerConfig, agent_config
from agentstate_reducer.langgraph import ReducingMiddleware, ReducingSaver, reducing_add_messages

pytestmark = pytest.mark.slow

TURNS = 30
SYSTEM = "You work through the steps with the step tool."


@dataclass(frozen=True)
class Scenario:
    name: str
    approach: str  # middleware | graph | saver
    steps: int
    config: ReducerConfig
    words: int = 12


def count(lo: int, hi: int) -> ReducerConfig:
    return agent_config(min_messages=lo, max_messages=hi)


def tokens(most: int, target: int) -> ReducerConfig:
    return agent_config(max_tokens=most, target_tokens=target, token_counter="approximate")


SCENARIOS = [
    # The README's middleware window with turns of 5 sequential calls (12 messages).
    Scenario("middleware 4/8, 5 steps", "middleware", 5, count(4, 8)),
    # Five results of about 1,300 tokens: the turn fits max_tokens, not target_tokens.
    Scenario("middleware 8000/6000 tokens, 5 steps", "middleware", 5, tokens(8000, 6000), 1000),
    Scenario("graph 10/20, 6 steps", "graph", 6, count(10, 20)),
    Scenario("graph 4/8, 6 steps", "graph", 6, count(4, 8)),
    # Four results of about 580 tokens: the turn fits max_tokens, not target_tokens.
    Scenario("graph 3000/2000 tokens, 4 steps", "graph", 4, tokens(3000, 2000), 400),
    Scenario("saver 10/20, 6 steps", "saver", 6, count(10, 20)),
    Scenario("saver 4/8, 3 steps", "saver", 3, count(4, 8)),
]


def build(scenario: Scenario, model: AgentModel, runs: ToolRuns, connection: Any) -> Any:
    reducer = MessageReducer(config=scenario.config)
    tools = [runs.tool()]
    if scenario.approach == "middleware":
        return create_agent(
            model, tools, system_prompt=SYSTEM, middleware=[ReducingMiddleware(reducer)],
            checkpointer=InMemorySaver(),
        )
    if scenario.approach == "graph":
        return message_graph(model, reducing_add_messages(reducer), InMemorySaver(), tools)
    saver = ReducingSaver(SqliteSaver(connection), reducer)
    return message_graph(model, add_messages, saver, tools)


def report(name: str, turns: int, check: RequestCheck, runs: ToolRuns, needed: int) -> None:
    print(
        f"\n{name}: {turns} turns, {check.requests} requests checked, invalid: "
        f"{dict(check.invalid) or 0}, tool runs {sum(runs.runs.values())} (needed {needed})"
    )


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_turn_finishes_with_each_tool_run_once(
    scenario: Scenario, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentstate_reducer")
    runs = ToolRuns(words=scenario.words)
    check = RequestCheck()
    model = AgentModel(steps=scenario.steps, check=check)
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    graph = build(scenario, model, runs, connection)
    config = {"configurable": {"thread_id": "t-1"}, "recursion_limit": 4 * scenario.steps + 10}
    for turn in range(TURNS):
        update: list[Any] = [turn_question(turn)]
        if turn == 0 and scenario.approach != "middleware":
            update.insert(0, SystemMessage(content=SYSTEM, id="system"))
        graph.invoke({"messages": update}, config)  # no GraphRecursionError
        stored = [m.id for m in graph.get_state(config).values["messages"]]
        # start_on="human": the stored thread keeps the question and the final answer.
        assert f"question-{turn}" in stored and f"answer-{turn}" in stored, stored
    needed = {f"{t}.{s}" for t in range(TURNS) for s in range(scenario.steps)}
    report(scenario.name, TURNS, check, runs, len(needed))
    assert set(runs.runs) == needed and max(runs.runs.values()) == 1
    assert model.lost_question == 0
    assert check.requests == TURNS * (scenario.steps + 1)
    assert not check.invalid, check.examples
    connection.close()
    # A turn longer than the window puts the thread over its budget: one warning says so.
    warned = [r for r in caplog.records if "went over its budget" in r.getMessage()]
    over = scenario.approach != "saver" and scenario.config.max_messages == 8
    assert len(warned) == (1 if over else len(warned[:1]))


def test_a_turn_of_a_hundred_steps_stays_within_max_tokens_plus_one_step() -> None:
    steps = 120
    config = tokens(3000, 2000)
    reducer = MessageReducer(config=config)
    runs = ToolRuns(words=60)
    check = RequestCheck()
    model = AgentModel(steps=steps, chain=True, check=check)
    agent = create_agent(
        model, [runs.tool()], system_prompt=SYSTEM, middleware=[ReducingMiddleware(reducer)],
        checkpointer=InMemorySaver(),
    )
    run = {"configurable": {"thread_id": "long"}, "recursion_limit": 6 * steps}
    for turn in range(3):
        agent.invoke({"messages": [turn_question(turn)]}, run)
    requests = [[m for m in c if not isinstance(m, SystemMessage)] for c in model.contexts]
    step = max(
        sum(reducer.count_tokens([c[i], c[i + 1]]))
        for c in requests
        for i in range(len(c) - 1)
        if isinstance(c[i + 1], ToolMessage)
    )
    largest = max(sum(reducer.count_tokens(c)) for c in requests)
    print(
        f"\n{steps}-step turns, token mode 3000/2000: {len(requests)} requests, largest "
        f"{largest} tokens (bound {3000 + step}), invalid: {dict(check.invalid) or 0}, "
        f"tool runs {sum(runs.runs.values())} (needed {3 * steps})"
    )
    assert largest <= 3000 + step
    assert max(runs.runs.values()) == 1 and len(runs.runs) == 3 * steps
    assert not check.invalid, check.examples


@pytest.mark.parametrize("repair", [True, False], ids=["repair", "no repair"])
def test_abandoned_interrupts_are_repaired_and_resumed_ones_untouched(repair: bool) -> None:
    config = agent_config(min_messages=4, max_messages=8, repair_dangling_calls=repair)
    runs = ToolRuns(interrupt=True)
    check = RequestCheck()
    # Without the repair a request holds the abandoned call: checked, not refused.
    model = AgentModel(steps=1, check=check, pairs=repair)
    agent = create_agent(
        model, [runs.tool()], system_prompt=SYSTEM,
        middleware=[ReducingMiddleware(MessageReducer(config=config))],
        checkpointer=InMemorySaver(),
    )
    run = {"configurable": {"thread_id": "hitl"}}
    abandoned = resumed = 0
    for turn in range(TURNS):
        out = agent.invoke({"messages": [turn_question(turn)]}, run)
        assert out.get("__interrupt__"), "the step tool asks for approval"
        if turn % 2 == 0:
            out = agent.invoke(Command(resume="approved"), run)
            resumed += 1
            messages = out["messages"]
            results = [m for m in messages if isinstance(m, ToolMessage)]
            # Resumed: the tool ran once with the approval, and nothing synthetic was added.
            assert results[-1].content.startswith(f"result {turn}.0") and "approved" in str(
                results[-1].content
            )
            assert messages[-1].id == f"answer-{turn}"
        else:
            abandoned += 1  # the user asks the next question instead of approving
    final = agent.get_state(run).values["messages"]
    synthetic = [m for m in final if isinstance(m, ToolMessage) and m.status == "error"]
    print(
        f"\ninterrupts ({'repair' if repair else 'no repair'}): {TURNS} turns, {resumed} "
        f"resumed, {abandoned} abandoned, {check.requests} requests checked, invalid: "
        f"{dict(check.invalid) or 0}"
    )
    assert runs.runs == {f"{t}.0": 1 for t in range(0, TURNS, 2)}
    if repair:
        assert not check.invalid, check.examples
        assert all(m.id.startswith("synthetic-result-") for m in synthetic)
    else:
        assert check.invalid["openai"] > 0  # what the repair is for
