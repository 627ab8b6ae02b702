"""Providers that refuse requests as real ones do, for the recovery scenarios.

:class:`RefusingModel` puts a provider in front of :class:`~conftest.AgentModel`: it
counts each request as the provider would (its own count, not the reducer's estimate),
refuses one over its window with the error the provider's SDK raises (stating the sizes
as the provider's text does), and, with ``thinking``, signs every reply with a thinking
block and rejects a request carrying a block signed by an account it no longer
accepts. Every request, refused or not, is checked for every provider's rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import httpx
from integration_kit import AgentModel
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from agentstate_reducer.tokens import approximate_text_tokens

_REQUEST = httpx.Request("POST", "/v1/chat/completions")
#: How much more the provider counts than the package's heuristic (its tokenizer differs).
PROVIDER_RATIO = 1.25


def provider_tokens(messages: Sequence[BaseMessage]) -> int:
    """Input tokens as the provider counts ``messages`` (about 1.25x the heuristic)."""
    text = 0
    for m in messages:
        text += approximate_text_tokens(m.text) + 4
        if isinstance(m, AIMessage):
            text += sum(approximate_text_tokens(str(c["args"])) + 6 for c in m.tool_calls)
    return int(text * PROVIDER_RATIO)


def openai_overflow(tokens: int, limit: int) -> Exception:
    """``openai.BadRequestError`` as the Chat Completions API returns it (no network)."""
    import openai

    body = {
        "message": f"This model's maximum context length is {limit} tokens. However, your "
        f"messages resulted in {tokens} tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    response = httpx.Response(400, request=_REQUEST)
    return openai.BadRequestError(f"Error code: 400 - {{'error': {body}}}", response=response,
                                  body=body)


def bare_413(tokens: int, limit: int) -> Exception:
    """A 413 that states no size (a gateway refusing the body)."""
    import openai

    response = httpx.Response(413, request=_REQUEST)
    return openai.APIStatusError("Error code: 413 - request_too_large", response=response,
                                 body={"type": "error", "error": {"type": "request_too_large",
                                       "message": "Request exceeds the maximum size"}})


class AnthropicBadRequest(Exception):
    """What ``anthropic.BadRequestError`` carries (the SDK is not installed here):
    ``status_code`` and the error body of the Messages API."""

    def __init__(self, message: str) -> None:
        self.status_code = 400
        self.body = {"type": "error", "error": {"type": "invalid_request_error",
                                                "message": message}}
        super().__init__(f"Error code: 400 - {self.body}")


def anthropic_signature(index: int) -> Exception:
    return AnthropicBadRequest(f"messages.{index}.content.0: Invalid `signature` in "
                               "`thinking` block")


class RefusingModel(BaseChatModel):
    """A provider in front of an :class:`AgentModel` (see the module docstring)."""

    inner: AgentModel
    #: Input tokens the provider accepts (``None``: any size).
    limit: int | None = None
    #: ``refuse(tokens, limit)``: the error a request over the limit raises.
    refuse: Callable[[int, int], Exception] = openai_overflow
    #: Sign replies with thinking blocks, and check them.
    thinking: bool = False
    #: The account signing replies now; blocks signed by another are rejected from
    #: ``strict_from`` requests on.
    account: str = "a"
    #: Every request's size as the provider counts it, and whether it was refused.
    sizes: list[int] = Field(default_factory=list)
    refused: list[bool] = Field(default_factory=list)
    #: Every error raised, in order.
    errors: list[Exception] = Field(default_factory=list)
    #: Signatures of blocks seen in accepted requests that are not from ``account``.
    replies: int = 0

    @property
    def _llm_type(self) -> str:
        return "refusing-provider"

    def bind_tools(self, tools: Any, **kwargs: Any) -> RefusingModel:  # type: ignore[override]
        return self

    def _refusal(self, messages: list[BaseMessage]) -> Exception | None:
        size = provider_tokens(messages)
        self.sizes.append(size)
        if self.limit is not None and size > self.limit:
            return self.refuse(size, self.limit)
        if self.thinking:
            body = [m for m in messages if not isinstance(m, SystemMessage)]
            for i, m in enumerate(body):
                if isinstance(m, AIMessage) and isinstance(m.content, list):
                    for block in m.content:
                        signed = isinstance(block, dict) and block.get("type") == "thinking"
                        if signed and not block["signature"].startswith(self.account + "-"):
                            return anthropic_signature(i)
        return None

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        error = self._refusal(messages)
        self.refused.append(error is not None)
        if error is not None:
            self.inner.check(messages)  # a refused request is checked too
            self.errors.append(error)
            raise error
        reply = self.inner._generate(messages).generations[0].message
        if self.thinking:
            self.replies += 1
            block = {"type": "thinking", "thinking": f"step {self.replies}",
                     "signature": f"{self.account}-{self.replies}"}
            text = [{"type": "text", "text": reply.text}] if reply.text else []
            reply = reply.model_copy(update={"content": [block, *text]})
        return ChatResult(generations=[ChatGeneration(message=reply)])
