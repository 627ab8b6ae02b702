"""reduce() and areduce() are two drivers of one core: given the same history, config,
summary replies and hook outcomes they return equal results, call the hooks with equal
batches, log the same records and raise the same errors (differential, hypothesis)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import pytest
from histories import histories
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from agentstate_reducer import (
    ClearToolResults,
    MessageFormatError,
    MessageReducer,
    Offload,
    OutboxError,
    ReducerConfig,
    ReducerResult,
    UnstorableError,
    summarize_with,
)
from agentstate_reducer.hooks import NOT_DELIVERED

#: What a summary reply may be: text, a chat model's message, nothing, junk.
REPLIES: dict[str, Callable[[list[Any]], Any]] = {
    "text": lambda p: f"{len(p)} messages: facts",
    "message": lambda p: AIMessage(content=[{"type": "text", "text": f"{len(p)} facts"}]),
    "none": lambda p: None,
    # A reply that cannot be read: reduce() raised MessageFormatError, areduce() failed
    # the summary (issue 25 item 8).
    "unreadable": lambda p: {
        "role": "assistant", "content": [{"type": "text", "text": "x"}], "tool_calls": 5
    },
    "raises": lambda p: (_ for _ in ()).throw(ConnectionError("model down")),
}

#: What a hook may do with a batch.
OUTCOMES = ("take", "raise", "not delivered", "outbox error", "unstorable")


class Script:
    """Records what the core asked for, whichever driver ran it."""

    def __init__(self, reply: str, outcomes: list[str], is_async: bool) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.reply = reply
        self.outcomes = outcomes
        self.is_async = is_async

    def summarize(self) -> Callable[[list[Any]], Any]:
        def summarize(pruned: list[Any]) -> Any:
            self.log.append(("summary", list(pruned)))
            return REPLIES[self.reply](pruned)

        async def asummarize(pruned: list[Any]) -> Any:
            await asyncio.sleep(0)
            return summarize(pruned)

        return asummarize if self.is_async else summarize

    def hook(self, k: int) -> Callable[[list[Any], Any], Any]:
        outcome = self.outcomes[k]

        def hook(pruned: list[Any], namespace: Any) -> Any:
            self.log.append(("hook", k, list(pruned), namespace))
            if outcome == "raise":
                raise RuntimeError("hook down")
            if outcome == "not delivered":
                return NOT_DELIVERED
            if outcome == "outbox error":
                raise OutboxError("storage down")
            if outcome == "unstorable":
                error = UnstorableError("message at index 0, field ['content']: no JSON")
                error.index, error.detail = 0, "field ['content']: no JSON"
                raise error
            return None

        async def ahook(pruned: list[Any], namespace: Any) -> Any:
            await asyncio.sleep(0)
            return hook(pruned, namespace)

        # Half the hooks of the async run are plain functions: areduce() calls those too.
        return ahook if self.is_async and k % 2 == 0 else hook


def run(
    options: dict[str, Any],
    steps: list[tuple[list[Any], list[Any] | None, Any]],
    reply: str,
    outcomes: list[str],
    *,
    is_async: bool,
) -> list[Any]:
    """Everything observable of a reducer driven through ``steps``."""
    script = Script(reply, outcomes, is_async)
    settings_ = dict(options)
    if settings_.pop("summary", False):
        settings_["summarize_fn"] = script.summarize()
    hooks = [script.hook(k) for k in range(len(outcomes))]
    reducer = MessageReducer(config=ReducerConfig(on_prune=hooks, **settings_))
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("agentstate_reducer")
    logger.addHandler(handler)
    seen: list[Any] = []
    try:
        for existing, new, namespace in steps:
            try:
                if is_async:
                    result = asyncio.run(reducer.areduce(existing, new, namespace))
                else:
                    result = reducer.reduce(existing, new, namespace)
                # ContextEdit compares by identity: compare what it says and hands over.
                edits = [(repr(e), e.original) for e in result.edited]
                seen.append((dataclasses.replace(result, edited=()), edits))
            except Exception as exc:
                seen.append((type(exc), str(exc), getattr(exc, "index", None)))
    finally:
        logger.removeHandler(handler)
    logged = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in records]
    return [seen, script.log, logged]


CONFIGS: list[dict[str, Any]] = [
    {"min_messages": 2, "max_messages": 5},
    {"min_messages": 3, "max_messages": 6, "summary": True, "inject_summary": True},
    {"min_messages": 3, "max_messages": 6, "summary": True},
    {"min_messages": 1, "max_messages": 4, "dedupe_on_prune": False, "preserve_first": False},
    {"max_tokens": 120, "target_tokens": 80, "token_counter": "approximate"},
    {
        "max_tokens": 150,
        "target_tokens": 100,
        "token_counter": "approximate",
        "summary": True,
        "inject_summary": True,
    },
    {
        "min_messages": 2,
        "max_messages": 8,
        "context_edits": [ClearToolResults(keep=0, trigger_messages=2)],
    },
    {
        "max_tokens": 200,
        "token_counter": "approximate",
        "context_edits": [Offload(above=4, head=1, tail=1)],
        "repair_dangling_calls": True,
        "start_on": "human",
    },
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    histories(max_turns=8),
    st.sampled_from(range(len(CONFIGS))),
    st.sampled_from(sorted(REPLIES)),
    st.lists(st.sampled_from(OUTCOMES), max_size=3),
    st.integers(0, 100),
)
def test_reduce_and_areduce_agree(
    history: list[Any], config: int, reply: str, outcomes: list[str], cut: int
) -> None:
    at = cut * len(history) // 100
    steps = [
        (history, None, "ns"),
        (history, None, "ns"),  # a replay: the ledger dedupes
        (history[:at], history[at:], ("ns", 2)),
        (history[:at], history[at:], "ns"),
    ]
    options = CONFIGS[config]
    sync = run(options, steps, reply, outcomes, is_async=False)
    both = run(options, steps, reply, outcomes, is_async=True)
    assert sync == both


@pytest.mark.parametrize("reply", sorted(REPLIES))
def test_a_summary_reply_is_one_outcome_in_both(reply: str) -> None:
    """The same reply is a summary, or a failed summary, in both drivers; never an error."""
    history = [{"role": "user", "content": f"q{i}", "id": f"m{i}"} for i in range(10)]
    options = {"min_messages": 3, "max_messages": 6, "summary": True, "inject_summary": True}
    steps: list[tuple[list[Any], list[Any] | None, Any]] = [(history, None, None)]
    sync = run(options, steps, reply, [], is_async=False)
    both = run(options, steps, reply, [], is_async=True)
    assert sync == both
    ((result, _),) = sync[0]
    assert isinstance(result, ReducerResult), result  # no error escaped
    assert result.summary_failed == (reply in ("none", "unreadable", "raises"))


def test_an_unreadable_summary_reply_fails_closed_in_reduce() -> None:
    """Issue 25 item 8: reduce() raised MessageFormatError where areduce() failed closed."""
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            summarize_fn=REPLIES["unreadable"],
            inject_summary=True,
        )
    )
    history = [{"role": "user", "content": f"q{i}", "id": f"m{i}"} for i in range(7)]
    try:
        result = reducer.reduce(history)
    except MessageFormatError as exc:  # pragma: no cover - the bug
        pytest.fail(f"reduce() raised {exc!r}")
    assert result.summary_failed and result.pruned == []


def test_summarize_with_agrees_across_drivers() -> None:
    """The built-in summariser: __call__ under reduce(), acall under areduce()."""

    class Model:
        def __init__(self) -> None:
            self.prompts: list[Any] = []

        def invoke(self, request: Any) -> AIMessage:
            self.prompts.append(request)
            words = 300 if len(self.prompts) == 1 else 5
            return AIMessage(content="## Facts\n- " + "long " * words)

    history = [{"role": "user", "content": f"q{i}", "id": f"m{i}"} for i in range(12)]
    out = []
    for is_async in (False, True):
        model = Model()
        reducer = MessageReducer(
            config=ReducerConfig(
                min_messages=3,
                max_messages=6,
                summarize_fn=summarize_with(model, max_tokens=50),
                inject_summary=True,
            )
        )
        result = asyncio.run(reducer.areduce(history)) if is_async else reducer.reduce(history)
        out.append((result, model.prompts))
    assert out[0] == out[1]
    assert len(out[0][1]) == 2  # too long: asked once more to shorten it
