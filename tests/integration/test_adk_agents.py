"""Google ADK agents bounded by :class:`ReducingPlugin` or the before-model callback.

A real ``LlmAgent`` with a real tool, run by a real ``InMemoryRunner`` for 30 turns, asks a
scripted ``BaseLlm`` that acts like an LLM: it works through the steps of its turn (some
turns much longer than the budget), calls the tool again for any step whose result it
cannot see (neither the result, nor a placeholder naming the call, nor a turn note listing
it), and answers when it sees them all. Some turns are interrupted: cancelled through the
runner's ``abort_signal`` after a step, or abandoned by the user as soon as the model
calls the tool. Every request the model gets is checked with ``validate_history`` for
Gemini; tool runs must equal the runs needed (0 re-runs), and the hooks must get each
pruned content once.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

from agentstate_reducer import MessageReducer, ReducerConfig, agent_config, validate_history
from agentstate_reducer.adk import ReducingPlugin, reducing_before_model_callback

pytestmark = pytest.mark.slow

TURNS = 30
_RESULT = re.compile(r"^result (\d+\.\d+):")
_CALLED = re.compile(r'called with \{"query": "(\d+\.\d+)"\}')
_NOTED = re.compile(r'^- step \{"query": "(\d+\.\d+)"\}', re.M)
_EARLIER = re.compile(r"^- and (\d+) earlier calls", re.M)


#: What the scripted model reports it used (ADK logs a warning for a response without it).
USAGE = types.GenerateContentResponseUsageMetadata(
    prompt_token_count=1, candidates_token_count=1, total_token_count=2
)


def dumped(contents: list[types.Content]) -> list[dict[str, Any]]:
    return [c.model_dump(mode="json", exclude_none=True) for c in contents]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


@dataclass
class Plan:
    """Steps per turn: ``steps``, or ``long`` every ``every``-th turn."""

    steps: int
    long: int = 0
    every: int = 0
    parallel: int = 1

    def of(self, turn: int) -> int:
        return self.long if self.every and turn % self.every == self.every - 1 else self.steps


@dataclass
class Requests:
    """What the scripted model was sent: each request's contents (as JSON), its problems."""

    contents: list[list[dict[str, Any]]] = field(default_factory=list)
    invalid: int = 0
    examples: list[str] = field(default_factory=list)
    lost_question: int = 0


class StepModel(BaseLlm):
    """Acts like an LLM working through the steps of the latest question."""

    model: str = "scripted-steps"
    plan: Any = None
    seen: Any = None

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        yield LlmResponse(content=self._reply(llm_request.contents), usage_metadata=USAGE)

    def _reply(self, contents: list[types.Content]) -> types.Content:
        sent = dumped(contents)
        out: Requests = self.seen
        out.contents.append(sent)
        problems = validate_history(sent, provider="gemini")
        if problems:
            out.invalid += 1
            if len(out.examples) < 3:
                out.examples.append(str(problems[0]))
        turn = None
        for content in reversed(contents):
            texts = [p.text for p in content.parts or () if p.text]
            asked = [t for t in texts if t.startswith("turn ")]
            if content.role == "user" and asked:
                turn = int(asked[-1].split()[1].rstrip(":"))
                break
        if turn is None:
            out.lost_question += 1
            return types.Content(role="model", parts=[types.Part(text="I lost the question.")])
        done: set[str] = set()
        for content in contents:
            for part in content.parts or ():
                if part.function_response is not None:
                    for text in _strings(part.function_response.response):
                        found = _RESULT.match(text) or _CALLED.search(text)
                        if found:
                            done.add(found.group(1))
                elif part.text and part.text.startswith("[turn note: "):
                    done.update(_NOTED.findall(part.text))
                    earlier = _EARLIER.search(part.text)
                    if earlier:
                        done.update(f"{turn}.{k}" for k in range(int(earlier.group(1))))
        steps = self.plan.of(turn)
        todo = [f"{turn}.{k}" for k in range(steps) if f"{turn}.{k}" not in done]
        if not todo:
            return types.Content(
                role="model", parts=[types.Part(text=f"answer {turn}: all {steps} steps done")]
            )
        calls = [
            types.Part(function_call=types.FunctionCall(name="step", args={"query": q}))
            for q in todo[: self.plan.parallel]
        ]
        return types.Content(role="model", parts=[types.Part(text=f"next: {todo[0]}"), *calls])


@dataclass
class Deliveries:
    got: list[tuple[Any, Any]] = field(default_factory=list)

    async def __call__(self, pruned: list[Any], namespace: Any) -> None:
        self.got.extend((namespace, m) for m in pruned)


def count(lo: int, hi: int) -> ReducerConfig:
    return agent_config(min_messages=lo, max_messages=hi)


def tokens(most: int, target: int) -> ReducerConfig:
    return agent_config(max_tokens=most, target_tokens=target, token_counter="approximate")


@dataclass(frozen=True)
class Scenario:
    name: str
    approach: str  # plugin | callback
    plan: Plan
    config: ReducerConfig
    #: Words of filler per result (about 1.3 tokens each).
    words: int = 20
    #: Every ``cancel``-th turn is cancelled after its first step, every ``abandon``-th
    #: abandoned as the model calls the tool (0: never).
    cancel: int = 0
    abandon: int = 0


