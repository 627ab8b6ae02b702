"""Turns that outgrow the budget on their own, in real agents of all four integrations,
with ``agent_config()`` (issue 22's scenarios).

``create_agent`` + ``ReducingMiddleware``, a ``StateGraph`` + ``ToolNode`` merged by
``reducing_add_messages``, PydanticAI with ``ReducingCapability`` and the Agents SDK with
``ReducingSession`` + ``reducing_input_filter`` (:class:`~turn_agents.Agent`), driven by
one LLM-like policy (:class:`~turn_agents.Policy`) that calls a step again whenever it
cannot see its result, a placeholder of it, or the turn note naming it:

* a 20-step turn of ~5,000-token results at 3,000/2,000 tokens (alone, three in a row,
  and with the README's context edits);
* 120-step turns of ~1,300-token results at 3,000/2,000 and 8,000/6,000;
* 40 turns of 3-6 steps of ~600 tokens at max_tokens 2,500 (turns up to ~3,700 tokens);
* 8 turns of 5 steps in count mode 4/8, the user typing one more step after the second
  (before the agent's answer): the interjection joins the turn; and 3 turns of 30 steps
  of ~1,300 tokens at 3,000/2,000, one more typed after the tenth.

In all: every step runs once, no step limit is reached, every request is valid for every
provider, holds its turn's question and stays within max_tokens plus its latest step, and
each pruned message and edited original reaches the hooks once.
Each scenario prints requests, tool re-runs and the largest request against the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
from turn_agents import INTEGRATIONS, Agent, Deliveries, Policy, Requests

from agentstate_reducer import ClearToolResults, MessageReducer, Offload, agent_config

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Scenario:
    name: str
    turns: int
    #: turn -> its steps.
    steps: Any
    #: step query -> its result's size in tokens (about).
    words: Any
    config: Any
    #: Stop each turn after this many steps and type one more (an interjection).
    interject: int | None = None
    #: Long turns after the first: the middleware and the Agents SDK fail them (below).
    later_long_turns: bool = False


def tokens(most: int, target: int | None = None, *edits: Any) -> Any:
    return agent_config(max_tokens=most, target_tokens=target, token_counter="approximate",
                        context_edits=list(edits))


def _c_words(query: str) -> int:
    turn, k = (int(x) for x in query.split("."))
    return 560 + 40 * ((turn + k) % 3)


SCENARIOS = [
    Scenario("a: 20 steps of ~5,000 tokens, 3000/2000", 1, lambda t: 20, lambda q: 5000,
             tokens(3000, 2000)),
    # Three such turns in one conversation: the later turns follow a turn cut to its note.
    Scenario("a: 3 turns of 20 steps of ~5,000 tokens, 3000/2000", 3, lambda t: 20,
             lambda q: 5000, tokens(3000, 2000), later_long_turns=True),
    # The README's recipe: the oversized results become previews, so the turn keeps its
    # steps (cleared) without a note.
    Scenario("a: 20 steps of ~5,000 tokens, 3000/2000, README edits", 1, lambda t: 20,
             lambda q: 5000, tokens(3000, 2000, ClearToolResults(keep=3), Offload(above=2000))),
    Scenario("b: 120 steps of ~1,300 tokens, 3000/2000", 1, lambda t: 120, lambda q: 1300,
             tokens(3000, 2000)),
    Scenario("b: 120 steps of ~1,300 tokens, 8000/6000", 1, lambda t: 120, lambda q: 1300,
             tokens(8000, 6000)),
    Scenario("c: 40 turns of 3-6 steps, 2500", 40, lambda t: 3 + t % 4, _c_words, tokens(2500)),
    Scenario("d: a step typed mid-turn, 4/8", 8, lambda t: 5, lambda q: 12,
             agent_config(min_messages=4, max_messages=8), interject=2),
    # The same in token mode, the turn's older steps dropped around the interjection.
    Scenario("d: a step typed mid-turn, 30 steps of ~1,300 tokens, 3000/2000", 3,
             lambda t: 30, lambda q: 1300, tokens(3000, 2000), interject=10,
             later_long_turns=True),
]


@pytest.mark.parametrize("integration", INTEGRATIONS)
@pytest.mark.parametrize("s", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_a_turn_over_the_budget_finishes_without_a_tool_run_twice(
    s: Scenario, integration: str, request: pytest.FixtureRequest
) -> None:
    delivered = Deliveries()
    reducer = MessageReducer(config=replace(s.config, on_prune=[delivered]))
    policy = Policy(steps=s.steps)
    requests = Requests(max_tokens=s.config.max_tokens)
    most = max(s.steps(t) for t in range(s.turns)) + (1 if s.interject else 0)
    agent = Agent(integration, reducer, policy, requests, s.words, limit=3 * most + 10)
    for turn in range(s.turns):
        await agent.turn(turn, stop_after=s.interject)  # no step limit reached
    needed = sum(s.steps(t) for t in range(s.turns)) + (s.turns if s.interject else 0)
    budget = f"max_tokens {s.config.max_tokens}" if s.config.max_tokens else "count mode"
    print(
        f"\n{integration}, {s.name}: {requests.count} requests, tool re-runs {agent.reruns}, "
        f"largest request {requests.largest} tokens, {requests.most_messages} messages "
        f"({budget} + latest step {requests.largest_step}), over: {len(requests.over)}, "
        f"with a turn note: {policy.noted}, invalid: {dict(requests.invalid) or 0}, lost question: "
        f"{policy.lost_question}, handed to the hooks: {sum(delivered.counts.values())} "
        f"(twice: {len(delivered.twice)}, turn notes: {len(delivered.notes)})"
    )
    assert agent.reruns == 0 and len(agent.runs) == needed
    assert policy.lost_question == 0 and policy.wrong_turn == 0
    assert agent.answers == [f"answer {t}: all steps done" for t in range(s.turns)]
    assert requests.count == needed + s.turns
    assert not requests.over, requests.over[:3]
    assert not requests.invalid, requests.examples
    assert not delivered.twice, delivered.twice[:3]  # each original and message once
    assert not delivered.notes, delivered.notes[:3]  # the package's own: never handed
