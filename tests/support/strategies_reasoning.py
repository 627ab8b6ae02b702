"""Hypothesis strategies for valid histories of reasoning models, in the chat shapes.

* Anthropic extended thinking: every assistant message opens with a signed ``thinking``
  block (sometimes a ``redacted_thinking`` block), as Claude returns it with thinking on;
  rendered as Anthropic dicts or LangChain messages carrying the blocks.
* DeepSeek's thinking mode: every assistant message carries ``reasoning_content``, as an
  OpenAI-compatible dict field or in a LangChain message's ``additional_kwargs``.

Each drawn history passes ``validate_history`` for its provider (``"anthropic"`` or
``"openai"``), built on the event scripts of ``strategies.py``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from strategies import render, scripts

__all__ = ("deepseek_histories", "thinking_histories")


def _thinking(n: int, redacted: bool) -> dict[str, Any]:
    if redacted:
        return {"type": "redacted_thinking", "data": f"EmwKAhgB{n:04d}" + "Q" * 40}
    return {"type": "thinking", "thinking": f"step {n}: check the lookup tool",
            "signature": f"ErUBCkYIBxgCKkB{n:04d}"}


def _add_thinking(history: list[Any], redacted: list[bool]) -> list[Any]:
    from langchain_core.messages import AIMessage

    out: list[Any] = []
    n = 0
    for message in history:
        if isinstance(message, AIMessage):
            blocks = message.content if isinstance(message.content, list) else (
                [{"type": "text", "text": message.content}] if message.content else []
            )
            block = _thinking(n, redacted[n % len(redacted)])
            message = message.model_copy(update={"content": [block, *blocks]})
            n += 1
        elif isinstance(message, dict) and message.get("role") == "assistant":
            content = message["content"]
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            message = {**message, "content": [_thinking(n, redacted[n % len(redacted)]), *blocks]}
            n += 1
        out.append(message)
    return out


def _add_reasoning_content(history: list[Any]) -> list[Any]:
    from langchain_core.messages import AIMessage

    out: list[Any] = []
    for n, message in enumerate(history):
        text = f"thought {n}: which tool answers this"
        if isinstance(message, AIMessage):
            extra = {**message.additional_kwargs, "reasoning_content": text}
            message = message.model_copy(update={"additional_kwargs": extra})
        elif isinstance(message, dict) and message.get("role") == "assistant":
            message = {**message, "reasoning_content": text}
        out.append(message)
    return out


def thinking_histories() -> st.SearchStrategy[list[Any]]:
    """Valid Anthropic histories with extended thinking (see the module docstring)."""
    return st.builds(
        lambda script, shape, redacted: _add_thinking(render(script, shape), redacted),
        scripts(),
        st.sampled_from(["anthropic", "langchain_blocks"]),
        st.lists(st.integers(0, 4).map(lambda k: k == 0), min_size=1, max_size=4),
    )


def deepseek_histories() -> st.SearchStrategy[list[Any]]:
    """Valid DeepSeek (OpenAI-compatible) histories in thinking mode."""
    return st.builds(
        lambda script, shape: _add_reasoning_content(render(script, shape)),
        scripts(openai_only=True),
        st.sampled_from(["openai", "langchain"]),
    )
