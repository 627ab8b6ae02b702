"""PydanticAI agents under windows smaller than one turn, with the real SDK.

A real ``Agent`` with a real tool, bounded by :class:`ReducingCapability`,
:func:`history_processor` or :func:`ahistory_processor`, is driven for 30 turns by a
``FunctionModel`` that acts like an LLM: it works through the steps of its turn, calls
the tool again for any result it cannot see, and answers when it sees them all. Every
request the model gets is checked against PydanticAI's pairing rules (read with the
SDK's own classes) and with ``validate_history`` for OpenAI and Anthropic; the tool
runs must equal the runs needed, and the hooks must get each pruned message once.
With ``summarize_fn``, 8 turns: no summary reaches the hooks or is summarised as
conversation, though PydanticAI merges its request into the system prompt's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentstate_reducer import MessageReducer, ReducerConfig, agent_config, validate_history
from agentstate_reducer.pydantic_ai import (
    ReducingCapability,
    ahistory_processor,
    history_processor,
)
from agentstate_reducer.read import is_injected

pytestmark = pytest.mark.slow

TURNS = 30
SYSTEM = "You work through the steps with the step tool."


def pairing_problems(messages: Sequence[ModelMessage]) -> list[str]:
    """PydanticAI's pairing rules, read with its own classes: each tool return answers a
    call of an earlier response not answered yet, and a call is answered by the request
    right after its response (none may be left open when the model is asked)."""
    problems: list[str] = []
    open_calls: dict[str, int] = {}
    for i, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            for call in open_calls:
                problems.append(f"call {call!r} of message {open_calls[call]} unanswered at {i}")
            open_calls = {
                p.tool_call_id: i for p in message.parts if isinstance(p, ToolCallPart)
            }
            continue
        for part in [p for p in message.parts if isinstance(p, ToolReturnPart)]:
            if open_calls.pop(part.tool_call_id, None) is None:
                problems.append(f"return {part.tool_call_id!r} at {i} answers no open call")
    problems.extend(f"call {c!r} of message {at} never answered" for c, at in open_calls.items())
    if messages and not isinstance(messages[-1], ModelRequest):
        problems.append("the model is asked with a response last")
    return problems


def _question(messages: Sequence[ModelMessage]) -> tuple[int, int] | None:
    """Index of the request holding the latest question, and its turn."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):  # PydanticAI merges adjacent requests
                text = part.content if isinstance(part, UserPromptPart) else None
                if isinstance(text, str) and text.startswith("turn "):
                    return i, int(text.split()[1].rstrip(":"))
    return None


@dataclass
class TurnModel:
    """A ``FunctionModel`` function acting like an LLM working through ``steps`` steps.

    ``chain=False``: it needs every result of its turn, so it calls the first step whose
    result it cannot see; ``chain=True``: it goes on from the latest result it sees.
    ``parallel`` steps are called together in one response. Thinking comes with each call.
    """

    steps: int
    chain: bool = False
    parallel: int = 1
    requests: int = 0
    lost_question: int = 0
    invalid: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    contexts: list[list[ModelMessage]] = field(default_factory=list)
    replies: list[ModelResponse] = field(default_factory=list)

    def _check(self, messages: list[ModelMessage]) -> None:
        checks = {"pydantic-ai": pairing_problems(messages)}
        for provider in ("openai", "anthropic"):
            checks[provider] = [str(p) for p in validate_history(messages, provider=provider)]
        for name, problems in checks.items():
            if problems:
                self.invalid[name] += 1
                if len(self.examples) < 3:
                    self.examples.append(f"{name}: {problems[0]}")

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        reply = self._reply(messages)
        self.replies.append(reply)
        return reply

    def _reply(self, messages: list[ModelMessage]) -> ModelResponse:
        self.requests += 1
        self.contexts.append(list(messages))
        self._check(messages)
        asked = _question(messages)
        if asked is None:
            self.lost_question += 1
            return ModelResponse(parts=[TextPart("I lost the question.")])
        at, turn = asked
        seen = {
            p.content.split(":", 1)[0][len("result ") :]
            for m in messages[at:]
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart) and str(p.content).startswith("result ")
        }
        done = [s for s in range(self.steps) if f"{turn}.{s}" in seen]
        if self.chain:
            todo = list(range(max(done) + 1 if done else 0, self.steps))
        else:
            todo = [s for s in range(self.steps) if f"{turn}.{s}" not in seen]
        if not todo:
            return ModelResponse(parts=[TextPart(f"answer {turn}: all {self.steps} steps done")])
        parts: list[Any] = [ThinkingPart(f"next: steps {todo[: self.parallel]} of turn {turn}")]
        for s in todo[: self.parallel]:
            parts.append(
                ToolCallPart(
                    "step", {"query": f"{turn}.{s}"}, tool_call_id=f"c-{turn}-{s}-{self.requests}"
                )
            )
        return ModelResponse(parts=parts)


def _written(part: Any) -> bool:
    """A part the package wrote: a turn note or a cleared placeholder."""
    content = str(getattr(part, "content", ""))
    return content.startswith(("[turn note: ", "[cleared: "))


