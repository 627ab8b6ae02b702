"""What the adapted OpenAI Agents SDK session tests share (tests/peers/test_agents_sdk_*.py).

``SQLiteSession(...)`` here builds the SDK's ``SQLiteSession`` and wraps it in a
``ReducingSession`` whose reducer never prunes (a window of a million items), so the copied
tests drive the wrapper exactly as they drive the SDK's own session.
``get_text_message`` and ``get_function_tool_call`` are adapted from the SDK's
``tests/test_responses.py`` (openai-agents 0.24.0): the same items, written anew.
"""

from __future__ import annotations

from typing import Any

from agents import SQLiteSession as SDKSQLiteSession
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputText,
)

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.openai_agents import ReducingSession

#: A window no test reaches: the reducer never prunes, the wrapper only adds.
NEVER = 1_000_000


def never_prunes() -> MessageReducer:
    """A reducer with nothing to prune in any of the SDK's tests."""
    return MessageReducer(config=ReducerConfig(min_messages=NEVER - 1, max_messages=NEVER))


def reducing(session: Any) -> ReducingSession:
    """``session`` behind a ``ReducingSession`` that never prunes."""
    return ReducingSession(session, never_prunes())


def SQLiteSession(*args: Any, **kwargs: Any) -> ReducingSession:
    """The SDK's ``SQLiteSession(...)``, wrapped."""
    return reducing(SDKSQLiteSession(*args, **kwargs))


def without_reducer_reads(names: list[str]) -> list[str]:
    """A call log of the inner session without the read each ``add_items`` makes first.

    ``ReducingSession.add_items`` reads the stored items (one ``get_items``) to reduce
    them with the new ones; the SDK's tests count the calls the runner makes.
    """
    out: list[str] = []
    for i, name in enumerate(names):
        if name == "get_items" and i + 1 < len(names) and names[i + 1] == "add_items":
            continue
        out.append(name)
    return out


def get_text_message(content: str) -> ResponseOutputItem:
    return ResponseOutputMessage(
        id="1",
        type="message",
        role="assistant",
        content=[ResponseOutputText(text=content, type="output_text", annotations=[], logprobs=[])],
        status="completed",
    )


def get_function_tool_call(
    name: str, arguments: str | None = None, call_id: str | None = None
) -> ResponseOutputItem:
    return ResponseFunctionToolCall(
        id="1", call_id=call_id or "2", type="function_call", name=name, arguments=arguments or ""
    )
