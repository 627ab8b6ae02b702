"""The reasoning replay policy (ReducerConfig(reasoning=...)): which signed reasoning a
request carries back to its model, checked against the providers' documented rules as
tests/support/provider_rules.py simulates them (apart from validate.py's own rules).

Scenarios: threads that switch Claude model mid-way (and in the middle of a tool round),
an OpenAI reasoning model switched for another, a branch resumed from an older state,
and a signature error answered by a retry. Signed blocks are byte-identical wherever
they are kept.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from provider_rules import (
    anthropic_refusal,
    encrypt,
    openai_refusal,
    sign,
    signed_blocks,
)

from agentstate_reducer import (
    MessageReducer,
    Recovery,
    ReducerConfig,
    agent_config,
    validate_history,
)
from agentstate_reducer.errors import ConfigError
from agentstate_reducer.read import reasoning_model, reasoning_parts
from agentstate_reducer.reasoning import (
    can_verify,
    checks_prefix,
    model_key,
    replay_reasoning,
)

# -- the pure parts ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("claude-opus-4-6", "claude-opus-4-6"),
        ("claude-opus-4-6-20260205", "claude-opus-4-6"),
        ("anthropic/claude-opus-4.6", "claude-opus-4-6"),
        ("us.anthropic.claude-opus-4-6-20260205-v1:0", "claude-opus-4-6"),
        ("claude-opus-4-6@20260205", "claude-opus-4-6"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("GPT-5.4-2026-03-05", "gpt-5.4"),
        ("openai/gpt-5.4-mini", "gpt-5.4-mini"),
    ],
)
def test_model_key_sees_one_model_through_platform_names(name: str, key: str) -> None:
    assert model_key(name) == key


def test_which_model_verifies_which_blocks() -> None:
    assert can_verify("claude-opus-4-8", "claude-opus-4-8-20260601")
    assert not can_verify("claude-sonnet-5", "claude-opus-4-8")
    assert not can_verify("gpt-5.5", "gpt-5.4")  # encrypted reasoning is per model
    assert not can_verify("gpt-5.4-mini", "gpt-5.4")
    # Preserved thinking: Fable 5.1 reads Opus 5 and Opus 5.5; neither reads Fable 5.1.
    assert can_verify("claude-fable-5-1", "claude-opus-5")
    assert can_verify("claude-fable-5-1", "claude-opus-5-5")
    assert not can_verify("claude-opus-5", "claude-fable-5-1")
    assert not can_verify("claude-opus-5-5", "claude-fable-5-1")


@pytest.mark.parametrize(
    ("model", "checked"),
    [
        ("claude-fable-5-1", True),
        ("claude-opus-5-5", True),
        ("claude-sonnet-5-5", True),
        ("claude-haiku-5-5", True),
        ("claude-opus-6", True),
        ("claude-fable-5", False),
        ("claude-opus-5", False),
        ("claude-sonnet-5", False),
        ("claude-opus-4-8", False),
        ("gpt-5.5", False),
    ],
)
def test_which_models_check_the_prefix(model: str, checked: bool) -> None:
    assert checks_prefix(model) is checked


def test_a_bad_policy_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match="reasoning must be 'keep', 'current-turn' or 'model'"):
        ReducerConfig(reasoning="strip")
    assert ReducerConfig().reasoning == "keep"
    assert agent_config().reasoning == "model"


def test_the_producer_is_read_from_every_shape_that_carries_it() -> None:
    from pydantic_ai.messages import ModelResponse, TextPart

    ai = AIMessage("hi", response_metadata={"model_name": "claude-opus-4-8"})
    assert reasoning_model(ai) == "claude-opus-4-8"
    assert reasoning_model(AIMessage("hi", response_metadata={"model": "gpt-5.4"})) == "gpt-5.4"
    dumped = {"type": "ai", "data": {"content": "hi", "response_metadata": {"model_name": "m"}}}
    assert reasoning_model(dumped) == "m"
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": [{"type": "text", "text": "hi"}],
    }
    assert reasoning_model(message) == "claude-sonnet-5"
    assert reasoning_model(ModelResponse(parts=[TextPart("hi")], model_name="gpt-5.5")) == "gpt-5.5"
    assert reasoning_model({"role": "assistant", "content": "hi"}) is None
    assert reasoning_model({"type": "reasoning", "id": "rs_1", "summary": []}) is None


# -- scripted providers -----------------------------------------------------------------


class Refused(Exception):
    """What an SDK raises for a 400: the status and the provider's text."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.status_code = 400