@dataclass
class Deliveries:
    """What the ``on_prune`` hooks got: each message with its namespace."""

    got: list[tuple[Any, ModelMessage]] = field(default_factory=list)

    def hook(self, pruned: list[Any], namespace: Any) -> None:
        self.got.extend((namespace, m) for m in pruned)

    async def ahook(self, pruned: list[Any], namespace: Any) -> None:
        self.hook(pruned, namespace)


def count(lo: int, hi: int) -> ReducerConfig:
    return agent_config(min_messages=lo, max_messages=hi)


def tokens(most: int, target: int) -> ReducerConfig:
    return agent_config(max_tokens=most, target_tokens=target, token_counter="approximate")


@dataclass(frozen=True)
class Scenario:
    name: str
    approach: str  # capability | processor | aprocessor
    steps: int
    config: ReducerConfig
    words: int = 12
    parallel: int = 1
    chain: bool = False


SCENARIOS = [
    Scenario("capability 4/8, 5 steps", "capability", 5, count(4, 8)),
    Scenario("processor 4/8, 6 steps 2 at a time", "processor", 6, count(4, 8), parallel=2),
    Scenario("aprocessor 10/20, 6 steps", "aprocessor", 6, count(10, 20)),
    Scenario("aprocessor 3/6, 4 steps 3 at a time", "aprocessor", 4, count(3, 6), parallel=3),
    # Results of about 1,300 tokens: the turn fits max_tokens, not target_tokens.
    Scenario("capability 8000/6000 tokens, 5 steps", "capability", 5, tokens(8000, 6000), 1000),
    # Results of about 5,200 tokens, each alone over max_tokens: the latest step stays.
    Scenario(
        "processor 3000/2000 tokens, oversized results", "processor", 4, tokens(3000, 2000),
        4000, chain=True,
    ),
]


