"""What a custom ``summarize_fn`` returns: text is a summary; anything else, blank text, or
a block with no room fails closed; an oversized summary is cut to its share of the budget,
and a state over ``max_tokens`` always says so (issue 25 item 2)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from agentstate_reducer import MessageReducer, ReducerConfig


def history(n: int, words: int = 3) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i} " * words, "id": f"m{i}"}
        for i in range(n)
    ]


JUNK: dict[str, Any] = {
    "a dict": {"summary": "facts"},
    "an int": 5,
    "a list": ["facts"],
    "None": None,
    "empty text": "",
    "blank text": " \n\t ",
    "a blank message": AIMessage(content="   "),
}


def reduce_with(reply: Any, *, inject: bool, is_async: bool = False, **options: Any) -> Any:
    settings_: dict[str, Any] = {"min_messages": 2, "max_messages": 4}
    settings_.update(options)
    reducer = MessageReducer(
        config=ReducerConfig(summarize_fn=lambda p: reply, inject_summary=inject, **settings_)
    )
    if is_async:
        return asyncio.run(reducer.areduce(history(8)))
    return reducer.reduce(history(8))


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("what", sorted(JUNK))
def test_a_reply_that_is_no_text_is_a_failed_summary(
    what: str, is_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="agentstate_reducer"):
        result = reduce_with(JUNK[what], inject=True, is_async=is_async)
    assert result.summary_failed and result.summary is None
    assert result.pruned == [] and len(result.surviving) == 8  # nothing left unsummarised
    said = [r.getMessage() for r in caplog.records if "summarize_fn returned" in r.getMessage()]
    if JUNK[what] is not None:
        assert len(said) == 1
        assert "facts" not in said[0]  # the type, never the content


@pytest.mark.parametrize("what", sorted(JUNK))
def test_without_injection_a_failed_summary_still_prunes(what: str) -> None:
    result = reduce_with(JUNK[what], inject=False)
    assert result.summary_failed and result.summary is None
    assert len(result.pruned) == 5


def test_text_and_messages_of_text_are_summaries() -> None:
    for reply in ("facts", AIMessage(content="facts"), {"role": "assistant", "content": "facts"}):
        result = reduce_with(reply, inject=True)
        assert result.summary == "facts" and not result.summary_failed


def test_a_huge_summary_is_cut_to_its_share_of_max_tokens(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 25: a 5 MB reply left a million tokens in a state of max_tokens=600."""
    reply = "\n".join(f"- fact {i}: " + "x" * 40 for i in range(100_000))
    reducer = MessageReducer(
        config=ReducerConfig(
            max_tokens=600,
            target_tokens=400,
            token_counter="approximate",
            summarize_fn=lambda p: reply,
            inject_summary=True,
        )
    )
    with caplog.at_level(logging.WARNING, logger="agentstate_reducer"):
        result = reducer.reduce(history(60, words=10))
    assert result.summary is not None and result.summary_failed is False
    assert reply.startswith(result.summary) and result.summary.endswith("x")  # at a line
    assert sum(reducer.count_tokens(result.surviving)) <= 600
    assert not result.over_budget
    assert any("cut at a line break" in r.getMessage() for r in caplog.records)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 4000),
    st.integers(50, 800),
    st.integers(0, 300),
    st.integers(10, 80),
    st.booleans(),
)
def test_a_state_over_max_tokens_says_so(
    lines: int, max_tokens: int, slack: int, n: int, one_line: bool
) -> None:
    reply = ("y" * 7 * lines) if one_line else "\n".join(f"fact {i}" for i in range(lines))
    reducer = MessageReducer(
        config=ReducerConfig(
            max_tokens=max_tokens,
            target_tokens=max(1, max_tokens - slack),
            token_counter="approximate",
            summarize_fn=lambda p: reply,
            inject_summary=True,
        )
    )
    result = reducer.reduce(history(n, words=6))
    if sum(reducer.count_tokens(result.surviving)) > max_tokens:
        assert result.over_budget
    if result.summary is not None:
        assert reply.startswith(result.summary.rstrip())