def _claude_reply(model: str, request: list[BaseMessage], step: str, call: bool) -> AIMessage:
    text = f"{model} reasons about {step}"
    signature = sign(model, text, request)
    blocks: list[Any] = [{"type": "thinking", "thinking": text, "signature": signature}]
    meta = {"model_name": model}
    if call:
        blocks.append({"type": "tool_use", "id": f"c-{step}", "name": "look", "input": {"q": step}})
        calls = [{"id": f"c-{step}", "name": "look", "args": {"q": step}}]
        return AIMessage(content=blocks, tool_calls=calls, response_metadata=meta, id=f"a-{step}")
    blocks.append({"type": "text", "text": f"answer {step}"})
    return AIMessage(content=blocks, response_metadata=meta, id=f"a-{step}")


def _openai_reply(model: str, request: list[BaseMessage], step: str, call: bool) -> AIMessage:
    text = f"{model} reasons about {step}"
    blocks: list[Any] = [
        {
            "type": "reasoning",
            "id": f"rs-{step}",
            "summary": [],
            "encrypted_content": encrypt(model, text),
        }
    ]
    meta = {"model_name": model}
    if call:
        calls = [{"id": f"c-{step}", "name": "look", "args": {"q": step}}]
        return AIMessage(content=blocks, tool_calls=calls, response_metadata=meta, id=f"a-{step}")
    blocks.append({"type": "text", "text": f"answer {step}"})
    return AIMessage(content=blocks, response_metadata=meta, id=f"a-{step}")


Reply = Callable[[str, list[BaseMessage], str, bool], AIMessage]
Rules = Callable[[str, list[BaseMessage]], "str | None"]


@dataclass
class Thread:
    """A thread driven through reducers, one per model, and the provider's checks."""

    rules: Rules
    reply: Reply
    policy: str
    #: True: the stored history is what the reducer returned (a saver); False: the
    #: stored history is whole and each request is reduced (the middleware).
    storing: bool
    config: dict[str, Any] = field(default_factory=dict)
    state: list[BaseMessage] = field(default_factory=list)
    requests: int = 0
    refused: list[str] = field(default_factory=list)
    produced: dict[str, str] = field(default_factory=dict)
    altered: int = 0
    reducers: dict[str, MessageReducer] = field(default_factory=dict)

    def reducer(self, model: str) -> MessageReducer:
        if model not in self.reducers:
            options = {"max_tokens": 900, "target_tokens": 600, "token_counter": "approximate"}
            options.update(self.config)
            config = agent_config(model=model, reasoning=self.policy, **options)
            self.reducers[model] = MessageReducer(config=config)
        return self.reducers[model]

    def step(self, model: str, name: str, call: bool) -> list[BaseMessage]:
        request = list(self.reducer(model).reduce(self.state).surviving)
        self.requests += 1
        refusal = self.rules(model, request)
        if refusal is not None:
            self.refused.append(refusal)
        for proof, text in signed_blocks(request).items():
            self.altered += self.produced.get(proof, text) != text
        reply = self.reply(model, request, name, call)
        self.produced.update(signed_blocks([reply]))
        if self.storing:
            self.state = request
        self.state = [*self.state, reply]
        if call:
            self.state.append(ToolMessage("result " * 40, tool_call_id=f"c-{name}", id=f"t-{name}"))
        return request

    def turn(self, k: int, models: list[str]) -> None:
        self.state = [*self.state, HumanMessage(f"question {k} " + "words " * 30, id=f"h-{k}")]
        for s, model in enumerate(models):
            self.step(model, f"{k}.{s}", call=s < len(models) - 1)


def _claude_thread(policy: str, storing: bool) -> Thread:
    thread = Thread(anthropic_refusal, _claude_reply, policy, storing)
    for k, models in enumerate(
        (
            ["claude-opus-4-8"] * 3,
            ["claude-opus-4-8"] * 3,
            ["claude-sonnet-5"] * 3,  # switched between turns
            ["claude-sonnet-5", "claude-sonnet-5", "claude-opus-4-8"],  # inside a tool round
            ["claude-opus-5"] * 3,
            ["claude-fable-5-1"] * 3,  # reads Opus 5's blocks, checks the prefix
            ["claude-fable-5-1", "claude-opus-5-5", "claude-fable-5-1"],
            ["claude-opus-4-8"] * 3,
        )
    ):
        thread.turn(k, models)
    return thread


