"""Recovery in PydanticAI (ReducingCapability with a FunctionModel) and the OpenAI Agents
SDK (RecoveringModel under reducing_input_filter and ReducingSession), with the real SDKs.

Each scenario runs 30 turns of three ``step`` calls (results of about 300 tokens). The
scripted provider counts a request about 1.25x the package's heuristic and accepts 2,500
of its tokens while the reducer's budget is 4,000: it refuses a larger request with the
SDK's own error, stating the sizes (PydanticAI: Anthropic's "prompt is too long" in a
``ModelHTTPError``; the Agents SDK: OpenAI's ``context_length_exceeded`` in an
``openai.BadRequestError``). With reasoning on, the provider changes account mid-run
and rejects the earlier signatures. Every request is checked for its provider's rules;
the run must finish with each step run once, and a second refusal raises the
provider's own error.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from agentstate_reducer import MessageReducer, agent_config, validate_history
from agentstate_reducer.tokens import approximate_text_tokens

pytestmark = pytest.mark.slow

TURNS, STEPS = 30, 3
MAX_TOKENS, TARGET, WINDOW = 4_000, 3_000, 2_500
RATIO = 1.25
RESULT = "lorem ipsum dolor sit amet " * 60
NAMESPACE = ("memories", "alice")


def make_reducer() -> MessageReducer:
    return MessageReducer(config=agent_config(
        max_tokens=MAX_TOKENS, target_tokens=TARGET, token_counter="approximate"))


def next_step(turn: int, done: set[str]) -> str | None:
    return next((f"{turn}.{k}" for k in range(STEPS) if f"{turn}.{k}" not in done), None)


@dataclass
class Provider:
    """What the scripted provider saw: every request's size, refusals, errors raised."""

    window: int | None = WINDOW
    #: Whether a refusal states the sizes (else it is a bare HTTP 413).
    states_size: bool = True
    account: str = "a"
    sizes: list[int] = field(default_factory=list)
    refused: list[bool] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    runs: Counter[str] = field(default_factory=Counter)
    replies: int = 0

    def refuse(self, error: Exception | None) -> None:
        self.refused.append(error is not None)
        if error is not None:
            self.errors.append(error)
            raise error

    def report(self, name: str) -> None:
        accepted = [s for s, r in zip(self.sizes, self.refused, strict=True) if not r]
        print(f"\n{name}: {len(self.sizes)} requests, {sum(self.refused)} refused and retried, "
              f"largest accepted {max(accepted)} of a {self.window} window, "
              f"{sum(self.runs.values())} step runs, invalid {len(self.invalid)}")

    def assert_finished(self, turns: int = TURNS) -> None:
        needed = {f"{t}.{k}" for t in range(turns) for k in range(STEPS)}
        assert set(self.runs) == needed and max(self.runs.values()) == 1
        assert not self.invalid, self.invalid[:3]
        assert not any(a and b for a, b in zip(self.refused, self.refused[1:], strict=False))
        assert len(self.sizes) - sum(self.refused) == turns * (STEPS + 1)


# -- PydanticAI ------------------------------------------------------------------------------


def pydantic_agent(provider: Provider, reducer: MessageReducer, thinking: bool) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from agentstate_reducer.pydantic_ai import ReducingCapability

    def anthropic(message: str) -> Exception:
        return ModelHTTPError(400, "claude-sonnet-4-5", {"type": "error", "error": {
            "type": "invalid_request_error", "message": message}})

    def refusal(messages: list[ModelMessage]) -> Exception | None:
        size = int(RATIO * sum(
            approximate_text_tokens(str(getattr(p, "content", None) or getattr(p, "args", "")))
            + 4 for m in messages for p in m.parts))
        provider.sizes.append(size)
        if provider.window is not None and size > provider.window:
            if not provider.states_size:
                return ModelHTTPError(413, "claude-sonnet-4-5", {"type": "error", "error": {
                    "type": "request_too_large", "message": "Request exceeds the maximum size"}})
            return anthropic(f"prompt is too long: {size} tokens > {provider.window} maximum")
        for i, m in enumerate(messages):
            for part in m.parts:
                if isinstance(part, ThinkingPart) and not str(part.signature).startswith(
                        provider.account + "-"):
                    return anthropic(f"messages.{i}.content.0: Invalid `signature` in "
                                     "`thinking` block")
        return None

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for rules in ("openai", "anthropic"):
            provider.invalid += [str(p) for p in validate_history(messages, provider=rules)]
        provider.refuse(refusal(messages))
        at, turn = max(
            (i, int(str(p.content).split()[1].rstrip(":")))
            for i, m in enumerate(messages) if isinstance(m, ModelRequest)
            for p in m.parts if isinstance(p, UserPromptPart) and str(p.content).startswith("turn ")
        )
        parts = [p for m in messages[at:] for p in m.parts]
        asked = {p.tool_call_id: p.args_as_dict()["query"] for p in parts
                 if isinstance(p, ToolCallPart)}
        done = {asked[p.tool_call_id] for p in parts
                if isinstance(p, ToolReturnPart) and p.tool_call_id in asked}
        provider.replies += 1
        lead = ([ThinkingPart(f"step {provider.replies}",
                              signature=f"{provider.account}-{provider.replies}")]
                if thinking else [])
        query = next_step(turn, done)
        if query is None:
            return ModelResponse(parts=[*lead, TextPart(f"answer {turn}")])
        call = ToolCallPart("step", {"query": query}, tool_call_id=f"c{provider.replies}")
        return ModelResponse(parts=[*lead, call])

    agent = Agent(FunctionModel(respond), system_prompt="Work through the steps.",
                  capabilities=[ReducingCapability(reducer, namespace=NAMESPACE)])

    @agent.tool_plain
    def step(query: str) -> str:
        """Do one step."""
        provider.runs[query] += 1
        return f"result {query}: {RESULT}"

    return agent


