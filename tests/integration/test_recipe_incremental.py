"""Where users run it, the agent recipe appends at the cost of what is new.

A ``create_agent`` with ``ReducingMiddleware`` and a ``StateGraph`` + ``ToolNode`` merged
by ``reducing_add_messages``, each with ``agent_config()`` (dead calls repaired, reasoning
by model, the model named) and a checkpointer, run for 60 turns by a scripted model: the
reducer reads each message a bounded number of times, not the whole history on every
update (it did, under the recipe's options, until the append rule covered them).
"""

from __future__ import annotations

from typing import Any

import pytest
from integration_kit import human, lookup, message_graph, scripted_model
from langchain.agents import create_agent
from langchain_core.messages import SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate_reducer import MessageReducer, agent_config
from agentstate_reducer.langgraph import ReducingMiddleware, reducing_add_messages
from agentstate_reducer.reducing import prepare, repair

TURNS = 60


@pytest.mark.parametrize("approach", ["middleware", "graph"])
def test_the_recipe_reads_each_message_a_bounded_number_of_times(
    approach: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[int] = []
    real = prepare.read_messages

    def counting(messages: list[Any]) -> list[Any]:
        read.append(len(messages))
        return real(messages)

    for module in (repair, prepare):
        monkeypatch.setattr(module, "read_messages", counting)
    records = prepare.read_records

    def counting_records(messages: list[Any]) -> Any:
        read.append(len(messages))
        return records(messages)

    monkeypatch.setattr(prepare, "read_records", counting_records)
    reducer = MessageReducer(config=agent_config(
        min_messages=400, max_messages=500, model="gpt-4o", system_prompt="You answer."))
    model = scripted_model(TURNS)
    run = {"configurable": {"thread_id": approach}}
    if approach == "middleware":
        agent = create_agent(model, [lookup], system_prompt="You answer.",
                             middleware=[ReducingMiddleware(reducer)],
                             checkpointer=InMemorySaver())
        inputs = [{"messages": [human(t)]} for t in range(TURNS)]
    else:
        agent = message_graph(model, reducing_add_messages(reducer), InMemorySaver())
        inputs = [{"messages": [SystemMessage("You answer.", id="system"), human(0)]}]
        inputs += [{"messages": [human(t)]} for t in range(1, TURNS)]
    for update in inputs:
        agent.invoke(update, run)
    stored = agent.get_state(run).values["messages"]
    assert len(stored) > 3 * TURNS  # questions, calls, results, answers: nothing pruned
    assert len(model.contexts) > 1.5 * TURNS
    # Each update reads its new messages and the latest response (a few messages; the
    # graph merges several updates per step): about 9 reads per message stored. A re-read
    # of the history per update would be over len(stored) ** 2 / 2 (24,000) here.
    assert sum(read) <= 12 * len(stored), (sum(read), len(stored), max(read))
    assert max(read) <= 12, max(read)