@pytest.mark.parametrize("storing", [False, True], ids=["middleware", "saver"])
def test_a_claude_thread_switching_models_sends_no_invalid_request(storing: bool) -> None:
    thread = _claude_thread("model", storing)
    assert thread.refused == []
    assert thread.altered == 0  # every signed block kept is byte for byte as produced
    assert thread.requests == 24


@pytest.mark.parametrize("storing", [False, True], ids=["middleware", "saver"])
def test_keeping_every_block_across_the_switches_is_refused(storing: bool) -> None:
    thread = _claude_thread("keep", storing)
    assert len(thread.refused) >= 5
    assert any("Invalid `signature`" in r for r in thread.refused)


def test_current_turn_is_valid_while_the_model_stays_within_a_turn() -> None:
    thread = Thread(anthropic_refusal, _claude_reply, "current-turn", storing=False)
    for k, model in enumerate(["claude-opus-4-8", "claude-opus-4-8", "claude-sonnet-5"]):
        thread.turn(k, [model] * 3)
    assert thread.refused == [] and thread.altered == 0


def test_every_request_of_the_thread_is_valid_by_validate_history_too() -> None:
    seen: list[list[BaseMessage]] = []

    def rules(model: str, request: list[BaseMessage]) -> str | None:
        seen.append(request)
        return anthropic_refusal(model, request)

    thread = Thread(rules, _claude_reply, "model", storing=False)
    for k, models in enumerate([["claude-opus-4-8"] * 3, ["claude-sonnet-5", "claude-opus-4-8"]]):
        thread.turn(k, models)
    assert thread.refused == []
    assert all(validate_history(r, provider="anthropic") == [] for r in seen)


@pytest.mark.parametrize("storing", [False, True], ids=["middleware", "saver"])
def test_an_openai_reasoning_model_switched_for_another(storing: bool) -> None:
    def run(policy: str) -> Thread:
        thread = Thread(openai_refusal, _openai_reply, policy, storing)
        plan = [
            ["gpt-5.4"] * 3,
            ["gpt-5.4"] * 3,
            ["gpt-5.5"] * 3,
            ["gpt-5.5", "gpt-5.4-mini", "gpt-5.4-mini"],
            ["gpt-5.4"] * 3,
        ]
        for k, models in enumerate(plan):
            thread.turn(k, models)
        return thread

    thread = run("model")
    assert thread.refused == [] and thread.altered == 0
    assert len(run("keep").refused) >= 3


def test_exactly_the_blocks_the_model_cannot_verify_are_dropped() -> None:
    history: list[Any] = []
    for k, model in enumerate(["claude-opus-5", "claude-sonnet-5", "claude-opus-5"]):
        history.append(HumanMessage(f"q{k}", id=f"h{k}"))
        history.append(_claude_reply(model, list(history), str(k), call=False))
    history.append(HumanMessage("q3", id="h3"))
    # Opus 5 checks no prefix: only the Sonnet 5 block goes.
    out, changed = replay_reasoning(history, policy="model", model="claude-opus-5")
    assert changed == 1
    assert [bool(reasoning_parts(m)) for m in out if m.type == "ai"] == [True, False, True]
    assert out[1] is history[1] and out[5] is history[5]
    assert out[3].content == [history[3].content[1]]  # the text block, as it was
    # Fable 5.1 reads Opus 5's blocks; it checks the prefix, so what follows the dropped
    # Sonnet block goes too.
    out, _ = replay_reasoning(history, policy="model", model="claude-fable-5-1")
    assert [bool(reasoning_parts(m)) for m in out if m.type == "ai"] == [True, False, False]
    assert anthropic_refusal("claude-fable-5-1", out) is None
    assert replay_reasoning(history, policy="model", model=None)[1] == 0
    assert replay_reasoning(history, policy="keep", model="claude-opus-5")[1] == 0
    # A block whose producer is not known is kept.
    bare = [history[0], AIMessage(content=history[1].content, id="x"), history[2]]
    assert replay_reasoning(bare, policy="model", model="claude-sonnet-5")[1] == 0


