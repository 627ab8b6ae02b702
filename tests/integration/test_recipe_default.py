"""Given no reducer, every integration runs the agent recipe (``agent_config()``).

The scenarios are the newcomer's: an agent whose tool asks for approval each turn, the
user approving every other one and abandoning the rest by asking the next question, run
with the integration's defaults only. Every request the scripted model gets is checked
for every provider; what is stored is checked after every turn. A control run with the
plain configuration (``ReducerConfig()``) shows what the default is for.
"""

from __future__ import annotations

import sqlite3
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from agents import Agent as SdkAgent
from agents import RunConfig, Runner, SQLiteSession, function_tool
from integration_kit import AgentModel, RequestCheck, ToolRuns, message_graph, turn_question
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import add_messages
from langgraph.prebuilt import create_react_agent
from langgraph.types import Command
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import FunctionModel
from test_openai_agents_sdk import TurnModel as SdkModel
from test_pydantic_ai_agents import SYSTEM as PAI_SYSTEM
from test_pydantic_ai_agents import TurnModel as PaiModel

from agentstate_reducer import MessageReducer, ReducerConfig, agent_config, validate_history
from agentstate_reducer.langgraph import (
    ReducingMiddleware,
    ReducingSaver,
    reducing_add_messages,
    reducing_pre_model_hook,
)
from agentstate_reducer.openai_agents import ReducingSession, reducing_input_filter
from agentstate_reducer.pydantic_ai import (
    ReducingCapability,
    ahistory_processor,
    history_processor,
)

TURNS = 30
ROOT = Path(__file__).parents[2]
SYSTEM = "You work through the steps with the step tool."


def plain() -> MessageReducer:
    return MessageReducer(config=ReducerConfig())


def quoted(page: str, *figures: str) -> None:
    """The page quotes what this run measured (whitespace aside), so it cannot drift."""
    text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
    for figure in figures:
        assert " ".join(figure.split()) in text, f"{page} should say {figure!r}; update it"


# -- the defaults, directly ----------------------------------------------------------------


def test_every_integration_given_no_reducer_holds_the_agent_recipe() -> None:
    recipe = agent_config()
    holders = [
        ReducingMiddleware(),
        ReducingSaver(InMemorySaver()),
        ReducingCapability(),
        ReducingSession(SQLiteSession("default")),
    ]
    for holder in holders:
        assert holder.reducer.config == recipe, type(holder).__name__
    # Each call without a reducer makes its own: no ledger shared between two agents.
    assert ReducingMiddleware().reducer is not ReducingMiddleware().reducer


def test_an_explicit_none_saver_reducer_is_still_refused_as_in_0_5_0() -> None:
    with pytest.raises(ValueError, match="reducer must be a MessageReducer, got None"):
        ReducingSaver(InMemorySaver(), None)  # type: ignore[arg-type]


def test_a_saver_that_holds_a_reducer_keeps_it_when_none_is_given() -> None:
    inner = InMemorySaver()
    own = MessageReducer(2, 4)
    inner.reducer = own  # type: ignore[attr-defined]
    assert ReducingSaver(inner).reducer is own


def _abandoned() -> list[Any]:
    call = {"name": "step", "args": {"query": "0.0"}, "id": "call-0"}
    return [
        SystemMessage("be brief", id="s"),
        HumanMessage("turn 0: go", id="h0"),
        AIMessage("", tool_calls=[call], id="a0"),
        HumanMessage("turn 1: never mind", id="h1"),
    ]


def test_the_closures_given_no_reducer_repair_an_abandoned_call() -> None:
    history = _abandoned()
    merged = reducing_add_messages()(history[:3], history[3:])
    hook = reducing_pre_model_hook().invoke({"messages": history})
    for messages in (merged, hook["messages"][1:]):
        assert [m.tool_call_id for m in messages if isinstance(m, ToolMessage)] == ["call-0"]
        assert validate_history(messages, provider="anthropic") == []
    # The plain configuration leaves it dangling.
    assert validate_history(reducing_add_messages(plain())(history[:3], history[3:]))


# -- LangGraph: interrupts, half abandoned -------------------------------------------------


