"""OpenAI Agents SDK runs under windows smaller than one turn, with the real SDK.

A real ``Agent`` with a real function tool runs 30 turns through ``Runner.run`` against a
scripted ``Model`` that acts like an LLM: each response opens with a reasoning item, it
works through the steps of its turn (some in parallel), calls the tool again for any
output it cannot see, and answers when it sees them all. The history is bounded by
:class:`ReducingSession` over a real ``SQLiteSession``, by :func:`reducing_input_filter`,
or both. Every request the model gets is checked with ``validate_history`` for the
Responses API and must send each earlier response whole or not at all; tool runs must
equal the runs needed, and the hooks must get each pruned item once.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

from agentstate_reducer import MessageReducer, ReducerConfig, agent_config, validate_history
from agentstate_reducer.openai_agents import ReducingSession, reducing_input_filter

pytestmark = pytest.mark.slow

TURNS = 30
INSTRUCTIONS = "You work through the steps with the step tool."


def _key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, default=str)


def _as_it_was(item: Any) -> Any:
    """A handed item as the conversation had it: an edited original reaches the hooks with
    the package's note on it (the edit, its handle) and its handle as id, taken off here."""
    note = item.get("agentstate_reducer") if isinstance(item, dict) else None
    if not isinstance(note, dict) or "edit" not in note:
        return item
    return {
        k: v for k, v in item.items()
        if k != "agentstate_reducer" and not (k == "id" and v == note["handle"])
    }


def _written(item: Any) -> bool:
    """An item holding what the package wrote: a placeholder or a turn note."""
    return _turn_note(item) or _placeholder(item)


def _placeholder(item: Any) -> bool:
    """An item holding a cleared or offloaded placeholder."""
    return any(mark in _key(item) for mark in ('"[cleared: ', '"[offloaded: '))


def _holds_note(item: Any) -> bool:
    """An item holding a turn note's text anywhere (marked, unmarked, or in a copy)."""
    return "[turn note: " in _key(item)


def _turn_note(item: Any) -> bool:
    """A turn note the ladder wrote, as the model is sent it (marker and id taken off):
    the package's, never conversation to store or hand over."""
    content = item.get("content") if isinstance(item, dict) else None
    return isinstance(content, str) and content.startswith("[turn note: ")


def _notes_in_turn(items: list[Any]) -> int:
    """The most turn notes a request holds for one turn (between two questions)."""
    most = notes = 0
    for item in items:
        if item.get("role") == "user" and str(item.get("content")).startswith("turn "):
            notes = 0
        notes += _turn_note(item)
        most = max(most, notes)
    return most