def test_a_reduce_reports_and_counts_the_dropped_reasoning() -> None:
    history: list[Any] = []
    for k, model in enumerate(["claude-opus-4-8", "claude-opus-4-8"]):
        history.append(HumanMessage(f"q{k}", id=f"h{k}"))
        history.append(_claude_reply(model, list(history), str(k), call=False))
    history.append(HumanMessage("q2", id="h2"))
    config = agent_config(model="claude-sonnet-5", max_tokens=10_000, token_counter="approximate")
    reducer = MessageReducer(config=config)
    result = reducer.reduce(history)
    assert result.reasoning_dropped == 2
    assert result.tokens_after == sum(reducer.count_tokens(result.surviving))
    assert result.tokens_after < result.tokens_before
    again = reducer.reduce(result.surviving)  # the second reduce changes nothing
    assert again.reasoning_dropped == 0
    assert all(a is b for a, b in zip(again.surviving, result.surviving, strict=True))


@pytest.mark.parametrize("storing", [False, True], ids=["middleware", "saver"])
def test_a_branch_resumed_from_an_older_state(storing: bool) -> None:
    thread = Thread(anthropic_refusal, _claude_reply, "model", storing)
    states = []
    models = ["claude-fable-5-1", "claude-fable-5-1", "claude-opus-5", "claude-fable-5-1"]
    for k, model in enumerate(models):
        thread.turn(k, [model] * 3)
        states.append(list(thread.state))
    # Resume from the state after the second turn, on the same reducers (their memory of
    # the longer list is stale), then on another model.
    for model in ("claude-fable-5-1", "claude-sonnet-5-5"):
        branch = dataclasses.replace(thread, state=list(states[1]), refused=[])
        branch.turn(9, [model] * 3)
        assert branch.refused == [] and branch.altered == 0
    assert thread.refused == [] and thread.altered == 0


def test_a_signature_error_is_answered_by_one_retry_without_earlier_reasoning() -> None:
    # Thinking of another model that names no producer: the policy cannot tell, the
    # provider refuses, and recovery sends the request again without earlier turns'
    # reasoning; the current turn's blocks go back byte for byte.
    history: list[BaseMessage] = [HumanMessage("q0", id="h0")]
    foreign = _claude_reply("claude-opus-4-8", list(history), "0", call=False)
    history.append(AIMessage(content=foreign.content, id="a-0"))  # no response metadata
    history.append(HumanMessage("q1", id="h1"))
    history.append(_claude_reply("claude-sonnet-5", list(history), "1.0", call=True))
    history.append(ToolMessage("r", tool_call_id="c-1.0", id="t-1.0"))
    reducer = MessageReducer(config=agent_config(model="claude-sonnet-5"))
    recovery = Recovery(reducer)
    sent: list[list[BaseMessage]] = []

    def send(request: list[BaseMessage]) -> AIMessage:
        sent.append(request)
        refusal = anthropic_refusal("claude-sonnet-5", request)
        if refusal is not None:
            raise Refused(refusal)
        return _claude_reply("claude-sonnet-5", request, "1.1", call=False)

    reply = recovery.call(reducer.reduce(history).surviving, send)
    assert reply.content[0]["type"] == "thinking"
    assert len(sent) == 2 and recovery.retries == 1 and recovery.failed_retries == 0
    assert anthropic_refusal("claude-sonnet-5", sent[1]) is None
    assert sent[1][-2] is history[-2]  # the tool round's signed message, the same object
    assert json.dumps(sent[1][-2].content) == json.dumps(history[-2].content)


def test_docs_quote_the_figures_of_the_claude_thread() -> None:
    from pathlib import Path

    refused = {
        (policy, storing): len(_claude_thread(policy, storing).refused)
        for policy in ("keep", "current-turn", "model")
        for storing in (False, True)
    }
    keep, middleware, saver = (
        refused["keep", False],
        refused["current-turn", False],
        refused["current-turn", True],
    )
    assert refused["keep", True] == keep and refused["model", False] == refused["model", True] == 0
    text = " ".join((Path(__file__).parents[2] / "docs" / "pruning.md").read_text().split())
    assert (
        f'sends {keep} of 24 requests the provider refuses with `"keep"`, {middleware} (through '
        f'a middleware) or {saver} (behind a saver) with `"current-turn"`, 0 with `"model"`'
    ) in text