def _langgraph(approach: str, reducer: MessageReducer | None, model: AgentModel,
               runs: ToolRuns, connection: sqlite3.Connection) -> Any:
    tools = [runs.tool()]
    if approach == "middleware":
        return create_agent(model, tools, system_prompt=SYSTEM,
                            middleware=[ReducingMiddleware(reducer)],
                            checkpointer=InMemorySaver())
    if approach == "graph":
        return message_graph(model, reducing_add_messages(reducer), InMemorySaver(), tools)
    if approach == "pre-model hook":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return create_react_agent(model, tools, pre_model_hook=reducing_pre_model_hook(
                reducer), checkpointer=InMemorySaver())
    inner = SqliteSaver(connection)
    saver = ReducingSaver(inner) if reducer is None else ReducingSaver(inner, reducer)
    return message_graph(model, add_messages, saver, tools)


def _run_interrupts(approach: str, reducer: MessageReducer | None) -> dict[str, Any]:
    runs = ToolRuns(interrupt=True)
    check = RequestCheck()
    model = AgentModel(steps=1, check=check, pairs=False)
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    graph = _langgraph(approach, reducer, model, runs, connection)
    run = {"configurable": {"thread_id": "hitl"}}
    stored_check = RequestCheck()
    stored_invalid = abandoned = 0
    for turn in range(TURNS):
        update: list[Any] = [turn_question(turn)]
        if turn == 0 and approach in ("graph", "saver"):
            update.insert(0, SystemMessage(content=SYSTEM, id="system"))
        out = graph.invoke({"messages": update}, run)
        assert out.get("__interrupt__"), "the step tool asks for approval"
        if turn % 2 == 0:
            graph.invoke(Command(resume="approved"), run)
        else:
            abandoned += 1  # the user asks the next question instead of approving
        stored = graph.get_state(run).values["messages"]
        pending = stored[:-1] if turn % 2 else stored  # the latest call may be pending
        before = sum(stored_check.invalid.values())
        stored_check(pending)  # as each provider's client would send it
        stored_invalid += sum(stored_check.invalid.values()) > before
    connection.close()
    figures = {
        "requests": check.requests, "invalid": dict(check.invalid),
        "stored_invalid": stored_invalid, "abandoned": abandoned,
        "runs": dict(runs.runs), "examples": check.examples,
    }
    print(f"\n{approach} ({'default' if reducer is None else 'plain'}): {TURNS} turns, "
          f"{abandoned} interrupts abandoned, {check.requests} requests checked, invalid: "
          f"{dict(check.invalid) or 0}, stored histories invalid: {stored_invalid}")
    return figures


@pytest.mark.slow
@pytest.mark.parametrize("approach", ["middleware", "graph", "pre-model hook"])
def test_langgraph_defaults_send_only_valid_requests_with_abandoned_interrupts(
    approach: str,
) -> None:
    got = _run_interrupts(approach, None)
    assert got["requests"] == TURNS + TURNS // 2  # the call, then the answer of a resumed one
    assert not got["invalid"], got["examples"]
    assert got["stored_invalid"] == 0
    assert got["runs"] == {f"{t}.0": 1 for t in range(0, TURNS, 2)}  # resumed ones only
    quoted("docs/langgraph.md", f"30 turns send {got['requests']} requests, none invalid")


@pytest.mark.slow
def test_reducing_saver_default_stores_valid_histories_but_bounds_only_storage() -> None:
    got = _run_interrupts("saver", None)
    assert got["stored_invalid"] == 0
    # Within a run the graph holds the list it loaded plus the new question: the request
    # right after each abandoned interrupt (but the last) still carries the dead call.
    # What ReducingSaver stores is repaired; what the model is sent is not its job.
    assert set(got["invalid"].values()) == {got["abandoned"] - 1}
    quoted("docs/langgraph.md", f"still carries the dead call ({got['abandoned'] - 1} of "
           f"{got['requests']})")


@pytest.mark.slow
def test_the_plain_configuration_is_what_the_default_saves_a_newcomer_from() -> None:
    got = _run_interrupts("middleware", plain())
    assert got["invalid"]["openai"] >= got["abandoned"]
    assert got["stored_invalid"] > 0
    figure = f"{got['invalid']['openai']} of {got['requests']} invalid"
    quoted("docs/langgraph.md", f"the plain `ReducerConfig()`: {figure}")
    quoted("CHANGELOG.md", f"the plain `ReducerConfig()` sent {got['invalid']['openai']} of "
           f"{got['requests']} invalid")


