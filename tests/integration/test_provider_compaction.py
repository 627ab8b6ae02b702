"""Provider-side compaction through the integrations (issue 26 item 3): each request
carries the parameters that ask the provider to compact, a scripted reply holding a
compaction block becomes the boundary of the next request, and the reducer stays armed.
Scripted models, no network."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from agentstate_reducer import ConfigError, MessageReducer, ReducerConfig
from agentstate_reducer.compaction import provider_compaction
from agentstate_reducer.langgraph import ReducingMiddleware

FIXTURES = Path(__file__).parent.parent / "fixtures" / "compaction"


def _anthropic_reply() -> list[dict[str, Any]]:
    data = json.loads((FIXTURES / "anthropic_response.json").read_text())
    content: list[dict[str, Any]] = data["content"]
    return content


class Scripted(BaseChatModel):
    """Answers in turn; on the compacting call, with the documented compaction block."""

    compact_on: int = 3
    calls: list[tuple[list[BaseMessage], dict[str, Any]]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls.append((list(messages), dict(kwargs)))
        n = len(self.calls)
        if n == self.compact_on:
            reply = AIMessage(content=copy.deepcopy(_anthropic_reply()), id=f"ai-{n}")
        else:
            reply = AIMessage(content=f"answer {n} " + "word " * 400, id=f"ai-{n}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _agent(model: Scripted, middleware: ReducingMiddleware) -> Any:
    return create_agent(model, tools=[], middleware=[middleware])


@pytest.mark.parametrize("provider", ["anthropic", "openai-responses"])
def test_the_middleware_binds_the_parameters_and_honours_the_block(provider: str) -> None:
    config = ReducerConfig(max_tokens=100_000, preserve_first=False)
    middleware = ReducingMiddleware(MessageReducer(config=config), compaction=provider)
    model = Scripted(calls=[])
    agent = _agent(model, middleware)
    messages: list[Any] = []
    for turn in range(5):
        messages.append(HumanMessage(f"question {turn}", id=f"h-{turn}"))
        messages = agent.invoke({"messages": messages})["messages"]
    expected = provider_compaction(config, provider)
    assert len(model.calls) == 5
    for _, kwargs in model.calls:
        for key, value in expected.items():
            assert kwargs[key] == value
    # after the compacting reply, requests start at it: what precedes it is not sent
    for sent, _ in model.calls[3:]:
        assert sent[0].content == _anthropic_reply()
        assert all(m.id not in ("h-0", "ai-1", "h-1", "ai-2", "h-2") for m in sent)
    assert model.calls[2][0][0].id == "h-0"


def test_without_a_block_the_middleware_still_bounds_the_request() -> None:
    config = ReducerConfig(max_tokens=3_000, target_tokens=2_000, preserve_first=False)
    reducer = MessageReducer(config=config)
    middleware = ReducingMiddleware(reducer, compaction={"context_management": [{"type": "x"}]})
    model = Scripted(calls=[], compact_on=-1)
    agent = _agent(model, middleware)
    messages: list[Any] = []
    for turn in range(12):
        messages.append(HumanMessage(f"question {turn}", id=f"h-{turn}"))
        messages = agent.invoke({"messages": messages})["messages"]
    for sent, kwargs in model.calls:
        assert kwargs["context_management"] == [{"type": "x"}]
        assert reducer.request_tokens(sent) <= config.max_tokens


def test_a_bad_compaction_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="compaction"):
        ReducingMiddleware(MessageReducer(config=ReducerConfig(max_tokens=100_000)), compaction=3)
    with pytest.raises(ConfigError, match="token mode"):
        ReducingMiddleware(MessageReducer(config=ReducerConfig()), compaction="anthropic")


@pytest.mark.parametrize(
    ("provider", "key"),
    [
        ("openai-responses", "openai_context_management"),
        ("anthropic", "anthropic_context_management"),
    ],
)
def test_pydantic_ai_model_settings_carry_the_parameters(provider: str, key: str) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from agentstate_reducer.pydantic_ai import ReducingCapability

    config = ReducerConfig(max_tokens=100_000)
    seen: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info.model_settings)
        return ModelResponse(parts=[TextPart("done")])

    capability = ReducingCapability(MessageReducer(config=config), compaction=provider)
    agent = Agent(FunctionModel(model), capabilities=[capability])
    asyncio.run(agent.run("hello"))
    expected = provider_compaction(config, provider)["context_management"]
    assert seen and all(s is not None and s[key] == expected for s in seen)


def test_agents_sdk_model_settings_carry_the_responses_parameters() -> None:
    pytest.importorskip("agents")
    from agents.model_settings import ModelSettings

    from agentstate_reducer.openai_agents import compaction_settings

    reducer = MessageReducer(config=ReducerConfig(max_tokens=100_000))
    settings = compaction_settings(reducer)
    expected = provider_compaction(reducer.config, "openai-responses")["context_management"]
    assert settings.context_management == expected
    merged = ModelSettings(temperature=0.2).resolve(settings)
    assert merged.context_management == expected and merged.temperature == 0.2
    assert compaction_settings(reducer, threshold=80_000).context_management == [
        {"type": "compaction", "compact_threshold": 80_000}
    ]
    with pytest.raises(ConfigError, match="token mode"):
        compaction_settings(MessageReducer(config=ReducerConfig()))


def test_a_pydantic_ai_compaction_part_from_the_provider_is_the_boundary() -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.messages import (
        CompactionPart,
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )

    summary = _anthropic_reply()[0]["content"]
    history: list[Any] = []
    for i in range(4):
        history.append(ModelRequest(parts=[UserPromptPart(f"page {i}")]))
        history.append(ModelResponse(parts=[TextPart(f"Page {i} is done. " * 40)]))
    compacted = ModelResponse(
        parts=[CompactionPart(summary, provider_name="anthropic"), TextPart("Next: the form")]
    )
    history += [compacted, ModelRequest(parts=[UserPromptPart("Add the contact form")])]
    reducer = MessageReducer(config=ReducerConfig(max_tokens=100_000, preserve_first=False))
    result = reducer.reduce(list(history))
    assert result.surviving == history[8:]
    assert result.pruned_by_reason == {"compacted": 8}
    assert result.surviving[0] is compacted  # kept as PydanticAI returned it
    plain = ModelResponse(parts=[TextPart("Next: the form")])
    assert reducer.count_tokens([compacted])[0] > reducer.count_tokens([plain])[0]
    # a summary the application wrote (a request's part, no provider) is no boundary
    written = ModelRequest(parts=[CompactionPart(summary)])
    again = reducer.reduce([*history[:8], written, history[-1]])
    assert "compacted" not in again.pruned_by_reason
