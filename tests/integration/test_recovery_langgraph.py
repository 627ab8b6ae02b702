"""Recovery in LangChain's ``create_agent`` (ReducingMiddleware) and a ``StateGraph`` with
``ToolNode`` (reducing_add_messages + recovering_model), over tens of turns.

The provider (:class:`~refusals.RefusingModel`) counts requests about 1.25x the
package's heuristic and accepts fewer tokens than the reducer's budget allows, so the
agent's requests outgrow it: it refuses them with OpenAI's ``context_length_exceeded``
(stating the sizes) or a bare 413, and the run must finish through one retry per
refusal, each tool run once, every request valid. With thinking on, the provider
changes account mid-run and rejects the earlier turns' signatures: the retry strips
them. A second refusal raises the provider's own error.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from integration_kit import AgentModel, RequestCheck, ToolRuns, message_graph, turn_question
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from refusals import RefusingModel, bare_413, openai_overflow

from agentstate_reducer import MessageReducer, agent_config
from agentstate_reducer.langgraph import (
    ReducingMiddleware,
    memory_namespace,
    recovering_model,
    reducing_add_messages,
)

pytestmark = pytest.mark.slow

SYSTEM = "You work through the steps with the step tool."
TURNS, STEPS = 30, 3
#: The reducer's budget, and the provider's window (in its own, larger, count).
MAX_TOKENS, TARGET, WINDOW = 4_000, 3_000, 2_500


@dataclass
class Run:
    provider: RefusingModel
    agent: AgentModel
    check: RequestCheck
    runs: ToolRuns
    reducer: MessageReducer


def make_run(*, refuse: Any = openai_overflow, limit: int | None = WINDOW,
             thinking: bool = False) -> Run:
    check = RequestCheck()
    agent = AgentModel(steps=STEPS, check=check)
    provider = RefusingModel(inner=agent, limit=limit, refuse=refuse, thinking=thinking)
    reducer = MessageReducer(config=agent_config(
        max_tokens=MAX_TOKENS, target_tokens=TARGET, token_counter="approximate"))
    return Run(provider, agent, check, ToolRuns(words=120), reducer)


def build(run: Run, approach: str) -> Any:
    tools = [run.runs.tool()]
    if approach == "middleware":
        return create_agent(run.provider, tools, system_prompt=SYSTEM,
                            middleware=[ReducingMiddleware(run.reducer)],
                            checkpointer=InMemorySaver())
    model = recovering_model(run.provider, run.reducer)
    return message_graph(model, reducing_add_messages(run.reducer), InMemorySaver(), tools)


def turn_update(approach: str, turn: int) -> dict[str, Any]:
    update: list[Any] = [turn_question(turn)]
    if turn == 0 and approach == "graph":
        update.insert(0, SystemMessage(content=SYSTEM, id="system"))
    return {"messages": update}


def play(run: Run, approach: str, turns: int = TURNS, *, switch_at: int | None = None,
         asynchronous: bool = False) -> Any:
    graph = build(run, approach)
    config = {"configurable": {"thread_id": "t-1"}, "recursion_limit": 4 * STEPS + 10}
    for turn in range(turns):
        if turn == switch_at:
            run.provider.account = "b"  # a new account: earlier signatures no longer verify
        if asynchronous:
            asyncio.run(graph.ainvoke(turn_update(approach, turn), config))
        else:
            graph.invoke(turn_update(approach, turn), config)
        stored = graph.get_state(config).values["messages"]
        assert stored[-1].id == f"answer-{turn}"
    return graph


def report(name: str, run: Run) -> None:
    p = run.provider
    print(f"\n{name}: {len(p.sizes)} requests, {sum(p.refused)} refused and retried, "
          f"largest accepted {max(s for s, r in zip(p.sizes, p.refused, strict=True) if not r)}"
          f" of a {p.limit} window, tool runs {sum(run.runs.runs.values())}, invalid "
          f"{dict(run.check.invalid) or 0}")


def assert_finished(run: Run, turns: int = TURNS) -> None:
    p = run.provider
    needed = {f"{t}.{s}" for t in range(turns) for s in range(STEPS)}
    assert set(run.runs.runs) == needed and max(run.runs.runs.values()) == 1
    assert run.agent.lost_question == 0
    assert not run.check.invalid, run.check.examples
    assert run.check.requests == len(p.sizes)
    # Each refusal was followed by an accepted retry (no two refusals in a row).
    assert not any(a and b for a, b in zip(p.refused, p.refused[1:], strict=False))
    assert not p.refused[-1]
    assert len(p.sizes) - sum(p.refused) == turns * (STEPS + 1)


@pytest.mark.parametrize("approach", ["middleware", "graph"])
@pytest.mark.parametrize("refuse", [openai_overflow, bare_413], ids=["openai", "413"])
def test_a_refused_request_finishes_through_one_retry(approach: str, refuse: Any) -> None:
    run = make_run(refuse=refuse)
    play(run, approach)
    report(f"{approach}, {refuse.__name__}", run)
    assert_finished(run)
    assert 1 <= sum(run.provider.refused) <= 3  # the lowered ceiling stays for the thread
    # The ceiling, and (from the stated size) the calibration, of the thread's namespace.
    config = {"configurable": {"thread_id": "t-1"}}
    where = memory_namespace(run.reducer, config) if approach == "middleware" else None
    calibration = run.reducer.calibration(where)
    assert calibration.ceiling is not None
    assert (calibration.factor > 1.0) == (refuse is openai_overflow)


def test_the_middleware_recovers_under_ainvoke() -> None:
    run = make_run()
    play(run, "middleware", 12, asynchronous=True)
    report("middleware, ainvoke", run)
    assert_finished(run, 12)
    assert sum(run.provider.refused) >= 1


@pytest.mark.parametrize("approach", ["middleware", "graph"])
def test_a_second_refusal_raises_the_providers_own_error(approach: str) -> None:
    # Six turns fit; then the window shrinks below any request of the thread, and a 413
    # says no size: the retry, a quarter smaller or less (the cache-aware cut of
    # agent_config() may land deeper, on a turn's question), is refused again.
    run = make_run(refuse=bare_413, limit=None)
    graph = build(run, approach)
    config = {"configurable": {"thread_id": "t-1"}, "recursion_limit": 4 * STEPS + 10}
    for turn in range(6):
        graph.invoke(turn_update(approach, turn), config)
    run.provider.limit = 50
    with pytest.raises(Exception) as raised:
        graph.invoke(turn_update(approach, 6), config)
    errors = run.provider.errors
    assert run.provider.refused[-2:] == [True, True] and len(errors) == 2
    assert raised.value is errors[1] and errors[1] is not errors[0]
    assert type(raised.value).__name__ == "APIStatusError"
    assert raised.value.__context__ is None and raised.value.__cause__ is None
    assert run.provider.sizes[-1] < run.provider.sizes[-2]  # the retry was smaller


@pytest.mark.parametrize("approach", ["middleware", "graph"])
def test_a_rejected_signature_finishes_without_the_earlier_reasoning(approach: str) -> None:
    run = make_run(limit=None, thinking=True)
    play(run, approach, switch_at=10)
    report(f"{approach}, signature", run)
    assert_finished(run)
    assert sum(run.provider.refused) == 1  # then every request goes stripped
    # The thread keeps every thinking block: the strip is for what is sent.
    sent_after = run.agent.contexts[-1]
    signatures = [b["signature"] for m in sent_after if isinstance(m, AIMessage)
                  and isinstance(m.content, list) for b in m.content
                  if isinstance(b, dict) and b.get("type") == "thinking"]
    assert signatures and all(s.startswith("b-") for s in signatures)


@pytest.mark.parametrize("approach", ["middleware", "graph"])
def test_a_signature_rejected_inside_the_current_turn_raises(approach: str) -> None:
    run = make_run(limit=None, thinking=True)
    graph = build(run, approach)
    config = {"configurable": {"thread_id": "t-1"}, "recursion_limit": 4 * STEPS + 10}
    with pytest.raises(Exception) as raised:
        for _ in graph.stream(turn_update(approach, 0), config):
            if run.provider.replies == 1:  # the first step's reply is signed "a-"
                run.provider.account = "b"
    assert raised.value is run.provider.errors[-1]
    assert "Invalid `signature`" in str(raised.value)
    # The bad block is the current turn's, kept whole: the stripped request would be the
    # refused one again, so the provider's error is raised without a second request.
    assert run.provider.refused.count(True) == 1 and run.provider.refused[-1]
