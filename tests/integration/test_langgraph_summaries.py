"""End to end: 200 turns of a tool-calling agent whose pruned messages are folded into a
rolling summary by ``summarize_with`` (a scripted summary model that keeps the facts it
is shown), at persistence, in the graph and by middleware, sync and async.

Checked on every run: every fact ever stated and every pinned message is in the model's
view at the end; each fold's prompt holds the previous summary and only the newly pruned
messages; every model request is a valid history; a summary model failing on folds 3-5
loses nothing, and one failing for good still keeps requests within ``max_tokens``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import add_messages

from agentstate_reducer import MessageReducer, ReducerConfig, summarize_with, validate_history
from agentstate_reducer.langgraph import ReducingMiddleware, ReducingSaver, reducing_add_messages
from agentstate_reducer.read import is_summary
from agentstate_reducer.tokens import approximate_token_count

pytestmark = pytest.mark.slow

TURNS = 200
MAX_MESSAGES = 20
APPROACHES = ["saver", "in-graph", "middleware"]
#: The task brief (the first user turn), pinned.
BRIEF = "Plan my trip. FACT[budget=4200 EUR] FACT[traveller=Ada Lovelace]"
#: Facts of the second user turn, kept only by the summaries.
TURN_ONE = "FACT[flight=TP 541] FACT[seat=14A] FACT[booking=QX7P2L]"


def fact_human(turn: int) -> HumanMessage:
    if turn == 0:
        text = BRIEF
    elif turn == 1:
        text = f"Booked it: {TURN_ONE}. Now look things up."
    elif turn % 10 == 0:
        text = f"turn {turn}: note FACT[ref-{turn}={turn * 37}], then look this up"
    else:
        text = f"turn {turn}: please look this up"
    return HumanMessage(content=text, id=f"human-{turn}")


def every_fact(kit: Any, turns: int) -> set[str]:
    return kit.facts_in([fact_human(t) for t in range(turns)])  # type: ignore[no-any-return]


def reducer_for(approach: str, summarizer: Any, **window: Any) -> MessageReducer:
    options: dict[str, Any] = {"min_messages": 10, "max_messages": MAX_MESSAGES, **window}
    return MessageReducer(
        config=ReducerConfig(
            preserve_first=approach != "middleware",
            pin={"human-0"},
            summarize_fn=summarizer,
            inject_summary=True,
            **options,
        )
    )


def build(approach: str, kit: Any, model: Any, reducer: MessageReducer, checkpointer: Any) -> Any:
    if approach == "saver":
        return kit.message_graph(model, add_messages, ReducingSaver(checkpointer, reducer))
    if approach == "in-graph":
        return kit.message_graph(model, reducing_add_messages(reducer), checkpointer)
    return create_agent(
        model,
        list(kit.tools),
        system_prompt=kit.system_prompt,
        middleware=[ReducingMiddleware(reducer)],
        checkpointer=checkpointer,
    )


def turn_input(approach: str, turn: int, kit: Any) -> dict[str, Any]:
    if turn == 0 and approach != "middleware":
        return {"messages": [SystemMessage(content=kit.system_prompt, id="system"), fact_human(0)]}
    return {"messages": [fact_human(turn)]}


def the_view(approach: str, model: Any, final: list[BaseMessage]) -> list[BaseMessage]:
    """What the model has in view at the end: the stored thread after the last turn
    (the saver's in-memory run state is only reduced when written)."""
    return final if approach == "saver" else model.contexts[-1]


def check_run(
    approach: str, kit: Any, model: Any, summarizer: Any, final: list[BaseMessage]
) -> None:
    view = the_view(approach, model, final)
    assert every_fact(kit, TURNS) <= kit.facts_in(view)
    assert kit.facts_in([fact_human(1)]) <= kit.facts_in([m for m in view if is_summary(m)])
    assert any(m.id == "human-0" and m.content == BRIEF for m in view)
    assert sum(is_summary(m) for m in final) == 1
    for context in model.contexts:
        body = [m for m in context if not isinstance(m, SystemMessage)]
        assert any(m.id == "human-0" for m in body)
        for provider in ("openai", "anthropic"):
            assert validate_history(context, provider=provider) == [], provider
    conversation = sum(len(m.text) for t in range(TURNS) for m in [fact_human(t)])
    folds = summarizer.prompts
    assert len(folds) >= 20
    for n, prompt in enumerate(folds):
        previous, new = prompt.split("<new_messages>")
        if n:
            assert "Summary of the" in previous
        assert "Summary of the" not in new
        entries = sum(new.count(f"[{label}") for label in ("user]", "assistant", "tool result]"))
        assert 0 < entries <= 2 * MAX_MESSAGES
    # A fold's prompt stays bounded while the history grows.
    assert max(len(p) for p in folds) < conversation / 2
    assert max(len(p) for p in folds[-5:]) < 3 * max(len(p) for p in folds[:5])


@pytest.mark.parametrize("approach", APPROACHES)
def test_two_hundred_turns_keep_every_fact_sync(approach: str, kit: Any, tmp_path: Any) -> None:
    summarizer = kit.summary_model()
    reducer = reducer_for(approach, summarize_with(summarizer))
    model = kit.model(TURNS)
    with SqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver:
        graph = build(approach, kit, model, reducer, saver)
        config = {"configurable": {"thread_id": "t-1"}}
        for turn in range(TURNS):
            graph.invoke(turn_input(approach, turn, kit), config)
        final = graph.get_state(config).values["messages"]
    check_run(approach, kit, model, summarizer, final)


@pytest.mark.parametrize("approach", APPROACHES)
async def test_two_hundred_turns_keep_every_fact_async(
    approach: str, kit: Any, tmp_path: Any
) -> None:
    summarizer = kit.summary_model()
    reducer = reducer_for(approach, summarize_with(summarizer))
    model = kit.model(TURNS)
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver:
        graph = build(approach, kit, model, reducer, saver)
        config = {"configurable": {"thread_id": "t-1"}}
        for turn in range(TURNS):
            await graph.ainvoke(turn_input(approach, turn, kit), config)
        final = (await graph.aget_state(config)).values["messages"]
    check_run(approach, kit, model, summarizer, final)


@pytest.mark.parametrize("approach", APPROACHES)
def test_a_summary_model_failing_on_folds_three_to_five_loses_nothing(
    approach: str, kit: Any, caplog: pytest.LogCaptureFixture
) -> None:
    summarizer = kit.summary_model(fail_on={3, 4, 5})
    reducer = reducer_for(approach, summarize_with(summarizer))
    turns = 60
    model = kit.model(turns)
    graph = build(approach, kit, model, reducer, InMemorySaver())
    config = {"configurable": {"thread_id": "t-1"}}
    with caplog.at_level(logging.WARNING, logger="agentstate_reducer"):
        for turn in range(turns):
            graph.invoke(turn_input(approach, turn, kit), config)
    final = graph.get_state(config).values["messages"]
    assert "kept the" in caplog.text and "without a summary" not in caplog.text
    view = the_view(approach, model, final)
    assert every_fact(kit, turns) <= kit.facts_in(view)
    assert len(summarizer.prompts) > 6  # it failed three times, then folded again
    if approach != "saver":
        sizes = [len(c) for c in model.contexts]
        system = 1 if approach == "middleware" else 0  # added per call, outside the state
        assert max(sizes) > MAX_MESSAGES + system  # the window grew while the summary failed
        assert max(sizes) <= 2 * MAX_MESSAGES + 1 + system


@pytest.mark.parametrize("approach", ["in-graph", "middleware"])
def test_a_summary_model_failing_for_good_keeps_requests_within_max_tokens(
    approach: str, kit: Any
) -> None:
    summarizer = kit.summary_model(fail_on=set(range(1, 10_000)))
    reducer = reducer_for(
        approach,
        summarize_with(summarizer),
        max_tokens=1500,
        target_tokens=1000,
        token_counter="approximate",
    )
    turns = 80
    model = kit.model(turns)
    graph = build(approach, kit, model, reducer, InMemorySaver())
    config = {"configurable": {"thread_id": "t-1"}}
    for turn in range(turns):
        graph.invoke(turn_input(approach, turn, kit), config)
    assert len(summarizer.prompts) > 10
    for context in model.contexts:
        # The middleware's system prompt is added per call, outside the state it bounds.
        state = [m for m in context if approach != "middleware" or m.id is not None]
        assert sum(approximate_token_count(m) for m in state) <= 1500
        assert any(m.id == "human-0" for m in context)


async def test_a_summary_model_failing_for_good_under_ainvoke(kit: Any) -> None:
    summarizer = kit.summary_model(fail_on=set(range(1, 10_000)))
    reducer = reducer_for(
        "middleware",
        summarize_with(summarizer),
        max_tokens=1500,
        target_tokens=1000,
        token_counter="approximate",
    )
    turns = 60
    model = kit.model(turns)
    graph = build("middleware", kit, model, reducer, InMemorySaver())
    config = {"configurable": {"thread_id": "t-1"}}
    for turn in range(turns):
        await graph.ainvoke(turn_input("middleware", turn, kit), config)
    assert len(summarizer.prompts) > 5
    for context in model.contexts:
        state = [m for m in context if m.id is not None]
        assert sum(approximate_token_count(m) for m in state) <= 1500
        assert validate_history(context, provider="anthropic") == []