@dataclass
class TurnModel(Model):
    """A scripted model working through ``steps`` steps per turn, ``parallel`` at a time.

    ``chain=False``: it needs every output of its turn, so it calls the first steps whose
    outputs it cannot see; ``chain=True``: it goes on from the latest output it sees. When
    it has what it needs it answers.
    """

    steps: int
    parallel: int = 1
    chain: bool = False
    requests: int = 0
    lost_question: int = 0
    invalid: list[str] = field(default_factory=list)
    split: list[str] = field(default_factory=list)
    #: reasoning id -> the ids of the items of that response, in order.
    responses: dict[str, list[str]] = field(default_factory=dict)
    contexts: list[list[Any]] = field(default_factory=list)
    produced: list[Any] = field(default_factory=list)

    def _check(self, items: list[Any]) -> None:
        problems = validate_history(items, provider="openai-responses")
        if problems:
            self.invalid.append(str(problems[0]))
        sent = [item.get("id") for item in items]
        for reasoning, ids in self.responses.items():
            if reasoning in sent:
                at = sent.index(reasoning)
                if sent[at + 1 : at + 1 + len(ids)] != ids:
                    self.split.append(reasoning)
            elif any(i in sent for i in ids):
                self.split.append(reasoning)

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
                           ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.requests += 1
        self.contexts.append(items)
        self._check(items)
        n = self.requests
        turn, at = -1, 0
        for i, item in enumerate(items):
            content = item.get("content")
            if item.get("role") == "user" and isinstance(content, str) and content.startswith(
                "turn "
            ):
                turn, at = int(content.split()[1].rstrip(":")), i
        if turn < 0:
            self.lost_question += 1
            return self._reply([self._message(n, "I lost the question.")])
        seen = {
            str(item.get("output", "")).split(":", 1)[0][len("result ") :]
            for item in items[at:]
            if item.get("type") == "function_call_output"
        }
        done = [s for s in range(self.steps) if f"{turn}.{s}" in seen]
        if self.chain:
            todo = list(range(max(done) + 1 if done else 0, self.steps))[: self.parallel]
        else:
            todo = [s for s in range(self.steps) if s not in done][: self.parallel]
        if not todo:
            return self._reply([self._message(n, f"answer {turn}: all {self.steps} steps done")])
        output: list[Any] = [
            ResponseReasoningItem(
                id=f"rs_{n}", type="reasoning",
                summary=[Summary(type="summary_text", text=f"next: {todo}")],
            )
        ]
        for s in todo:
            output.append(
                ResponseFunctionToolCall(
                    id=f"fc_{n}_{s}", type="function_call", call_id=f"call_{turn}_{s}_{n}",
                    name="step", arguments=json.dumps({"query": f"{turn}.{s}"}),
                    status="completed",
                )
            )
        self.responses[f"rs_{n}"] = [o.id for o in output[1:]]
        return self._reply(output)

    def _message(self, n: int, text: str) -> ResponseOutputMessage:
        return ResponseOutputMessage(
            id=f"msg_{n}", type="message", role="assistant", status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )

    def _reply(self, output: list[Any]) -> ModelResponse:
        response = ModelResponse(output=output, usage=Usage(), response_id=None)
        self.produced.extend(response.to_input_items())
        return response

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scenarios do not stream")


class ResponsesOnlySession(SQLiteSession):
    """A session that stores what the Responses API takes: the package's marker (on a
    summary, a turn note, an edited copy) is not among its fields, so it is dropped, as a
    store that keeps items in the API's own types (or on the server) drops it."""

    async def add_items(self, items: list[Any]) -> None:
        await super().add_items([
            {k: v for k, v in i.items() if k != "agentstate_reducer"} if isinstance(i, dict)
            else i
            for i in items
        ])


@dataclass
class Deliveries:
    got: list[tuple[Any, Any]] = field(default_factory=list)

    async def hook(self, pruned: list[Any], namespace: Any) -> None:
        self.got.extend((namespace, item) for item in pruned)


def count(lo: int, hi: int) -> ReducerConfig:
    return agent_config(min_messages=lo, max_messages=hi)


def tokens(most: int, target: int) -> ReducerConfig:
    return agent_config(max_tokens=most, target_tokens=target, token_counter="approximate")


@dataclass(frozen=True)
class Scenario:
    name: str
    approach: str  # session | filter | both
    steps: int
    config: ReducerConfig
    words: int = 12
    parallel: int = 1
    chain: bool = False
    #: The inner session: ``SQLiteSession``, or one keeping the Responses API's fields only.
    store: type[SQLiteSession] = SQLiteSession