SCENARIOS = [
    Scenario("plugin 4/8 messages, 5 steps", "plugin", Plan(5), count(4, 8)),
    Scenario(
        "callback 10/20 messages, 4 steps 2 at a time", "callback", Plan(4, parallel=2),
        count(10, 20),
    ),
    # Results of about 1,300 tokens; every 5th turn of 20 steps, far over max_tokens.
    Scenario(
        "plugin 8000/6000 tokens, long turns", "plugin", Plan(5, long=20, every=5),
        tokens(8000, 6000), words=1000,
    ),
    Scenario(
        "callback 3000/2000 tokens, long turns", "callback", Plan(4, long=12, every=4),
        tokens(3000, 2000), words=1000,
    ),
    Scenario(
        "plugin 3000/2000 tokens, interrupted turns", "plugin", Plan(4, long=10, every=3),
        tokens(3000, 2000), words=1000, cancel=4, abandon=5,
    ),
]


async def run(
    scenario: Scenario,
) -> tuple[Requests, Counter[str], Deliveries, MessageReducer, str, set[int]]:
    out, runs, hooks = Requests(), Counter[str](), Deliveries()
    reducer = MessageReducer(config=replace(scenario.config, on_prune=[hooks]))
    filler = "lorem ipsum dolor sit amet " * (scenario.words // 5)

    def step(query: str) -> str:
        """Do one step of the task."""
        runs[query] += 1
        return f"result {query}: {filler}"

    model = StepModel(plan=scenario.plan, seen=out)
    if scenario.approach == "plugin":
        agent = LlmAgent(name="worker", model=model, instruction="Do the steps.", tools=[step])
        app = App(name="steps", root_agent=agent, plugins=[ReducingPlugin(reducer)])
        runner = InMemoryRunner(app=app)
    else:
        agent = LlmAgent(
            name="worker", model=model, instruction="Do the steps.", tools=[step],
            before_model_callback=reducing_before_model_callback(reducer),
        )
        runner = InMemoryRunner(agent=agent)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    interrupted: set[int] = set()
    for turn in range(TURNS):
        question = types.Content(role="user", parts=[types.Part(text=f"turn {turn}: go")])
        cancel = scenario.cancel and turn % scenario.cancel == 1
        abandon = scenario.abandon and turn % scenario.abandon == 2
        abort = asyncio.Event()
        events = runner.run_async(
            user_id="u", session_id=session.id, new_message=question, abort_signal=abort
        )
        answer = None
        async for event in events:
            parts = event.content.parts if event.content else None
            if abandon and parts and any(p.function_call for p in parts):
                interrupted.add(turn)
                break  # the user asks the next question while the tool would run
            if cancel and parts and any(p.function_response for p in parts):
                interrupted.add(turn)
                abort.set()
            if parts and parts[0].text and parts[0].text.startswith("answer "):
                answer = parts[0].text
        await events.aclose()
        if turn not in interrupted:
            steps = scenario.plan.of(turn)
            assert answer == f"answer {turn}: all {steps} steps done", (turn, answer)
    await runner.close()
    return out, runs, hooks, reducer, session.id, interrupted


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_every_turn_finishes_with_each_tool_run_once(scenario: Scenario) -> None:
    out, runs, hooks, reducer, session_id, interrupted = await run(scenario)
    needed = {
        f"{t}.{k}" for t in range(TURNS) if t not in interrupted
        for k in range(scenario.plan.of(t))
    }
    sizes = [sum(reducer.count_tokens(c)) for c in out.contents]
    step = max(
        sum(reducer.count_tokens([c[i], c[i + 1]]))
        for c in out.contents
        for i in range(len(c) - 1)
        if any("function_call" in p for p in c[i]["parts"])
    )
    reruns = sum(n - 1 for n in runs.values())
    most = scenario.config.max_tokens
    print(
        f"\nADK {scenario.name}: {TURNS} turns ({len(interrupted)} interrupted), "
        f"{len(out.contents)} requests, invalid {out.invalid}, tool runs {sum(runs.values())}, "
        f"re-runs {reruns}, largest request {max(sizes)} tokens"
        + (f" (max_tokens {most} + latest step {step})" if most else "")
        + f", pruned {len(hooks.got)}"
    )
    assert out.invalid == 0, out.examples
    assert out.lost_question == 0
    assert reruns == 0, [q for q, n in runs.items() if n > 1]
    assert needed <= set(runs)
    if most is not None:
        assert max(sizes) <= most + step
    else:
        # The window, plus the current turn (kept whole): its question, calls, responses.
        plan = scenario.plan
        per_turn = -(-plan.steps // plan.parallel) + 1
        assert scenario.config.max_messages is not None
        assert max(len(c) for c in out.contents) <= scenario.config.max_messages + 2 * per_turn
    # Each pruned content reached the hooks once, under the session's namespace.
    assert hooks.got and {ns for ns, _ in hooks.got} == {("memories", session_id)}
    handed = [json.dumps(m, sort_keys=True) for _, m in hooks.got]
    assert len(handed) == len(set(handed))


async def test_a_request_the_reducer_leaves_alone_is_sent_as_adk_built_it() -> None:
    """Under the budget the contents are ADK's own objects, the list untouched."""
    out = Requests()
    sent: list[list[types.Content]] = []

    class Keep(StepModel):
        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            sent.append(list(llm_request.contents))
            yield LlmResponse(content=self._reply(llm_request.contents), usage_metadata=USAGE)

    def step(query: str) -> str:
        """Do one step of the task."""
        return f"result {query}: done"

    plugin = ReducingPlugin()
    assert plugin.reducer.config == agent_config()
    agent = LlmAgent(name="w", model=Keep(plan=Plan(2), seen=out), tools=[step])
    runner = InMemoryRunner(app=App(name="keep", root_agent=agent, plugins=[plugin]))
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    question = types.Content(role="user", parts=[types.Part(text="turn 0: go")])
    async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=question):
        pass
    await runner.close()
    assert len(sent) == 3 and out.invalid == 0
    assert all(type(c) is types.Content for request in sent for c in request)
