"""Reasoning stays with its turn: Anthropic thinking, DeepSeek reasoning_content.

The reducer never splits a message, so the rules are about what may cut or rewrite one:
``trim_messages``' partial messages never cut a message carrying thinking blocks, and
context editing never offers a reasoning part to rewrite. The validator's thinking rules
quote the providers; the guarantee (hypothesis) covers histories of reasoning models.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from strategies_reasoning import deepseek_histories, thinking_histories

from agentstate_reducer import (
    MessageReducer,
    ReducerConfig,
    agent_config,
    trim_messages,
    validate_history,
)
from agentstate_reducer.read import (
    editable_parts,
    message_parts,
    reasoning_parts,
    with_parts,
)
from agentstate_reducer.tokens import approximate_token_count

THINK = {"type": "thinking", "thinking": "the user wants the weather", "signature": "ErUBsig"}


def _ask(text: str = "weather in paris?") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _use(think: dict[str, Any] | None = THINK, call: str = "toolu_1") -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [] if think is None else [think]
    blocks.append({"type": "tool_use", "id": call, "name": "weather", "input": {"city": "paris"}})
    return {"role": "assistant", "content": blocks}


def _result(call: str = "toolu_1") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call,
                                         "content": "sunny"}]}


def _rules(history: list[Any], provider: str = "anthropic") -> list[tuple[int, str]]:
    return [(p.index, p.rule) for p in validate_history(history, provider=provider)]


# -- the reader --------------------------------------------------------------------------


def test_reasoning_parts_of_every_shape() -> None:
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgB"}
    assert [(p.kind, p.block, p.signed) for p in reasoning_parts(_use())] == [
        ("thinking", 0, True)
    ]
    unsigned = _use({"type": "thinking", "thinking": "x"})
    assert [p.signed for p in reasoning_parts(unsigned)] == [False]
    assert [p.kind for p in reasoning_parts({"role": "assistant", "content": [redacted]})] == [
        "redacted_thinking"
    ]
    deepseek = {"role": "assistant", "content": "", "reasoning_content": "hmm", "tool_calls": []}
    assert [p.kind for p in reasoning_parts(deepseek)] == ["reasoning_content"]
    langchain = AIMessage(content="", additional_kwargs={"reasoning_content": "hmm"})
    assert [p.kind for p in reasoning_parts(langchain)] == ["reasoning_content"]
    v1 = AIMessage(content=[{"type": "reasoning", "reasoning": "hmm"}, {"type": "text",
                                                                        "text": "hi"}])
    assert [p.kind for p in reasoning_parts(v1)] == ["reasoning"]
    assert reasoning_parts({"role": "user", "content": "hi"}) == ()


def test_tokens_count_the_reasoning_a_provider_bills() -> None:
    short = {"type": "thinking", "thinking": "x", "signature": "s"}
    long = {"type": "thinking", "thinking": "think about it " * 50, "signature": "s"}
    assert approximate_token_count(_use(long)) > approximate_token_count(_use(short)) + 50
    redacted = {"type": "redacted_thinking", "data": "Q" * 400}
    assert "Q" * 400 in message_parts({"role": "assistant", "content": [redacted]}).texts
    plain = {"role": "assistant", "content": "answer"}
    deepseek = {**plain, "reasoning_content": "let me think about this " * 20}
    assert approximate_token_count(deepseek) > approximate_token_count(plain) + 50
    lc = AIMessage(content="answer", additional_kwargs={"reasoning_content": "think " * 40})
    assert approximate_token_count(lc) > approximate_token_count(AIMessage(content="answer"))


# -- nothing cuts or rewrites reasoning ---------------------------------------------------------


def test_trim_never_cuts_a_message_carrying_thinking() -> None:
    answer = {"role": "assistant", "content": [THINK, {"type": "text", "text": "line\n" * 40}]}
    history = [_ask(), answer, _ask("more?")]
    for budget in range(0, 400, 7):
        for strategy in ("first", "last"):
            start: dict[str, Any] = {"start_on": "human"} if strategy == "last" else {}
            kept = trim_messages(history, max_tokens=budget, token_counter="approximate",
                                 allow_partial=True, strategy=strategy,  # type: ignore[arg-type]
                                 **start)
            assert all(any(m is x for x in history) for m in kept), (budget, strategy)
            assert validate_history(kept, provider="anthropic") == []


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(history=st.one_of(thinking_histories(), deepseek_histories()))
def test_context_editing_never_touches_reasoning(history: list[Any]) -> None:
    for i, message in enumerate(history):
        before = copy.deepcopy(reasoning_parts(message, i))
        parts = editable_parts(message, i)
        for part in parts:
            assert part.path[0] != "reasoning_content"
            if part.path[0] == "content" and len(part.path) > 1:
                block = message.content[part.path[1]] if isinstance(message, AIMessage) else (
                    message["content"][part.path[1]] if isinstance(message, dict) else None
                )
                assert not (isinstance(block, dict) and "thinking" in str(block.get("type")))
        edited = with_parts(message, {p.path: "[cleared]" for p in parts})
        assert reasoning_parts(edited, i) == before


# -- the validator -----------------------------------------------------------------------------


def test_thinking_rules_quote_anthropic() -> None:
    assert _rules([_ask(), _use(), _result()]) == []
    found = validate_history([_ask(), _use({"type": "thinking", "thinking": "x"}), _result()],
                             provider="anthropic")
    assert [(p.index, p.rule) for p in found] == [(1, "unsigned-thinking")]
    assert "messages.1.content.0.thinking.signature: Field required" in found[0].detail
    text_first = {"role": "assistant", "content": [{"type": "text", "text": "let me see"},
                                                   THINK, _use(None)["content"][0]]}
    found = validate_history([_ask(), text_first, _result()], provider="anthropic")
    assert [p.rule for p in found] == ["thinking-first", "thinking-turn"]
    assert "the first block must be thinking or redacted_thinking" in found[0].detail
    thinking_last = {"role": "assistant", "content": [THINK]}
    assert _rules([_ask(), thinking_last]) == [(1, "thinking-last")]
    # Thinking is on, and the tool round in progress lost its thinking block.
    found = validate_history(
        [_ask(), {"role": "assistant", "content": [THINK, {"type": "text", "text": "hi"}]},
         _ask("and rome?"), _use(None), _result()],
        provider="anthropic",
    )
    assert [(p.index, p.rule) for p in found] == [(3, "thinking-turn")]
    assert "a final `assistant` message must start with a thinking block" in found[0].detail
    # Without thinking anywhere, nothing is asked of the turn.
    assert _rules([_ask(), _use(None), _result()]) == []


def test_reasoning_content_rule_quotes_deepseek() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "reasoning_content": "think", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "", "tool_calls": [{**call, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "r"},
    ]
    found = validate_history(history, provider="openai")
    assert [(p.index, p.rule) for p in found] == [(4, "missing-reasoning")]
    assert "Missing `reasoning_content` field in the assistant message" in found[0].detail
    history[4]["reasoning_content"] = "more thought"
    assert _rules(history, "openai") == []


# -- the guarantee ------------------------------------------------------------------------------


@st.composite
def _configs(draw: st.DrawFn) -> ReducerConfig:
    options: dict[str, Any] = {"preserve_first": draw(st.booleans())}
    if draw(st.booleans()):
        most = draw(st.integers(1, 300))
        options.update(max_tokens=most, target_tokens=draw(st.integers(1, most)),
                       token_counter="approximate")
    else:
        least = draw(st.integers(0, 8))
        options.update(min_messages=least, max_messages=draw(st.integers(least, least + 8)))
    return agent_config(**options)


CASES = list(itertools.product(("anthropic", "deepseek"), ("reduce", "trim")))


@pytest.mark.slow
@pytest.mark.parametrize(("family", "how"), CASES)
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_a_valid_reasoning_history_stays_valid(family: str, how: str, data: Any) -> None:
    provider = "anthropic" if family == "anthropic" else "openai"
    history = data.draw(thinking_histories() if family == "anthropic" else deepseek_histories())
    assert validate_history(history, provider=provider) == []
    if how == "reduce":
        kept = MessageReducer(config=data.draw(_configs())).reduce(history).surviving
    else:
        strategy = data.draw(st.sampled_from(["first", "last"]))
        options: dict[str, Any] = {"start_on": "human"} if strategy == "last" else {}
        kept = trim_messages(history, max_tokens=data.draw(st.integers(0, 300)),
                             token_counter="approximate", strategy=strategy,
                             allow_partial=data.draw(st.booleans()), keep_tool_pairs=True,
                             **options)
    assert validate_history(kept, provider=provider) == []
    # Every kept message carries the reasoning it had.
    originals = {id(m): m for m in history}
    for message in kept:
        if id(message) in originals:
            continue
        assert reasoning_parts(message) == ()  # only a partial copy is new, and never thinking


def test_the_latest_turn_keeps_its_reasoning_through_a_reduce() -> None:
    history: list[Any] = [HumanMessage("q", id="h")]
    for k in range(6):
        history.append(AIMessage(content=[dict(THINK, signature=f"s{k}")],
                                 tool_calls=[{"id": f"c{k}", "name": "f", "args": {}}],
                                 id=f"a{k}"))
        history.append(ToolMessage("r", tool_call_id=f"c{k}", id=f"t{k}"))
    config = ReducerConfig(max_tokens=60, target_tokens=40, token_counter="approximate",
                           start_on="human")
    kept = MessageReducer(config=config).reduce(history).surviving
    assert kept[-2] is history[-2] and reasoning_parts(kept[-2])
    assert validate_history(kept, provider="anthropic") == []