# -- PydanticAI: multi-step turns ----------------------------------------------------------


async def _pydantic_ai(capability: Any) -> PaiModel:
    model = PaiModel(3)
    agent = Agent(FunctionModel(model), system_prompt=PAI_SYSTEM, capabilities=[capability])

    @agent.tool_plain
    def step(query: str) -> str:
        """Do one step of the task."""
        return f"result {query}: done"

    history = None
    for turn in range(TURNS):
        result = await agent.run(f"turn {turn}: do the steps", message_history=history)
        assert result.output == f"answer {turn}: all 3 steps done"
        history = result.all_messages()
    return model


@pytest.mark.slow
@pytest.mark.parametrize("approach", ["capability", "processor", "aprocessor"])
async def test_pydantic_ai_defaults_send_only_valid_requests(approach: str) -> None:
    # PydanticAI itself refuses a new prompt after unanswered deferred calls (and repairs
    # the history before each request): here the default's work is start_on="human".
    capability = {
        "capability": lambda: ReducingCapability(),
        "processor": lambda: ProcessHistory(history_processor()),
        "aprocessor": lambda: ProcessHistory(ahistory_processor()),
    }[approach]()
    model = await _pydantic_ai(capability)
    print(f"\nPydanticAI {approach} (default): {model.requests} requests, invalid: "
          f"{dict(model.invalid) or 0}")
    assert model.requests == TURNS * 4
    assert not model.invalid, model.examples


@pytest.mark.slow
async def test_pydantic_ai_plain_configuration_opens_windows_with_the_assistant() -> None:
    control = await _pydantic_ai(ReducingCapability(plain()))
    print(f"\nPydanticAI capability (plain): {control.requests} requests, invalid: "
          f"{dict(control.invalid)}")
    assert control.invalid["anthropic"] > 0
    quoted("docs/pydantic-ai.md", f"sends {control.requests} requests, none invalid; the "
           f"plain `ReducerConfig()` opens {control.invalid['anthropic']} of them")
    quoted("CHANGELOG.md", f"{control.invalid['anthropic']} of {control.requests} PydanticAI "
           "requests opening with the assistant")


# -- the Agents SDK: approvals, half abandoned ---------------------------------------------


async def _agents_sdk(reducer: MessageReducer | None) -> tuple[SdkModel, int, Counter[str]]:
    model = SdkModel(1)
    runs: Counter[str] = Counter()

    @function_tool(needs_approval=True)
    def step(query: str) -> str:
        """Do one step of the task."""
        runs[query] += 1
        return f"result {query}: done"

    agent = SdkAgent(name="worker", instructions=SYSTEM, model=model, tools=[step])
    session = ReducingSession(SQLiteSession("alice"), reducer)
    config = RunConfig(tracing_disabled=True, call_model_input_filter=reducing_input_filter(
        reducer))
    stored_invalid = 0
    for turn in range(TURNS):
        result = await Runner.run(agent, f"turn {turn}: do the steps", session=session,
                                  run_config=config, max_turns=8)
        assert result.interruptions, "the step tool asks for approval"
        if turn % 2 == 0:
            state = result.to_state()
            state.approve(result.interruptions[0])
            result = await Runner.run(agent, state, session=session, run_config=config,
                                      max_turns=8)
            assert result.final_output == f"answer {turn}: all 1 steps done"
        stored = await session.get_items()
        # An abandoned turn ends with its response still pending: left out.
        asked = max(i for i, item in enumerate(stored) if item.get("role") == "user")
        pending = stored if turn % 2 == 0 else stored[: asked + 1]
        stored_invalid += bool(validate_history(pending, provider="openai-responses"))
    return model, stored_invalid, runs


@pytest.mark.slow
async def test_agents_sdk_defaults_store_and_send_only_valid_histories() -> None:
    model, stored_invalid, runs = await _agents_sdk(None)
    print(f"\nAgents SDK session + filter (default): {model.requests} requests, invalid: "
          f"{len(model.invalid)}, stored histories invalid: {stored_invalid}")
    assert model.requests == TURNS + TURNS // 2
    assert not model.invalid, model.invalid[:3]
    assert stored_invalid == 0
    assert runs == Counter({f"{t}.0": 1 for t in range(0, TURNS, 2)})
    control, control_stored, _ = await _agents_sdk(plain())
    print(f"Agents SDK (plain): invalid {len(control.invalid)}, stored histories invalid: "
          f"{control_stored}")
    assert control_stored > 0  # the session keeps the abandoned calls
    quoted("docs/openai-agents.md", f"send {model.requests} requests, none invalid",
           f"({control_stored} of {TURNS} stored histories")



