"""Scenario: an agent loop over OpenAI Responses items, reduced before every request.

A scripted model acts like an LLM: per turn it works through planned tool steps, two at
a time in parallel, each response opening with a reasoning item; a step whose output it
cannot see (pruned) is called again, a step whose output was cleared to a placeholder
counts as done. Like the provider's server-side compaction, once a request is over the
compaction threshold the model's response opens with a ``compaction`` item naming what
it summarised. The loop sends ``MessageReducer(...).reduce(history).surviving`` as the
next ``input`` and keeps it, as an agent with a reducing session does. Every request is
checked with ``validate_history(provider="openai-responses")``, and each of the model's
earlier responses must be sent whole or not at all.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentstate_reducer import (
    ClearToolResults,
    MessageReducer,
    ReducerConfig,
    agent_config,
    validate_history,
)
from agentstate_reducer.tokens import approximate_token_count

pytestmark = pytest.mark.slow

TURNS = 30
STEPS = 4  # tool steps per turn, issued two at a time


@dataclass
class ResponsesModel:
    """The scripted model: ``respond(input items) -> output items``."""

    compact_above: int | None = None
    requests: int = 0
    responses: dict[str, list[str]] = field(default_factory=dict)  # reasoning id -> item ids
    calls: Counter[str] = field(default_factory=Counter)
    invalid: list[str] = field(default_factory=list)
    split: list[str] = field(default_factory=list)
    compactions: int = 0

    def _check(self, items: list[dict[str, Any]]) -> None:
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

    def respond(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.requests += 1
        self._check(items)
        n = self.requests
        turn = -1
        known: set[str] = set()
        issued: dict[str, str] = {}
        for item in items:
            if item.get("role") == "user":
                turn = int(str(item["content"]).split(":")[0].split()[1])
            elif item.get("type") == "compaction":
                summary = json.loads(item["encrypted_content"])
                turn = summary["turn"]
                known |= set(summary["known"])
            elif item.get("type") == "function_call":
                issued[item["call_id"]] = json.loads(item["arguments"])["step"]
            elif item.get("type") == "function_call_output" and item["call_id"] in issued:
                known.add(issued[item["call_id"]])
        out: list[dict[str, Any]] = []
        size = sum(approximate_token_count(i) for i in items)
        if self.compact_above is not None and size > self.compact_above:
            self.compactions += 1
            out.append({"type": "compaction", "id": f"cmp_{n}",
                        "encrypted_content": json.dumps({"turn": turn, "known": sorted(known)})})
        reasoning = {"type": "reasoning", "id": f"rs_{n}",
                     "summary": [{"type": "summary_text", "text": f"turn {turn}: plan"}],
                     "encrypted_content": "gAAAA" + "r" * 80}
        missing = [f"t{turn}s{s}" for s in range(STEPS) if f"t{turn}s{s}" not in known]
        if missing:
            body = []
            for k, step in enumerate(missing[:2]):
                self.calls[step] += 1
                body.append({"type": "function_call", "id": f"fc_{n}_{k}",
                             "call_id": f"call_{n}_{k}", "name": "step",
                             "arguments": json.dumps({"step": step}), "status": "completed"})
        else:
            body = [{"type": "message", "role": "assistant", "id": f"msg_{n}",
                     "status": "completed",
                     "content": [{"type": "output_text", "text": f"answer {turn}",
                                  "annotations": []}]}]
        self.responses[reasoning["id"]] = [item["id"] for item in body]
        return [*out, reasoning, *body]


def _run_tool(call: dict[str, Any]) -> dict[str, Any]:
    step = json.loads(call["arguments"])["step"]
    return {"type": "function_call_output", "call_id": call["call_id"],
            "output": f"result {step}: " + "lorem ipsum dolor sit amet " * 8}


def _agent(config: ReducerConfig, model: ResponsesModel) -> tuple[list[Any], int]:
    """Run every turn through the loop; return the final history and the answers given."""
    reducer = MessageReducer(config=config)
    history: list[Any] = []
    answers = 0
    for turn in range(TURNS):
        history.append({"role": "user", "content": f"turn {turn}: work through the steps"})
        for _ in range(4 * STEPS):
            history = reducer.reduce(history).surviving
            out = model.respond(history)
            history = history + out
            calls = [item for item in out if item["type"] == "function_call"]
            if not calls:
                answers += 1
                break
            history += [_run_tool(call) for call in calls]
        else:
            raise AssertionError(f"turn {turn} never finished")
    return history, answers


CONFIGS = {
    "count": agent_config(max_messages=24, min_messages=10),
    # No start_on: the window may end inside a model response.
    "count, cut anywhere": ReducerConfig(max_messages=30, min_messages=17),
    "tokens": agent_config(max_tokens=900, target_tokens=600, token_counter="approximate"),
    "tokens+clear": agent_config(
        max_tokens=900, target_tokens=600, token_counter="approximate",
        context_edits=[ClearToolResults(keep=2)],
    ),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_an_agent_loop_over_responses_items_stays_valid(name: str) -> None:
    model = ResponsesModel()
    history, answers = _agent(CONFIGS[name], model)
    assert answers == TURNS
    assert model.invalid == [] and model.split == []
    assert model.requests >= TURNS * (STEPS // 2 + 1)
    # A step is called again only when its output was pruned before the turn finished:
    # the current turn is protected, so never.
    assert max(model.calls.values()) == 1, model.calls.most_common(3)
    assert validate_history(history, provider="openai-responses") == []


def test_compaction_items_bound_what_is_sent() -> None:
    model = ResponsesModel(compact_above=1500)
    history, answers = _agent(ReducerConfig(max_messages=10_000), model)
    assert answers == TURNS and model.compactions > 0
    assert model.invalid == [] and model.split == []
    # Nothing before the latest compaction item is sent again.
    marks = [i for i, item in enumerate(history) if item.get("type") == "compaction"]
    assert len(marks) == 1 and marks[0] == 1  # after the preserved first message
    assert max(model.calls.values()) == 1