async def play_pydantic(provider: Provider, reducer: MessageReducer, turns: int = TURNS, *,
                        thinking: bool = False, switch_at: int | None = None) -> list[Any]:
    agent = pydantic_agent(provider, reducer, thinking)
    history: list[Any] | None = None
    for turn in range(turns):
        if turn == switch_at:
            provider.account = "b"
        result = await agent.run(f"turn {turn}: work through the steps", message_history=history)
        assert result.output == f"answer {turn}"
        history = result.all_messages()
    assert history is not None
    return history


async def test_pydantic_ai_finishes_through_one_retry() -> None:
    provider, reducer = Provider(), make_reducer()
    await play_pydantic(provider, reducer)
    provider.report("pydantic-ai, prompt is too long")
    provider.assert_finished()
    assert 1 <= sum(provider.refused) <= 3
    calibration = reducer.calibration(NAMESPACE)
    assert calibration.ceiling is not None and calibration.factor > 1.0


async def test_pydantic_ai_second_refusal_raises_the_providers_own_error() -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    # Six turns fit; then the window shrinks to 40% of the latest request, and a bare 413
    # says no size: the retry, a quarter smaller, is refused again.
    provider, reducer = Provider(window=None, states_size=False), make_reducer()
    history = await play_pydantic(provider, reducer, 6)
    provider.window = int(provider.sizes[-1] * 0.4)
    agent = pydantic_agent(provider, reducer, False)
    with pytest.raises(ModelHTTPError) as raised:
        await agent.run("turn 6: work through the steps", message_history=history)
    assert provider.refused[-2:] == [True, True] and len(provider.errors) == 2
    assert raised.value is provider.errors[1]
    assert provider.sizes[-1] < provider.sizes[-2]


async def test_pydantic_ai_rejected_signature_finishes_without_earlier_reasoning() -> None:
    provider, reducer = Provider(window=None), make_reducer()
    history = await play_pydantic(provider, reducer, thinking=True, switch_at=10)
    provider.report("pydantic-ai, signature")
    provider.assert_finished()
    assert sum(provider.refused) == 1
    from pydantic_ai.messages import ThinkingPart

    # The run's history keeps the signed parts it was given: only requests were stripped.
    kept = [p.signature for m in history for p in m.parts if isinstance(p, ThinkingPart)]
    assert any(str(s).startswith("b-") for s in kept)


# -- OpenAI Agents SDK ----------------------------------------------------------------------


_REQUEST = httpx.Request("POST", "/v1/responses")


def sdk_size(items: list[Any]) -> int:
    total = 0
    for item in items:
        text = " ".join(str(item.get(k, "")) for k in ("content", "arguments", "output"))
        total += approximate_text_tokens(text) + 4
    return int(RATIO * total)