def build(scenario: Scenario, model: TurnModel, runs: Counter[str], out: Deliveries) -> Agent:
    hook = out.ahook if scenario.approach != "processor" else out.hook
    reducer = MessageReducer(config=replace(scenario.config, on_prune=[hook]))
    if scenario.approach == "capability":
        capability: Any = ReducingCapability(reducer)
    elif scenario.approach == "processor":
        capability = ProcessHistory(history_processor(reducer))
    else:
        capability = ProcessHistory(ahistory_processor(reducer))
    agent = Agent(FunctionModel(model), system_prompt=SYSTEM, capabilities=[capability])

    @agent.tool_plain
    def step(query: str) -> str:
        """Do one step of the task."""
        runs[query] += 1
        return f"result {query}: " + "lorem ipsum dolor sit amet " * (scenario.words // 5)

    return agent


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_every_turn_finishes_with_each_tool_run_once(scenario: Scenario) -> None:
    runs: Counter[str] = Counter()
    out = Deliveries()
    model = TurnModel(scenario.steps, chain=scenario.chain, parallel=scenario.parallel)
    agent = build(scenario, model, runs, out)
    history: list[ModelMessage] | None = None
    for turn in range(TURNS):
        result = await agent.run(f"turn {turn}: do the steps", message_history=history)
        assert result.output == f"answer {turn}: all {scenario.steps} steps done"
        history = result.all_messages()
        # The first request, with the system prompt, is kept.
        assert isinstance(history[0].parts[0], SystemPromptPart)
    assert history is not None
    needed = {f"{t}.{s}" for t in range(TURNS) for s in range(scenario.steps)}
    per_turn = -(-scenario.steps // scenario.parallel) + 1
    print(
        f"\n{scenario.name}: {TURNS} turns, {model.requests} requests checked, invalid: "
        f"{dict(model.invalid) or 0}, tool runs {sum(runs.values())} (needed {len(needed)}), "
        f"pruned {len(out.got)}, kept {len(history)}"
    )
    assert not model.invalid, model.examples
    assert model.lost_question == 0
    assert set(runs) == needed and max(runs.values()) == 1
    assert model.requests == TURNS * per_turn

    # Each pruned message reached the hooks once, under the conversation's namespace, and
    # every part the model saw is kept or was handed over. Parts, since PydanticAI merges
    # adjacent requests (and the capability splits the first one) into new messages.
    conversation = history[-1].conversation_id
    assert conversation and {ns for ns, _ in out.got} == {("memories", conversation)}
    handed = [repr(p) for _, m in out.got for p in m.parts]
    assert len(handed) == len(set(handed))
    # A turn note is the package's own, also merged into the question's request (where
    # PydanticAI drops its marker): the request goes over without it, never the note.
    noted = [p[:120] for p in handed if "[turn note: " in p]
    assert not noted, noted[:3]
    kept = {repr(p) for m in history for p in m.parts}
    assert not kept & set(handed)
    # What the package wrote is left out: a turn note (PydanticAI merges it into the
    # question's request, so it can go over inside that message), and a placeholder the
    # history held (its original went over when it was cleared) that a later request no
    # longer carried.
    seen = {
        repr(p) for c in [*model.contexts, model.replies] for m in c for p in m.parts
        if not _written(p)
    }
    conversation_handed = {repr(p) for _, m in out.got for p in m.parts if not _written(p)}
    assert seen | kept == kept | conversation_handed
    assert len(history[0].parts) == 1  # the system prompt, alone: questions never pile up
    if scenario.config.max_messages is not None and scenario.config.max_tokens is None:
        assert len(history) <= 2 * per_turn + scenario.config.max_messages


async def test_requests_stay_within_max_tokens_plus_one_step() -> None:
    scenario = SCENARIOS[-1]
    runs: Counter[str] = Counter()
    model = TurnModel(scenario.steps, chain=True)
    reducer = MessageReducer(config=scenario.config)
    agent = Agent(FunctionModel(model), system_prompt=SYSTEM, capabilities=[
        ReducingCapability(reducer)
    ])

    @agent.tool_plain
    def step(query: str) -> str:
        """Do one step of the task."""
        runs[query] += 1
        return f"result {query}: " + "lorem ipsum dolor sit amet " * 800

    history: list[ModelMessage] | None = None
    for turn in range(5):
        history = (await agent.run(f"turn {turn}: go", message_history=history)).all_messages()
    step_tokens = max(
        sum(reducer.count_tokens([c[i], c[i + 1]]))
        for c in model.contexts
        for i in range(len(c) - 1)
        if isinstance(c[i], ModelResponse) and c[i].tool_calls
    )
    largest = max(sum(reducer.count_tokens(c)) for c in model.contexts)
    assert largest <= 3000 + step_tokens
    assert not model.invalid, model.examples
    assert max(runs.values()) == 1 and len(runs) == 5 * scenario.steps


@dataclass
class Summariser:
    """A ``summarize_fn`` that records what it gets and words each summary its own way."""

    texts: list[str] = field(default_factory=list)
    batches: list[list[ModelMessage]] = field(default_factory=list)

    def __call__(self, pruned: list[Any]) -> str:
        self.batches.append(list(pruned))
        self.texts.append(f"digest {len(self.texts)} of {len(pruned)} messages")
        return self.texts[-1]

    async def acall(self, pruned: list[Any]) -> str:
        return self(pruned)

    def holds(self, part: Any) -> bool:
        """Whether a part carries a summary's text or its acknowledgement."""
        if isinstance(part, TextPart) and part.content == "OK":
            return True
        content = getattr(part, "content", None)
        return isinstance(content, str) and any(t in content for t in self.texts)


SUMMARISED = [
    Scenario("capability 4/8, 3 steps", "capability", 3, count(4, 8)),
    Scenario("processor 4/8, 3 steps", "processor", 3, count(4, 8)),
    Scenario("aprocessor 4/8, 2 steps", "aprocessor", 2, count(4, 8)),
    Scenario("capability 6000/4000 tokens, 3 steps", "capability", 3, tokens(6000, 4000), 1000),
]


@pytest.mark.parametrize("scenario", SUMMARISED, ids=[s.name for s in SUMMARISED])
async def test_summaries_stay_the_packages_own_after_pydantic_ai_merges_them(
    scenario: Scenario,
) -> None:
    # PydanticAI merges the summary's request into the system prompt's and keeps no
    # metadata; the summary must still never reach the hooks nor be summarised as
    # conversation.
    summariser = Summariser()
    fn = summariser if scenario.approach == "processor" else summariser.acall
    config = replace(scenario.config, summarize_fn=fn, inject_summary=True)
    scenario = replace(scenario, config=config)
    runs: Counter[str] = Counter()
    out = Deliveries()
    model = TurnModel(scenario.steps)
    agent = build(scenario, model, runs, out)
    history: list[ModelMessage] | None = None
    for turn in range(8):
        result = await agent.run(f"turn {turn}: do the steps", message_history=history)
        assert result.output == f"answer {turn}: all {scenario.steps} steps done"
        history = result.all_messages()
    assert history is not None
    handed = [repr(p) for _, m in out.got for p in m.parts]
    leaked = [p for _, m in out.got for p in m.parts if summariser.holds(p)]
    resummarised = [
        p for b in summariser.batches for m in b if not is_injected(m) for p in m.parts
        if summariser.holds(p)
    ]
    print(
        f"\n{scenario.name}: {model.requests} requests, {len(summariser.texts)} summaries, "
        f"summary parts handed to the hooks {len(leaked)}, summarised as conversation "
        f"{len(resummarised)}, pruned {len(out.got)}"
    )
    assert len(summariser.texts) >= 3
    assert not leaked, leaked[:3]
    assert not resummarised, resummarised[:3]
    assert not model.invalid, model.examples
    assert model.lost_question == 0
    assert max(runs.values()) == 1 and len(runs) == 8 * scenario.steps
    # Every conversation part the model saw is kept or reached the hooks, once.
    assert len(handed) == len(set(handed))
    kept = {repr(p) for m in history for p in m.parts}
    assert not kept & set(handed)
    seen = {
        repr(p) for c in [*model.contexts, model.replies] for m in c for p in m.parts
        if not _written(p) and not summariser.holds(p)
    }
    assert seen <= kept | set(handed)
