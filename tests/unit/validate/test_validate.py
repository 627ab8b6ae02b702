"""validate_history / check_history: each rule, on every message shape, and its fixes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)
from strategies import SHAPES, Calls, Results, Say, Script, histories, render

from agentstate_reducer import MessageFormatError, Problem, check_history, validate_history
from agentstate_reducer.read import content_kinds, read_message
from agentstate_reducer.validate import PROVIDERS, RULES, UNKNOWN_ROLE, InvalidHistoryError


def _user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": text}


def _ai(text: str = "ok", *calls: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for c in calls
        ]
    return message


def _tool(call: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call, "content": "done"}


def _found(messages: Any, provider: str) -> list[tuple[int, str]]:
    return [(p.index, p.rule) for p in validate_history(messages, provider=provider)]


BOTH = ("openai", "anthropic")


def _both(pairs: list[tuple[int, str]]) -> dict[str, list[tuple[int, str]]]:
    return {provider: pairs for provider in BOTH}


# (history, {provider: expected (index, rule) pairs})
CASES: dict[str, tuple[list[Any], dict[str, list[tuple[int, str]]]]] = {
    "orphan result": (
        [_user(), _tool("a")],
        _both([(1, "orphan-result")]),
    ),
    "tool message without id": (
        [_user(), _ai("", "a"), _tool("a"), {"role": "tool", "content": "x"}],
        _both([(3, "orphan-result")]),
    ),
    "result after the next user message": (
        [_user(), _ai("", "a"), _user("wait"), _tool("a")],
        _both([(1, "unanswered-call"), (3, "late-result")]),
    ),
    "unanswered call before the next user message": (
        [_user(), _ai("", "a"), _user("and?")],
        _both([(1, "unanswered-call")]),
    ),
    "parallel calls answered in part, mid-history": (
        [_user(), _ai("", "a", "b"), _tool("b"), _ai("done")],
        _both([(1, "split-parallel")]),
    ),
    "parallel calls of the last turn answered in part": (
        [_user(), _ai("", "a", "b"), _tool("a")],
        _both([(1, "split-parallel")]),
    ),
    "duplicate result": (
        [_user(), _ai("", "a"), _tool("a"), _tool("a")],
        _both([(3, "duplicate-result")]),
    ),
    "assistant first": (
        [{"role": "system", "content": "sys"}, _ai("hello"), _user()],
        {"openai": [], "anthropic": [(1, "first-not-user")]},
    ),
    "system message between calls and results": (
        [_user(), _ai("", "a"), {"role": "system", "content": "note"}, _tool("a")],
        {"openai": [(1, "unanswered-call"), (3, "late-result")], "anthropic": []},
    ),
    "text between an assistant's calls and their results": (
        [_user(), _ai("", "a"), _ai("let me check"), _tool("a")],
        {"openai": [(1, "unanswered-call"), (3, "late-result")], "anthropic": []},
    ),
    "function role": (
        [_user(), {"role": "function", "name": "f", "content": "x"}],
        {"openai": [], "anthropic": [(1, "alternation")]},
    ),
    "empty user text": (
        [_user(""), _ai()],
        {"openai": [], "anthropic": [(0, "empty-text")]},
    ),
    "empty assistant text mid-history": (
        [_user(), _ai(""), _user()],
        {"openai": [], "anthropic": [(1, "empty-text")]},
    ),
}

VALID: dict[str, list[Any]] = {
    "empty": [],
    "system only": [{"role": "system", "content": "sys"}],
    "pending calls of the last message": [_user(), _ai("", "a", "b")],
    "parallel results in any order": [_user(), _ai("", "a", "b"), _tool("b"), _tool("a"), _ai()],
    "consecutive user messages": [_user("a"), _user("b"), _ai()],
    "consecutive assistant messages": [_user(), _ai("a"), _ai("b")],
    "mid-conversation system message": [
        _user(),
        _ai(),
        {"role": "system", "content": "note"},
        _user(),
    ],
    "empty final assistant message": [_user(), _ai("")],
    "assistant with calls and no text": [_user(), _ai("", "a"), _tool("a"), _ai("done")],
    "ids reused by a later call": [_user(), _ai("", "a"), _tool("a"), _ai("", "a"), _tool("a")],
}


@pytest.mark.parametrize("provider", BOTH)
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_rule_is_reported_at_its_index(name: str, provider: str) -> None:
    history, expected = CASES[name]
    assert _found(history, provider) == expected[provider]


@pytest.mark.parametrize("provider", BOTH)
@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_histories_have_no_problem(name: str, provider: str) -> None:
    assert validate_history(VALID[name], provider=provider) == []


def test_every_rule_is_exercised() -> None:
    seen = {
        rule for _, expected in CASES.values() for pairs in expected.values() for _, rule in pairs
    }
    seen |= {"results-first"}  # exercised by the block-shape tests below
    # The reasoning rules are exercised in test_reasoning.py.
    seen |= {"unsigned-thinking", "thinking-first", "thinking-last", "thinking-turn"}
    seen |= {"unknown-role"}  # exercised for every provider below
    assert seen == set(RULES["anthropic"])
    assert set(RULES["openai"]) - {"missing-reasoning"} < set(RULES["anthropic"])


# -- every shape ---------------------------------------------------------------------

_SCRIPT = Script(
    [
        Say("system", "be brief"),
        Say("human", "weather in Paris and Rome?"),
        Calls("", ("call_1", "call_2")),
        Results((("call_1", "sunny"), ("call_2", "rain")), (2,), None),
        Say("ai", "Paris sunny, Rome rain."),
        Say("human", "thanks"),
    ]
)


def _result_positions(messages: list[Any]) -> list[int]:
    return [
        i
        for i, m in enumerate(messages)
        if read_message(m).answers and read_message(m).role in ("tool", "human")
    ]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_dropped_result_is_found_in_every_shape(shape: str) -> None:
    history = render(_SCRIPT, shape)
    assert validate_history(history, provider="anthropic") == []
    last = _result_positions(history)[-1]
    broken = history[:last] + history[last + 1 :]
    for provider in BOTH:
        rules = {p.rule for p in validate_history(broken, provider=provider)}
        assert rules & {"split-parallel", "unanswered-call"}, (shape, provider)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_dropped_call_orphans_its_results_in_every_shape(shape: str) -> None:
    history = render(_SCRIPT, shape)
    broken = [m for m in history if not read_message(m).calls]
    for provider in BOTH:
        problems = validate_history(broken, provider=provider)
        assert problems and {p.rule for p in problems} == {"orphan-result"}


@pytest.mark.parametrize("shape", SHAPES)
def test_assistant_first_is_found_in_every_shape(shape: str) -> None:
    history = render(Script([Say("ai", "hello"), Say("human", "hi")]), shape)
    assert _found(history, "anthropic") == [(0, "first-not-user")]
    assert _found(history, "openai") == []


def test_langchain_dict_shapes_are_read() -> None:
    history = [HumanMessage("hi"), AIMessage("", tool_calls=[{"id": "a", "name": "f", "args": {}}])]
    history.append(HumanMessage("more"))
    as_dicts = messages_to_dict(history)
    assert _found(as_dicts, "openai") == [(1, "unanswered-call")]
    assert _found(history, "openai") == [(1, "unanswered-call")]


def test_langchain_messages_of_every_kind() -> None:
    history = [
        SystemMessage("sys"),
        HumanMessage("hi"),
        AIMessage("", tool_calls=[{"id": "a", "name": "f", "args": {}}]),
        ToolMessage("r", tool_call_id="a"),
        ChatMessage(role="critic", content="meh"),
        AIMessage("done"),
    ]
    assert _found(history, "openai") == [(4, "unknown-role")]
    assert _found(history, "anthropic") == [(4, "unknown-role")]


# -- Anthropic content blocks ----------------------------------------------------------


def _use(*ids: str, text: str | None = None) -> dict[str, Any]:
    blocks: list[Any] = [{"type": "text", "text": text}] if text is not None else []
    blocks += [{"type": "tool_use", "id": i, "name": "f", "input": {}} for i in ids]
    return {"role": "assistant", "content": blocks}


def _results(*blocks: Any) -> dict[str, Any]:
    content = [
        {"type": "tool_result", "tool_use_id": b, "content": "x"} if isinstance(b, str) else b
        for b in blocks
    ]
    return {"role": "user", "content": content}


_TEXT = {"type": "text", "text": "and also"}


def test_tool_results_must_come_first_in_the_user_message() -> None:
    history = [_user(), _use("a"), _results(_TEXT, "a")]
    assert _found(history, "anthropic") == [(2, "results-first")]
    # OpenAI receives tool results as separate messages: block order is not its rule.
    assert _found(history, "openai") == []


def test_text_between_results_ends_them() -> None:
    history = [_user(), _use("a", "b"), _results("a", _TEXT, "b")]
    assert _found(history, "anthropic") == [(2, "results-first")]
    history = [_user(), _use("a", "b"), _results("a", _TEXT), _results("b")]
    expected = [(1, "split-parallel"), (3, "late-result")]
    assert _found(history, "anthropic") == expected
    assert _found(history, "openai") == expected
    split = validate_history(history)[0]
    assert "'b' gets no result by message 2" in split.detail


def test_results_split_over_consecutive_user_messages_are_one_turn() -> None:
    history = [_user(), _use("a", "b"), _results("b"), _results("a", _TEXT), _use(text="done")]
    for provider in BOTH:
        assert validate_history(history, provider=provider) == []


def test_empty_text_blocks() -> None:
    blank = {"role": "assistant", "content": [{"type": "text", "text": "  "}]}
    assert _found([_user(), blank, _user()], "anthropic") == [(1, "empty-text")]
    with_call = _use("a", text="")
    assert _found([_user(), with_call, _results("a")], "anthropic") == [(1, "empty-text")]
    empty_list = {"role": "user", "content": []}
    assert _found([empty_list, _ai()], "anthropic") == [(0, "empty-text")]


def test_empty_content_allowed_where_the_api_allows_it() -> None:
    history = [
        HumanMessage("hi"),
        AIMessage("", tool_calls=[{"id": "a", "name": "f", "args": {}}]),
        ToolMessage("", tool_call_id="a"),
        AIMessage(""),
    ]
    assert validate_history(history, provider="anthropic") == []


def test_content_kinds() -> None:
    assert content_kinds({"role": "user", "content": "x"}) == ("text",)
    assert content_kinds({"role": "user", "content": " "}) == ()
    assert content_kinds({"role": "assistant", "content": None}) == ()
    blocks = [
        {"type": "tool_result", "tool_use_id": "a"},
        {"type": "text", "text": ""},
        {"type": "image_url", "image_url": {"url": "u"}},
        {"type": "tool_use", "id": "b"},
        {"type": "thinking", "thinking": "hm"},
        "plain",
    ]
    expected = ("tool_result", "blank", "media", "tool_use", "reasoning", "text")
    assert content_kinds({"role": "user", "content": blocks}) == expected
    assert content_kinds(HumanMessage(content=blocks)) == expected
    assert content_kinds({"type": "human", "data": {"content": "x"}}) == ("text",)


# -- Problem, check_history, errors ----------------------------------------------------


def test_problem_names_index_rule_and_fix() -> None:
    (problem,) = validate_history([_user(), _ai("", "a"), _user()])
    assert problem == Problem(
        1,
        "unanswered-call",
        "tool call 'a' never answered before message 2",
        problem.fix,
    )
    assert "message 1" in problem.fix
    assert str(problem).startswith("message 1: tool call 'a' never answered")
    assert "[unanswered-call]; fix: add a tool result" in str(problem)


def test_check_history_raises_listing_every_problem() -> None:
    history = [_ai("", "a"), _user(), _tool("b")]
    with pytest.raises(ValueError, match="3 problems") as caught:
        check_history(history, provider="anthropic")
    error = caught.value
    assert isinstance(error, InvalidHistoryError)
    assert error.provider == "anthropic"
    assert [(p.index, p.rule) for p in error.problems] == _found(history, "anthropic")
    assert "first-not-user" in str(error) and "unanswered-call" in str(error)


def test_check_history_returns_valid_history_unchanged() -> None:
    history = [_user(), _ai()]
    assert check_history(history, provider="anthropic") is history


NO_ROLE = "message has no role"
CRITIC = "role 'critic' is not a message role"
#: A message with no role or an unknown one, and the problem's detail.
ROLELESS: dict[str, tuple[Any, str]] = {
    "dict without a role": ({"content": "hello"}, NO_ROLE),
    "dict with a role that is not a string": ({"role": 5, "content": "hello"}, NO_ROLE),
    "dict with an empty role": ({"role": "", "content": "hello"}, NO_ROLE),
    "dict with an unknown role": ({"role": "Critic", "content": "hello"}, CRITIC),
    "LangChain dict of an unknown type": (
        {"type": "critic", "data": {"content": "hello"}},
        CRITIC,
    ),
    "ChatMessage with a custom role": (ChatMessage(role="critic", content="hello"), CRITIC),
    "object of an unknown type": (SimpleNamespace(type="critic", content="hello"), CRITIC),
}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", sorted(ROLELESS))
def test_a_missing_or_unknown_role_is_reported_for_every_provider(
    name: str, provider: str
) -> None:
    message, detail = ROLELESS[name]
    history = [_user(), _ai(), _user("again"), _ai(), message, _user(), _ai()]
    problems = validate_history(history, provider=provider)
    assert [(p.index, p.rule, p.detail) for p in problems] == [(4, UNKNOWN_ROLE, detail)]
    assert "'user', 'assistant', 'system' or 'tool'" in problems[0].fix
    assert UNKNOWN_ROLE in RULES[provider]
    with pytest.raises(InvalidHistoryError, match=r"message 4: .*\[unknown-role\]"):
        check_history(history, provider=provider)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_known_role_and_alias_is_accepted(provider: str) -> None:
    aliases = [
        {"role": "system", "content": "s"},
        {"role": "developer", "content": "d"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a"},
        {"role": "human", "content": "h"},
        {"role": "ai", "content": "x"},
        HumanMessage("h"),
        AIMessage("a"),
    ]
    assert UNKNOWN_ROLE not in {p.rule for p in validate_history(aliases, provider=provider)}


def test_bad_provider_is_named() -> None:
    with pytest.raises(ValueError, match=r"provider must be one of 'openai', .*got 'mistral'"):
        validate_history([_user()], provider="mistral")


def test_unreadable_message_names_its_index() -> None:
    with pytest.raises(MessageFormatError, match="index 1"):
        validate_history([_user(), 42])


def test_none_and_single_message() -> None:
    assert validate_history(None) == []
    assert _found(_tool("a"), "openai") == [(0, "orphan-result")]


# -- properties ------------------------------------------------------------------------

_PROPERTY = settings(max_examples=150, deadline=None)


@pytest.mark.slow
@_PROPERTY
@given(histories())
def test_generated_histories_are_valid_for_both_providers(history: list[Any]) -> None:
    for provider in BOTH:
        assert validate_history(history, provider=provider) == []


@pytest.mark.slow
@_PROPERTY
@given(histories(openai_only=True))
def test_generated_openai_histories_are_valid_for_openai(history: list[Any]) -> None:
    assert validate_history(history, provider="openai") == []


@pytest.mark.slow
@_PROPERTY
@given(histories(), st.data())
def test_dropping_a_result_message_is_found(history: list[Any], data: st.DataObject) -> None:
    positions = _result_positions(history)
    if not positions:
        return
    drop = data.draw(st.sampled_from(positions))
    broken = history[:drop] + history[drop + 1 :]
    caller = max(i for i in range(drop) if read_message(broken[i]).calls)
    after = [read_message(m).role for m in broken[caller + 1 :]]
    for provider in BOTH:
        rules = {p.rule for p in validate_history(broken, provider=provider)}
        # The calls are pending (valid) when they are the last turn: for OpenAI nothing may
        # follow them; Anthropic skips system prompts and merges consecutive assistant messages.
        pending = not after if provider == "openai" else set(after) <= {"system", "ai"}
        assert bool(rules & {"unanswered-call", "split-parallel"}) != pending


@pytest.mark.slow
@_PROPERTY
@given(histories(pending=False), st.data())
def test_dropping_an_answered_call_is_found(history: list[Any], data: st.DataObject) -> None:
    callers = [i for i, m in enumerate(history) if read_message(m).calls]
    if not callers:
        return
    drop = data.draw(st.sampled_from(callers))
    broken = history[:drop] + history[drop + 1 :]
    for provider in BOTH:
        problems = validate_history(broken, provider=provider)
        assert (drop, "orphan-result") in [(p.index, p.rule) for p in problems]


@pytest.mark.slow
@_PROPERTY
@given(histories(pending=False), st.data())
def test_a_user_message_inside_the_results_is_found(
    history: list[Any], data: st.DataObject
) -> None:
    callers = [i for i, m in enumerate(history) if read_message(m).calls]
    if not callers:
        return
    at = data.draw(st.sampled_from(callers)) + 1
    broken = [*history[:at], {"role": "user", "content": "interrupt"}, *history[at:]]
    for provider in BOTH:
        rules = [p.rule for p in validate_history(broken, provider=provider)]
        assert "unanswered-call" in rules and "late-result" in rules


@pytest.mark.slow
@_PROPERTY
@given(histories())
def test_losing_the_opening_user_turn_is_found_for_anthropic(history: list[Any]) -> None:
    roles = [read_message(m).role for m in history]
    if "ai" not in roles:
        return
    first_ai = roles.index("ai")
    broken = [m for i, m in enumerate(history) if i >= first_ai or roles[i] == "system"]
    problems = validate_history(broken, provider="anthropic")
    first = next(i for i, m in enumerate(broken) if read_message(m).role != "system")
    assert (first, "first-not-user") in [(p.index, p.rule) for p in problems]