def sdk_model(provider: Provider, thinking: bool) -> Any:
    import openai
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseReasoningItem,
    )

    def error(message: str, code: str) -> Exception:
        body = {"message": message, "type": "invalid_request_error", "param": "input",
                "code": code}
        return openai.BadRequestError(f"Error code: 400 - {{'error': {body}}}",
                                      response=httpx.Response(400, request=_REQUEST), body=body)

    class Scripted(Model):
        async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                               **kwargs: Any) -> ModelResponse:
            items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
            provider.invalid += [str(p) for p in validate_history(items,
                                                                  provider="openai-responses")]
            size = sdk_size(items)
            provider.sizes.append(size)
            refusal = None
            if provider.window is not None and size > provider.window and not provider.states_size:
                refusal = openai.APIStatusError(
                    "Error code: 413", response=httpx.Response(413, request=_REQUEST), body=None)
            elif provider.window is not None and size > provider.window:
                refusal = error(f"This model's maximum context length is {provider.window} "
                                f"tokens. However, your messages resulted in {size} tokens.",
                                "context_length_exceeded")
            elif any(i.get("type") == "reasoning" and not str(i.get("encrypted_content"))
                     .startswith(provider.account + "-") for i in items):
                refusal = error("The encrypted content gAAA...Rg== could not be verified.",
                                "invalid_encrypted_content")
            provider.refuse(refusal)
            at, turn = max(
                (i, int(item["content"].split()[1].rstrip(":"))) for i, item in enumerate(items)
                if item.get("role") == "user" and str(item.get("content")).startswith("turn "))
            asked = {i["call_id"]: json.loads(i["arguments"])["query"] for i in items[at:]
                     if i.get("type") == "function_call"}
            done = {asked[i["call_id"]] for i in items[at:]
                    if i.get("type") == "function_call_output" and i["call_id"] in asked}
            provider.replies += 1
            n = provider.replies
            output: list[Any] = []
            if thinking:
                output.append(ResponseReasoningItem(
                    id=f"rs_{n}", type="reasoning", summary=[],
                    encrypted_content=f"{provider.account}-{n}"))
            query = next_step(turn, done)
            if query is None:
                text = ResponseOutputText(type="output_text", text=f"answer {turn}",
                                          annotations=[])
                output.append(ResponseOutputMessage(id=f"msg_{n}", type="message",
                                                    role="assistant", status="completed",
                                                    content=[text]))
            else:
                output.append(ResponseFunctionToolCall(
                    id=f"fc_{n}", type="function_call", call_id=f"call_{n}", name="step",
                    arguments=json.dumps({"query": query}), status="completed"))
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scenario does not stream")

    return Scripted()


async def play_sdk(provider: Provider, reducer: MessageReducer, turns: int = TURNS, *,
                   thinking: bool = False, switch_at: int | None = None,
                   session: Any = None) -> Any:
    from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool

    from agentstate_reducer.openai_agents import (
        RecoveringModel,
        ReducingSession,
        reducing_input_filter,
    )

    @function_tool
    def step(query: str) -> str:
        """Do one step."""
        provider.runs[query] += 1
        return f"result {query}: {RESULT}"

    model = RecoveringModel(sdk_model(provider, thinking), reducer, namespace=NAMESPACE)
    agent = Agent(name="worker", instructions="Work through the steps.", model=model,
                  tools=[step])
    session = session or ReducingSession(SQLiteSession("alice"), reducer, namespace=NAMESPACE)
    run_config = RunConfig(tracing_disabled=True, call_model_input_filter=reducing_input_filter(
        reducer, namespace=NAMESPACE))
    for turn in range(turns):
        if turn == switch_at:
            provider.account = "b"
        result = await Runner.run(agent, f"turn {turn}: work through the steps",
                                  session=session, run_config=run_config, max_turns=12)
        assert result.final_output == f"answer {turn}"
    return session, agent, run_config


async def test_agents_sdk_finishes_through_one_retry() -> None:
    provider, reducer = Provider(), make_reducer()
    await play_sdk(provider, reducer)
    provider.report("agents sdk, context_length_exceeded")
    provider.assert_finished()
    assert 1 <= sum(provider.refused) <= 3
    calibration = reducer.calibration(NAMESPACE)
    assert calibration.ceiling is not None and calibration.factor > 1.0


async def test_agents_sdk_second_refusal_raises_the_providers_own_error() -> None:
    import openai
    from agents import Runner

    provider, reducer = Provider(window=None, states_size=False), make_reducer()
    session, agent, run_config = await play_sdk(provider, reducer, 6)
    provider.window = int(provider.sizes[-1] * 0.4)
    with pytest.raises(openai.APIStatusError) as raised:
        await Runner.run(agent, "turn 6: work through the steps", session=session,
                         run_config=run_config, max_turns=12)
    assert provider.refused[-2:] == [True, True] and len(provider.errors) == 2
    assert raised.value is provider.errors[1]


async def test_agents_sdk_rejected_reasoning_finishes_without_earlier_reasoning() -> None:
    provider, reducer = Provider(window=None), make_reducer()
    await play_sdk(provider, reducer, thinking=True, switch_at=10)
    provider.report("agents sdk, invalid_encrypted_content")
    provider.assert_finished()
    assert sum(provider.refused) == 1