SCENARIOS = [
    Scenario("session 4/8, 4 steps", "session", 4, count(4, 8)),
    Scenario("filter 4/8, 5 steps", "filter", 5, count(4, 8)),
    Scenario("both 6/12, 6 steps 2 at a time", "both", 6, count(6, 12), parallel=2),
    Scenario("both 3/6, 4 steps 3 at a time", "both", 4, count(3, 6), parallel=3),
    # Outputs of about 1,300 tokens: the turn fits max_tokens, not target_tokens.
    Scenario("both 8000/6000 tokens, 5 steps", "both", 5, tokens(8000, 6000), 1000),
    # Outputs of about 5,200 tokens, each alone over max_tokens: the latest step stays.
    Scenario(
        "both 3000/2000 tokens, oversized outputs", "both", 4, tokens(3000, 2000), 4000,
        chain=True,
    ),
    # The same where the store drops the marker: the turn notes the session stored come
    # back as plain user items, to the session and to the input filter.
    Scenario(
        "session 3000/2000 tokens, oversized outputs, Responses-only store", "session", 4,
        tokens(3000, 2000), 4000, chain=True, store=ResponsesOnlySession,
    ),
    Scenario(
        "both 3000/2000 tokens, oversized outputs, Responses-only store", "both", 4,
        tokens(3000, 2000), 4000, chain=True, store=ResponsesOnlySession,
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_every_turn_finishes_with_each_tool_run_once(scenario: Scenario) -> None:
    runs: Counter[str] = Counter()
    out = Deliveries()
    model = TurnModel(scenario.steps, parallel=scenario.parallel, chain=scenario.chain)

    @function_tool
    def step(query: str) -> str:
        """Do one step of the task."""
        runs[query] += 1
        return f"result {query}: " + "lorem ipsum dolor sit amet " * (scenario.words // 5)

    reducer = MessageReducer(config=replace(scenario.config, on_prune=[out.hook]))
    agent = Agent(name="worker", instructions=INSTRUCTIONS, model=model, tools=[step])
    session: Any = scenario.store("alice")
    if scenario.approach != "filter":
        session = ReducingSession(session, reducer)
    run_config = RunConfig(
        tracing_disabled=True,
        call_model_input_filter=(
            reducing_input_filter(reducer, namespace=("memories", "alice"))
            if scenario.approach != "session" else None
        ),
    )
    for turn in range(TURNS):
        result = await Runner.run(
            agent, f"turn {turn}: do the steps", session=session, run_config=run_config,
            max_turns=4 * scenario.steps + 4,
        )
        assert result.final_output == f"answer {turn}: all {scenario.steps} steps done"
    stored = await session.get_items()
    needed = {f"{t}.{s}" for t in range(TURNS) for s in range(scenario.steps)}
    per_turn = -(-scenario.steps // scenario.parallel) + 1
    print(
        f"\n{scenario.name}: {TURNS} turns, {model.requests} requests checked, invalid: "
        f"{len(model.invalid)}, split responses: {len(model.split)}, tool runs "
        f"{sum(runs.values())} (needed {len(needed)}), pruned {len(out.got)}, "
        f"stored {len(stored)}"
    )
    assert not model.invalid, model.invalid[:3]
    assert not model.split, model.split[:3]
    assert model.lost_question == 0
    assert set(runs) == needed and max(runs.values()) == 1
    assert model.requests == TURNS * per_turn
    # One note per turn: a later drop rewrites it, also when it came back unmarked.
    stacked = [n for n in map(_notes_in_turn, model.contexts) if n > 1]
    assert not stacked, f"{len(stacked)} requests hold up to {max(stacked)} notes of one turn"

    # Each pruned item reached the hooks once, under the session's namespace, and every
    # item of the conversation is stored or was handed over.
    assert {ns for ns, _ in out.got} == {("memories", "alice")}
    # A turn note is the package's own, marked or not (the Responses API takes no marker,
    # so the note the session stored reaches the input filter without one): never handed.
    noted = [_key(item)[:120] for _, item in out.got if _holds_note(item)]
    assert not noted, noted[:3]
    handed = [_key(item) for _, item in out.got]
    assert len(handed) == len(set(handed))
    every = {_key(i) for c in [*model.contexts, model.produced] for i in c if not _turn_note(i)}
    if scenario.approach == "filter":
        kept = {_key(i) for i in stored}  # the session keeps everything: nothing to check
        assert set(handed) <= every and kept == every
    else:
        kept = {_key(i) for i in stored}
        assert not kept & set(handed)
        # An edited original goes over with the package's note and its handle as id.
        was = {_key(_as_it_was(item)) for _, item in out.got}
        assert every <= kept | set(handed) | was
        # What else went over: an edited original, or a copy the session stored with a
        # placeholder in it that a later request no longer held (its original went over
        # when it was made); never a turn note.
        extra = [i for _, i in out.got if _key(i) not in every | kept]
        assert all(_as_it_was(i) is not i or _written(i) for i in extra)
        assert all(_as_it_was(i) is not i or _placeholder(i) for i in extra)
        if scenario.config.max_tokens is None:
            assert scenario.config.max_messages is not None
            # The window, the turn the SDK was in when it last added items, the first item.
            batches = [min(scenario.parallel, scenario.steps - b)
                       for b in range(0, scenario.steps, scenario.parallel)]
            turn_items = 2 + sum(1 + 2 * k for k in batches)
            assert len(stored) <= scenario.config.max_messages + turn_items + 1
