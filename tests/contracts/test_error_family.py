"""One error family (issue 25 item 7): every public entry point given junk raises a
``ReducerError`` that is also the matching built-in, and no error text quotes a message."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import RemoveMessage
from langgraph.store.memory import InMemoryStore

import agentstate_reducer
from agentstate_reducer import (
    Background,
    ClearToolResults,
    MessageReducer,
    Offload,
    ReducerConfig,
    ReducerError,
    UpdateError,
    agent_config,
    check_history,
    summarize_with,
    trim_messages,
    validate_history,
)
from agentstate_reducer.langgraph import (
    ReducingMiddleware,
    fetch_original,
    recall_tool,
    reducing_add_messages,
    store_hook,
)
from agentstate_reducer.openai_agents import ReducingSession
from agentstate_reducer.pydantic_ai import ahistory_processor, history_processor

SECRET = "the user's card number 4111-1111"
MESSAGE = {"role": "user", "content": SECRET}


class Session:
    """The Agents SDK's Session protocol, in memory."""

    session_id = "s1"

    def __init__(self) -> None:
        self.items: list[Any] = []

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return list(self.items)

    async def add_items(self, items: list[Any]) -> None:
        self.items += items

    async def pop_item(self) -> Any:
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        self.items.clear()


def reducer() -> MessageReducer:
    return MessageReducer(min_messages=1, max_messages=2)


JUNK: dict[str, Callable[[], Any]] = {
    "validate_history provider": lambda: validate_history([], provider="nope"),
    "check_history provider": lambda: check_history([], provider="nope"),
    "validate_history junk": lambda: validate_history([MESSAGE, 5]),
    "MessageReducer config={}": lambda: MessageReducer(config={}),  # type: ignore[arg-type]
    "MessageReducer min_messages": lambda: MessageReducer(min_messages="x"),  # type: ignore[arg-type]
    "count_tokens None": lambda: reducer().count_tokens(None),  # type: ignore[arg-type]
    "count_tokens a dict": lambda: reducer().count_tokens(MESSAGE),  # type: ignore[arg-type]
    "count_tokens token mode": lambda: MessageReducer(
        config=ReducerConfig(max_tokens=10)
    ).count_tokens(None),  # type: ignore[arg-type]
    "plan None": lambda: reducer().plan(None),  # type: ignore[arg-type]
    "plan a dict": lambda: reducer().plan(MESSAGE),  # type: ignore[arg-type]
    "reduce an int": lambda: reducer().reduce(5),
    "reduce a junk message": lambda: reducer().reduce([MESSAGE, 5]),
    "trim_messages a dict": lambda: trim_messages(MESSAGE, max_tokens=5, token_counter=len),
    "trim_messages text_splitter": lambda: trim_messages(
        [MESSAGE], max_tokens=5, token_counter=len, allow_partial=True, text_splitter=5
    ),
    "trim_messages start_on": lambda: trim_messages(
        [MESSAGE], max_tokens=5, token_counter=len, start_on=5
    ),
    "summarize_with model": lambda: summarize_with(5),
    "summarize_with max_tokens": lambda: summarize_with(str, max_tokens=0),
    "Summarizer.prompt nothing to fold": lambda: summarize_with(str).prompt([]),
    "Background fn": lambda: Background(42),  # type: ignore[arg-type]
    "Background workers": lambda: Background(print, workers=0),
    "ClearToolResults keep": lambda: ClearToolResults(keep=-1),
    "Offload above": lambda: Offload(above=0),
    "agent_config provider": lambda: agent_config(provider="nope"),
    "ReducerConfig max_tokens": lambda: ReducerConfig(max_tokens="many"),
    "history_processor reducer": lambda: history_processor(5),  # type: ignore[arg-type]
    "history_processor junk": lambda: history_processor(reducer())(None, 5),  # type: ignore[arg-type]
    "ahistory_processor junk": lambda: asyncio.run(
        ahistory_processor(reducer())(None, 5)  # type: ignore[arg-type]
    ),
    "ReducingSession session": lambda: ReducingSession(5, reducer()),
    "ReducingSession.add_items None": lambda: asyncio.run(
        ReducingSession(Session(), reducer()).add_items(None)  # type: ignore[arg-type]
    ),
    "ReducingSession.add_items a dict": lambda: asyncio.run(
        ReducingSession(Session(), reducer()).add_items(MESSAGE)  # type: ignore[arg-type]
    ),
    "reducing_add_messages reducer": lambda: reducing_add_messages(5),  # type: ignore[arg-type]
    "reducing_add_messages format": lambda: reducing_add_messages(format="invalid"),
    # add_messages' own refusal, in its words, inside the family.
    "reducing_add_messages remove unknown id": lambda: reducing_add_messages(reducer())(
        [MESSAGE], [RemoveMessage(id="nope")]
    ),
    "as_langgraph_reducer remove unknown id": lambda: reducer().as_langgraph_reducer()(
        [MESSAGE], [RemoveMessage(id="nope")]
    ),
    "ReducingMiddleware reducer": lambda: ReducingMiddleware(5),  # type: ignore[arg-type]
    "store_hook store": lambda: store_hook(5),  # type: ignore[arg-type]
    "fetch_original handle": lambda: fetch_original(InMemoryStore(), 5),  # type: ignore[arg-type]
    "recall_tool page_chars": lambda: recall_tool(InMemoryStore(), page_chars=0),
}


@pytest.mark.parametrize("name", sorted(JUNK))
def test_junk_raises_a_reducer_error_that_quotes_no_message(name: str) -> None:
    with pytest.raises(Exception) as caught:
        JUNK[name]()
    error = caught.value
    assert isinstance(error, ReducerError), f"{name}: {type(error).__name__}: {error}"
    assert isinstance(error, (TypeError, ValueError, RuntimeError))
    assert SECRET not in str(error)


def test_add_messages_refusals_keep_langgraph_words() -> None:
    # LangGraph's tests match these words (tests/peers/test_langgraph_add_messages.py).
    merge = reducing_add_messages(reducer())
    with pytest.raises(UpdateError, match="Attempting to delete a message with an ID that"):
        merge([MESSAGE], [RemoveMessage(id="nope")])
    with pytest.raises(ValueError, match="Unrecognized format="):
        merge([], [], format="invalid")


#: A lock's misuse (a bug in this package, never an input). The outbox's own junk
#: table is in tests/unit/outbox/test_outbox.py.
STORAGE = {"_locks.py"}
PLAIN = {"TypeError", "ValueError", "KeyError"}


def test_no_entry_point_raises_a_plain_built_in() -> None:
    """Every ``raise TypeError(...)`` / ``ValueError(...)`` in src is one of ours."""
    root = Path(agentstate_reducer.__file__).parent
    plain = []
    for path in sorted(root.rglob("*.py")):
        if STORAGE & set(path.relative_to(root).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                if isinstance(func, ast.Name) and func.id in PLAIN:
                    plain.append(f"{path.relative_to(root)}:{node.lineno} {func.id}")
    assert not plain, plain