# -- what "bounds only storage" means: the largest request ---------------------------------

STEPS, WORDS = 12, 300  # a turn of twelve results of about 400 tokens each


def _largest_langgraph_request(approach: str) -> tuple[int, int]:
    config = agent_config(max_tokens=3000, target_tokens=2000, token_counter="approximate")
    reducer = MessageReducer(config=config)
    runs = ToolRuns(words=WORDS)
    model = AgentModel(steps=STEPS, chain=True, check=RequestCheck())
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    graph = _langgraph(approach, reducer, model, runs, connection)
    run = {"configurable": {"thread_id": "long"}, "recursion_limit": 4 * STEPS + 10}
    for turn in range(6):
        update: list[Any] = [turn_question(turn)]
        if turn == 0 and approach == "saver":
            update.insert(0, SystemMessage(content=SYSTEM, id="system"))
        graph.invoke({"messages": update}, run)
    sizes = [sum(reducer.count_tokens([m for m in c if not isinstance(m, SystemMessage)]))
             for c in model.contexts]
    stored = sum(reducer.count_tokens(graph.get_state(run).values["messages"]))
    connection.close()
    return max(sizes), stored


@pytest.mark.slow
def test_reducing_saver_alone_bounds_what_is_stored_not_each_request() -> None:
    saver, saver_stored = _largest_langgraph_request("saver")
    middleware, middleware_stored = _largest_langgraph_request("middleware")
    step = 450  # one call and its result, about
    print(f"\nbudget 3,000 tokens, turns of {STEPS} steps: largest request through "
          f"ReducingSaver alone {saver:,} tokens (stored {saver_stored:,}), through "
          f"ReducingMiddleware {middleware:,} (stored {middleware_stored:,})")
    assert middleware <= 3000 + step
    assert saver > 1.5 * 3000  # the run's whole turn, past the budget
    assert saver_stored <= 3000 + step and middleware_stored <= 3000 + step
    quoted("README.md", f"{saver:,} tokens through `ReducingSaver` alone, {middleware:,} with "
           "`ReducingMiddleware`")


async def _largest_sdk_request(with_filter: bool) -> tuple[int, int]:
    config = agent_config(max_tokens=3000, target_tokens=2000, token_counter="approximate")
    reducer = MessageReducer(config=config)
    model = SdkModel(STEPS, chain=True)

    @function_tool
    def step(query: str) -> str:
        """Do one step of the task."""
        return f"result {query}: " + "lorem ipsum dolor sit amet " * (WORDS // 5)

    agent = SdkAgent(name="worker", instructions=SYSTEM, model=model, tools=[step])
    session = ReducingSession(SQLiteSession("long"), reducer)
    config_ = RunConfig(tracing_disabled=True, call_model_input_filter=(
        reducing_input_filter(reducer) if with_filter else None))
    for turn in range(6):
        await Runner.run(agent, f"turn {turn}: do the steps", session=session,
                         run_config=config_, max_turns=2 * STEPS + 4)
    sizes = [sum(reducer.count_tokens(c)) for c in model.contexts]
    stored = sum(reducer.count_tokens(await session.get_items()))
    return max(sizes), stored


@pytest.mark.slow
async def test_reducing_session_alone_bounds_what_is_stored_not_each_request() -> None:
    alone, alone_stored = await _largest_sdk_request(False)
    both, both_stored = await _largest_sdk_request(True)
    step = 450
    print(f"\nbudget 3,000 tokens, turns of {STEPS} steps: largest request through "
          f"ReducingSession alone {alone:,} tokens (stored {alone_stored:,}), with "
          f"reducing_input_filter too {both:,} (stored {both_stored:,})")
    assert both <= 3000 + step
    assert alone > 1.5 * 3000
    assert alone_stored <= 3000 + step and both_stored <= 3000 + step
    quoted("README.md", f"{alone:,} through `ReducingSession` alone, {both:,} with "
           "`reducing_input_filter`")
