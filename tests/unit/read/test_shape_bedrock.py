"""Bedrock Converse ``messages``: the reader, the validator's Bedrock rules, and the guarantee.

Histories are drawn by :func:`bedrock_histories`: strictly alternating user and assistant
messages; questions (some with an image or a document, some with a ``cachePoint``);
assistant turns of parallel ``toolUse`` blocks, after a ``reasoningContent`` block when
the history thinks; the next user message answering every call with ``toolResult``
blocks in any order (``text`` or ``json`` content, ``status``), sometimes followed by
text; final answers, and pending calls or unanswered results at the end.
"""

from __future__ import annotations

import copy
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstate_reducer import (
    MessageReducer,
    ReducerConfig,
    agent_config,
    cli,
    trim_messages,
    validate_history,
)
from agentstate_reducer.edit import ClearToolResults, Offload
from agentstate_reducer.errors import ConfigError
from agentstate_reducer.read import (
    content_kinds,
    editable_parts,
    message_parts,
    native_provider,
    read_message,
    synthetic_results,
    with_parts,
)
from agentstate_reducer.tokens import resolve_token_counter

_count = resolve_token_counter("approximate")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"text": text}]}


def thinking(text: str = "I should look it up", signature: str = "sig") -> dict[str, Any]:
    return {"reasoningContent": {"reasoningText": {"text": text, "signature": signature}}}


def uses(*specs: tuple[str, str, dict[str, Any]], think: bool = False) -> dict[str, Any]:
    blocks = [{"toolUse": {"toolUseId": i, "name": n, "input": a}} for i, n, a in specs]
    return {"role": "assistant", "content": ([thinking()] if think else []) + blocks}


def results(*specs: tuple[str, str]) -> dict[str, Any]:
    blocks = [
        {"toolResult": {"toolUseId": i, "content": [{"text": t}], "status": "success"}}
        for i, t in specs
    ]
    return {"role": "user", "content": blocks}


def rules(history: list[Any]) -> list[tuple[int, str]]:
    return [(p.index, p.rule) for p in validate_history(history, provider="bedrock")]


# -- the reader ----------------------------------------------------------------------


def test_tool_use_and_results_are_linked_by_tool_use_id() -> None:
    issuer = uses(("t1", "get", {"c": "P"}), ("t2", "get", {"c": "R"}), think=True)
    answer = results(("t2", "rain"), ("t1", "sun"))
    assert read_message(issuer).calls == ("t1", "t2") and read_message(issuer).role == "ai"
    assert read_message(answer).answers == ("t2", "t1") and read_message(answer).role == "human"
    assert native_provider(issuer) == "bedrock" and native_provider(user("hi")) is None


def test_billing_counts_text_reasoning_calls_results_and_media_but_not_signatures() -> None:
    issuer = uses(("t1", "get", {"c": "P"}), think=True)
    parts = message_parts(issuer)
    assert parts.texts == ("I should look it up",)
    assert parts.tool_calls == (("get", '{"c":"P"}'),)
    long = copy.deepcopy(issuer)
    long["content"][0]["reasoningContent"]["reasoningText"]["signature"] = "S" * 4000
    assert _count(long) == _count(issuer)
    redacted = {
        "role": "assistant",
        "content": [{"reasoningContent": {"redactedContent": "Z" * 900}}],
    }
    assert message_parts(redacted).texts == ()
    answer = {
        "role": "user",
        "content": [
            {
                "toolResult": {
                    "toolUseId": "t1",
                    "content": [{"json": {"temp": 21}}, {"text": "ok"}],
                }
            },
            {"image": {"format": "png", "source": {"bytes": "iVBO"}}},
            {"cachePoint": {"type": "default"}},
        ],
    }
    parts = message_parts(answer)
    assert parts.tool_result_ids == ("t1",) and parts.media == 1
    assert "ok" in parts.texts and '{"temp":21}' in parts.texts


def test_content_kinds_of_blocks() -> None:
    message = {
        "role": "assistant",
        "content": [
            thinking(),
            {"text": " "},
            {"text": "ok"},
            {"toolUse": {"toolUseId": "t", "name": "f", "input": {}}},
            {"document": {"format": "pdf", "name": "d", "source": {"bytes": ""}}},
            {"cachePoint": {"type": "default"}},
        ],
    }
    assert content_kinds(message) == ("reasoning", "blank", "text", "tool_use", "media", "other")


def test_written_back_losslessly_with_unknown_keys() -> None:
    message = {
        "role": "user",
        "content": [
            {"toolResult": {"toolUseId": "t1", "content": [{"text": "x" * 50}], "status": "error"}},
            {"text": "and now?"},
        ],
        "zzz": 1,
    }
    parts = editable_parts(message)
    assert [p.path for p in parts] == [
        ("content", 0, "toolResult", "content"),
        ("content", 1, "text"),
    ]
    assert parts[0].value == "x" * 50 and parts[0].call_id == "t1"
    same = with_parts(message, {p.path: p.value for p in parts})
    assert json.dumps(same) == json.dumps(message)
    cleared = with_parts(message, {parts[0].path: "[cleared]"})
    assert cleared["content"][0] == {
        "toolResult": {"toolUseId": "t1", "content": [{"text": "[cleared]"}], "status": "error"}
    }
    assert message["content"][0]["toolResult"]["content"] == [{"text": "x" * 50}]
    issuer = uses(("t1", "f", {"big": "y" * 40}), think=True)
    (args,) = editable_parts(issuer)
    edited = with_parts(issuer, {args.path: {}})
    assert edited["content"][0] == issuer["content"][0]  # the reasoning block untouched
    assert edited["content"][1] == {"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}


def test_context_editing_clears_an_old_result_and_keeps_the_shape() -> None:
    history = [
        user("q"),
        uses(("t1", "lookup", {"q": "a"}), think=True),
        results(("t1", "r " * 400)),
        assistant("a"),
        user("next"),
        uses(("t2", "lookup", {"q": "b"}), think=True),
        results(("t2", "s " * 400)),
        assistant("done"),
    ]
    edits = [ClearToolResults(keep=1, trigger_messages=1)]
    config = agent_config(provider="bedrock", max_messages=100, context_edits=edits)
    surviving = MessageReducer(config=config).reduce(history).surviving
    body = surviving[2]["content"][0]["toolResult"]
    assert list(body) == ["toolUseId", "content", "status"] and body["toolUseId"] == "t1"
    assert body["content"][0]["text"].startswith("[cleared:")
    assert surviving[1] is history[1] and surviving[5:] == history[5:]
    assert rules(surviving) == []


def test_synthetic_results_answer_in_converse_shape() -> None:
    issuer = uses(("t1", "f", {}), ("t2", "g", {}))
    (found,) = synthetic_results(issuer, ("t1", "t2"))
    assert [b["toolResult"]["toolUseId"] for b in found["content"]] == ["t1", "t2"]
    assert all(b["toolResult"]["status"] == "error" for b in found["content"])
    assert rules([user("q"), issuer, found]) == []


def test_dead_calls_are_repaired_in_converse_shape() -> None:
    history = [user("q"), uses(("t1", "f", {})), user("never mind"), assistant("ok")]
    assert (1, "unanswered-call") in rules(history)
    result = MessageReducer(config=agent_config(provider="bedrock")).reduce(history)
    assert result.repaired
    assert [read_message(m).answers for m in result.surviving][2] == ("t1",)


def test_agent_config_for_bedrock_keeps_the_alternation() -> None:
    history = []
    for turn in range(5):
        history += [user(f"q{turn}"), assistant(f"a{turn}")]
    assert agent_config(provider="bedrock").preserve_first is False
    reduced = MessageReducer(config=agent_config(min_messages=2, max_messages=5)).reduce(history)
    assert (1, "alternation") in rules(reduced.surviving)  # the kept first question, then another
    config = agent_config(provider="bedrock", min_messages=2, max_messages=5)
    assert rules(MessageReducer(config=config).reduce(history).surviving) == []
    with pytest.raises(ConfigError, match="provider must be"):
        agent_config(provider="mistral")


# -- the validator ----------------------------------------------------------------------


def test_a_valid_history_has_no_problem() -> None:
    history = [
        {"role": "system", "content": [{"text": "be brief"}]},
        user("q"),
        uses(("t1", "f", {}), ("t2", "f", {}), think=True),
        results(("t2", "b"), ("t1", "a")),
        assistant("a"),
        user("again"),
        uses(("t3", "g", {}), think=True),
    ]
    assert rules(history) == []


def test_first_message_must_be_user_and_roles_alternate() -> None:
    assert rules([assistant("hi"), user("q")]) == [(0, "first-not-user")]
    assert rules([user("a"), user("b"), assistant("c")]) == [(1, "alternation")]
    assert rules([user("a"), assistant("b"), assistant("c")]) == [(2, "alternation")]
    problem = validate_history([user("a"), user("b")], provider="bedrock")[0]
    assert "must alternate between user and assistant roles" in problem.detail


def test_every_tool_use_is_answered_in_the_next_message() -> None:
    history = [user("q"), uses(("t1", "f", {}), ("t2", "f", {})), results(("t1", "a"))]
    assert rules(history) == [(1, "split-parallel")]
    problem = validate_history(history, provider="bedrock")[0]
    assert "Expected toolResult blocks at messages.2.content for the following Ids: t2" in (
        problem.detail
    )
    history = [user("q"), uses(("t1", "f", {})), user("other"), assistant("a")]
    assert rules(history) == [(1, "unanswered-call")]


def test_a_result_must_answer_the_previous_assistant_message() -> None:
    assert rules([user("q"), assistant("a"), results(("t9", "x"))]) == [(2, "orphan-result")]
    history = [
        user("q"),
        uses(("t1", "f", {})),
        results(("t1", "a")),
        assistant("b"),
        results(("t1", "a")),
    ]
    assert rules(history) == [(4, "duplicate-result")]
    history = [user("q"), uses(("t1", "f", {})), user("hm"), assistant("b"), results(("t1", "a"))]
    assert rules(history) == [(1, "unanswered-call"), (4, "late-result")]
    problem = validate_history(history, provider="bedrock")[1]
    assert "exceeds the number of toolUse blocks of previous turn" in problem.detail


def test_pending_calls_at_the_end_are_allowed() -> None:
    assert rules([user("q"), uses(("t1", "f", {}), ("t2", "g", {}))]) == []


def test_the_final_tool_use_turn_starts_with_its_reasoning_when_thinking() -> None:
    history = [
        user("q"),
        uses(("t1", "f", {}), think=True),
        results(("t1", "a")),
        uses(("t2", "g", {})),  # its reasoningContent was dropped on the way back
        results(("t2", "b")),
    ]
    assert rules(history) == [(3, "reasoning-first")]
    assert rules([*history, assistant("done")]) == []  # only the final assistant message
    assert rules([user("q"), uses(("t1", "f", {})), results(("t1", "a"))]) == []


def test_empty_content_and_roles() -> None:
    assert rules([user("q"), {"role": "assistant", "content": []}]) == [(1, "empty-text")]
    assert rules([user(" ")]) == [(0, "empty-text")]
    assert rules([user("q"), {"role": "critic", "content": [{"text": "x"}]}]) == [
        (1, "unknown-role")  # every provider's rule
    ]
    assert rules([user("q"), {"role": "tool", "tool_call_id": "c", "content": "x"}]) == [
        (1, "alternation")  # a role the package knows but Converse has not
    ]


def test_empty_content_and_blank_text_are_named_in_bedrocks_words() -> None:
    empty = validate_history([user("q"), {"role": "assistant", "content": []}], provider="bedrock")
    assert empty[0].detail == (
        'message 1 has no content: "The content field in the Message object at messages.1 '
        'is empty."'
    )
    blank = validate_history(
        [{"role": "user", "content": [{"text": "q"}, {"text": " "}]}], provider="bedrock"
    )
    assert blank[0].detail == (
        '"The text field in the ContentBlock object at messages.0.content.1 is blank."'
    )


# -- generated histories and the guarantee ----------------------------------------------

_words = st.text(alphabet="abcdefgh ", min_size=1, max_size=20).filter(lambda s: s.strip())
TOOLS = ("lookup", "fetch")


@st.composite
def bedrock_histories(draw: st.DrawFn, max_turns: int = 5) -> list[dict[str, Any]]:
    """Valid Converse histories (see the module docstring)."""
    think = draw(st.booleans())
    out: list[dict[str, Any]] = []
    serial = 0
    turns = draw(st.integers(1, max_turns))
    for turn in range(turns):
        question: list[dict[str, Any]] = [{"text": draw(_words)}]
        extra = draw(st.integers(0, 5))
        if extra == 0:
            question.append({"image": {"format": "png", "source": {"bytes": "iVBO"}}})
        elif extra == 1:
            question.append(
                {"document": {"format": "txt", "name": "n", "source": {"bytes": "aGk="}}}
            )
        elif extra == 2:
            question.append({"cachePoint": {"type": "default"}})
        out.append({"role": "user", "content": question})
        last = turn == turns - 1
        steps = draw(st.integers(0, 3))
        for step in range(steps):
            blocks: list[dict[str, Any]] = [thinking(draw(_words), f"s{serial}")] if think else []
            if draw(st.integers(0, 3)) == 0:
                blocks.append({"text": draw(_words)})
            ids = []
            for name in draw(st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3)):
                serial += 1
                ids.append(f"tooluse_{serial}")
                blocks.append(
                    {"toolUse": {"toolUseId": ids[-1], "name": name, "input": {"q": draw(_words)}}}
                )
            out.append({"role": "assistant", "content": blocks})
            if last and step == steps - 1 and draw(st.booleans()):
                return out  # calls still pending
            order = draw(st.permutations(ids))
            answers: list[dict[str, Any]] = []
            for ident in order:
                content: list[dict[str, Any]] = (
                    [{"json": {"out": draw(_words)}}]
                    if draw(st.booleans())
                    else [{"text": draw(_words) * 3}]
                )
                body: dict[str, Any] = {"toolUseId": ident, "content": content}
                if draw(st.booleans()):
                    body["status"] = draw(st.sampled_from(["success", "error"]))
                answers.append({"toolResult": body})
            if draw(st.integers(0, 4)) == 0:
                answers.append({"text": draw(_words)})
            out.append({"role": "user", "content": answers})
        if last and steps and draw(st.booleans()):
            return out  # the results, waiting for the model
        reply: list[dict[str, Any]] = [{"text": draw(_words)}]
        if think and draw(st.booleans()):
            reply.insert(0, thinking(draw(_words)))
        out.append({"role": "assistant", "content": reply})
    return out


@st.composite
def _agent_configs(draw: st.DrawFn) -> ReducerConfig:
    if draw(st.booleans()):
        most = draw(st.integers(1, 400))
        return agent_config(
            provider="bedrock",
            max_tokens=most,
            target_tokens=draw(st.integers(1, most)),
            token_counter="approximate",
        )
    least = draw(st.integers(0, 6))
    return agent_config(
        provider="bedrock", min_messages=least, max_messages=draw(st.integers(least, least + 8))
    )


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(history=bedrock_histories())
def test_generated_histories_are_valid(history: list[dict[str, Any]]) -> None:
    assert rules(history) == []


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(history=bedrock_histories(), config=_agent_configs())
def test_reduce_keeps_a_valid_bedrock_history_valid(
    history: list[dict[str, Any]], config: ReducerConfig
) -> None:
    before = copy.deepcopy(history)
    result = MessageReducer(config=config).reduce(history)
    assert rules(result.surviving) == []
    assert history == before
    # Each survivor is a message given, or one the reduce reports making: an edited copy
    # or the turn ladder's note (agent_config turns the ladder on).
    made = [m for m in result.surviving if not any(m is s for s in history)]
    assert len(made) <= len({e.index for e in result.edited}) + (result.turn_steps_dropped > 0)


@pytest.mark.parametrize("strategy", ["first", "last"])
@settings(max_examples=100, deadline=None)
@given(history=bedrock_histories(), budget=st.integers(0, 400), partial=st.booleans())
def test_trim_messages_keeps_a_valid_bedrock_history_valid(
    strategy: str, history: list[dict[str, Any]], budget: int, partial: bool
) -> None:
    options: dict[str, Any] = {"start_on": "human"} if strategy == "last" else {}
    kept = trim_messages(
        history,
        max_tokens=budget,
        token_counter="approximate",
        strategy=strategy,
        allow_partial=partial,
        keep_tool_pairs=True,
        **options,
    )
    assert rules(kept) == []
    for message in kept:
        if read_message(message).calls and any("reasoningContent" in b for b in message["content"]):
            assert message in history  # a message with reasoning is kept whole or not at all


@pytest.mark.parametrize("shape", ["bedrock", "anthropic"])
def test_trim_partial_never_cuts_reasoning_away_from_its_calls(shape: str) -> None:
    if shape == "bedrock":
        issuer = uses(("t1", "f", {"a": "x " * 40}), ("t2", "f", {"a": "y " * 40}), think=True)
        answer = results(("t1", "r"), ("t2", "s"))
    else:
        think = {"type": "thinking", "thinking": "I should look it up", "signature": "sig"}
        calls = [
            {"type": "tool_use", "id": i, "name": "f", "input": {"a": f"{i} " * 40}}
            for i in ("t1", "t2")
        ]
        issuer = {"role": "assistant", "content": [think, *calls]}
        blocks = [{"type": "tool_result", "tool_use_id": i, "content": "r"} for i in ("t1", "t2")]
        answer = {"role": "user", "content": blocks}
    history = [{"role": "user", "content": "q " * 30}, issuer, answer]
    kept_whole = 0
    for budget in range(0, 400, 5):
        kept = trim_messages(
            history,
            max_tokens=budget,
            token_counter="approximate",
            allow_partial=True,
            strategy="first",
        )
        assert all(m is h for m, h in zip(kept, history, strict=False))
        kept_whole += len(kept) == 3
    assert kept_whole > 0


@settings(max_examples=100, deadline=None)
@given(history=bedrock_histories())
def test_every_editable_part_writes_back_to_an_equal_copy(history: list[dict[str, Any]]) -> None:
    for i, message in enumerate(history):
        parts = editable_parts(message, i)
        written = with_parts(message, {p.path: p.value for p in parts})
        assert json.dumps(written) == json.dumps(message)


# -- a scripted Converse agent, turn after turn ---------------------------------------------


class ScriptedConverse:
    """Acts like a Converse model working through a plan each turn, one step at a time.

    It reads its turn from the latest user question (``"turn N: ..."``), sees a result
    when a ``toolResult`` in the message right after an assistant message answers one
    of its ``toolUseId`` (Bedrock's own pairing), and calls a step again whose results
    were pruned away. Each tool turn starts with a signed ``reasoningContent`` block.
    """

    def __init__(self, steps: list[list[tuple[str, str]]]) -> None:
        self.steps = steps
        self.requests = 0
        self.calls: dict[tuple[str, str], int] = {}
        self.returned: list[dict[str, Any]] = []

    @staticmethod
    def visible(messages: list[dict[str, Any]]) -> set[tuple[str, str]]:
        seen: set[tuple[str, str]] = set()
        for before, after in itertools.pairwise(messages):
            if before["role"] != "assistant" or after["role"] != "user":
                continue
            issued = {
                b["toolUse"]["toolUseId"]: (b["toolUse"]["name"], b["toolUse"]["input"]["q"])
                for b in before["content"]
                if "toolUse" in b
            }
            for block in after["content"]:
                if "toolResult" in block and block["toolResult"]["toolUseId"] in issued:
                    seen.add(issued[block["toolResult"]["toolUseId"]])
        return seen

    def __call__(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        self.requests += 1
        question = next(
            m
            for m in reversed(messages)
            if m["role"] == "user" and str(m["content"][0].get("text", "")).startswith("turn ")
        )
        turn = question["content"][0]["text"].split(":")[0]
        visible = self.visible(messages)
        for step in self.steps:
            missing = [(n, f"{turn} {q}") for n, q in step if (n, f"{turn} {q}") not in visible]
            if missing:
                blocks: list[dict[str, Any]] = [
                    thinking(f"{len(missing)} to go", f"sig-{self.requests}")
                ]
                for k, (name, q) in enumerate(missing):
                    self.calls[(name, q)] = self.calls.get((name, q), 0) + 1
                    ident = f"tooluse_{self.requests}_{k}"
                    blocks.append(
                        {"toolUse": {"toolUseId": ident, "name": name, "input": {"q": q}}}
                    )
                reply = {"role": "assistant", "content": blocks}
                break
        else:
            reply = assistant(f"answer to {turn}")
        self.returned.append(reply)
        return reply


def _run_tools(reply: dict[str, Any], words: int) -> dict[str, Any]:
    blocks = []
    for block in reply["content"]:
        if "toolUse" in block:
            use = block["toolUse"]
            text = f"{use['input']['q']}: " + "lorem ipsum dolor " * (words // 3)
            result = {
                "toolUseId": use["toolUseId"],
                "content": [{"text": text}],
                "status": "success",
            }
            blocks.append({"toolResult": result})
    return {"role": "user", "content": blocks}


#: ``(reducer options, words per tool result, whether a turn fits the budget)``; in the
#: tight budget the oldest steps of a turn are pruned and called again.
SCENARIOS = [
    ({"max_tokens": 900, "target_tokens": 600, "token_counter": "approximate"}, 60, True),
    ({"min_messages": 4, "max_messages": 9}, 30, True),
    (
        {
            "max_tokens": 1200,
            "target_tokens": 800,
            "token_counter": "approximate",
            "context_edits": [ClearToolResults(keep=2)],
        },
        80,
        True,
    ),
    ({"max_tokens": 400, "target_tokens": 250, "token_counter": "approximate"}, 90, False),
]


@pytest.mark.parametrize(("options", "words", "fits"), SCENARIOS)
def test_scripted_converse_agent_sends_only_valid_requests(
    options: dict[str, Any], words: int, fits: bool
) -> None:
    steps = [[("lookup", "a"), ("lookup", "b")], [("fetch", "c")], [("lookup", "d")]]
    agent = ScriptedConverse(steps)
    reducer = MessageReducer(config=agent_config(provider="bedrock", **options))
    history: list[dict[str, Any]] = []
    answered = pruned = 0
    for turn in range(30):
        history.append(user(f"turn {turn}: work through the steps"))
        for _ in range(8):
            result = reducer.reduce(history)
            pruned += len(result.pruned)
            request = result.surviving
            assert validate_history(request, provider="bedrock") == [], (turn, request)
            reply = agent(request)
            history = [*request, reply]
            if not any("toolUse" in b for b in reply["content"]):
                answered += 1
                break
            history.append(_run_tools(reply, words))
        else:
            history.append(assistant("I could not finish."))  # the app gives up on the turn
    assert pruned > 0
    recalls = sum(n - 1 for n in agent.calls.values())
    # A turn over the budget clears its older results (agent_config's turn ladder): the
    # agent sees every step done, as when the turn fits.
    assert fits or recalls == 0
    assert answered == 30 and agent.requests == 30 * (len(steps) + 1)
    gave_up = {"text": "I could not finish."}
    sent = [m for m in history if m["role"] == "assistant" and m["content"][0] != gave_up]
    assert all(any(m is r for r in agent.returned) for m in sent)


# -- the command line ---------------------------------------------------------------------


def _request(messages: list[dict[str, Any]], system: bool = True) -> dict[str, Any]:
    document: dict[str, Any] = {"modelId": "anthropic.claude-sonnet-4"}
    if system:
        document["system"] = [{"text": "be brief"}]
    document["messages"] = messages
    document["inferenceConfig"] = {"maxTokens": 512}
    return document


def _two_turns() -> list[dict[str, Any]]:
    return [
        user("weather in Paris and Rome?"),
        uses(("t1", "get", {"city": "Paris"}), ("t2", "get", {"city": "Rome"}), think=True),
        results(("t1", "sunny"), ("t2", "rain")),
        assistant("Paris sunny, Rome rain"),
        user("and Oslo?"),
        uses(("t3", "get", {"city": "Oslo"}), think=True),
        results(("t3", "snow")),
        assistant("Oslo snow"),
    ]


def _cli(capsys: pytest.CaptureFixture[str], document: Any, *args: str) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "request.json"
        path.write_text(json.dumps(document, indent=2), encoding="utf-8")
        status = cli.main([*args, str(path)])
    return status, capsys.readouterr().out


def test_cli_detects_a_converse_request_and_writes_it_back_in_its_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = _request(_two_turns())
    status, out = _cli(capsys, document, "reduce", "--max-messages", "5", "--explain")
    assert status == 0
    assert "Bedrock Converse request (top-level system planned as the first message)" in out
    assert "bedrock rules, input: OK" in out and "bedrock rules, output: OK" in out
    status, out = _cli(capsys, document, "reduce", "--max-messages", "5")
    written = json.loads(out)
    assert list(written) == ["modelId", "system", "messages", "inferenceConfig"]
    assert written["system"] == document["system"]
    assert written["messages"] == document["messages"][4:]


def test_cli_without_a_system_keeps_the_alternation(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = _cli(
        capsys, _request(_two_turns(), system=False), "reduce", "--max-messages", "5"
    )
    written = json.loads(out)
    assert status == 0 and written["messages"] == _two_turns()[4:]
    status, out = _cli(capsys, _two_turns(), "trim", "--max-tokens", "60", "--explain")
    assert status == 0 and "bedrock rules, output: OK" in out


@settings(max_examples=40, deadline=None)
@given(
    history=bedrock_histories(),
    system=st.booleans(),
    command=st.sampled_from(
        [
            ("reduce", "--max-messages", "6", "--min-messages", "2"),
            ("reduce", "--max-tokens", "150"),
            ("trim", "--max-tokens", "120"),
            ("trim", "--max-tokens", "60", "--strategy", "first"),
            ("trim", "--max-tokens", "80", "--allow-partial"),
        ]
    ),
)
def test_cli_output_of_a_valid_converse_request_is_valid(
    history: list[dict[str, Any]], system: bool, command: tuple[str, ...]
) -> None:
    document = _request(history, system=system)
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "in.json", Path(tmp) / "out.json"
        source.write_text(json.dumps(document), encoding="utf-8")
        assert cli.main([*command, "--out", str(target), str(source)]) == 0
        written = json.loads(target.read_text(encoding="utf-8"))
    assert validate_history(written["messages"], provider="bedrock") == []


def test_offloading_never_touches_a_reasoning_block() -> None:
    reasoning = thinking("reasoning " * 300, "sig")
    issuer = {
        "role": "assistant",
        "content": [
            reasoning,
            {"text": "word " * 300},
            {"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}},
        ],
    }
    history = [user("q"), issuer, results(("t1", "r " * 300)), assistant("done")]
    edits = [Offload(above=100, head=20, tail=10)]
    config = agent_config(provider="bedrock", max_messages=100, context_edits=edits)
    surviving = MessageReducer(config=config).reduce(history).surviving
    edited = surviving[1]
    assert edited is not issuer and edited["content"][0] == reasoning
    assert edited["content"][1]["text"].startswith("[offloaded:")
    assert edited["content"][2] == issuer["content"][2]
    assert surviving[2]["content"][0]["toolResult"]["content"][0]["text"].startswith("[offloaded:")
    assert rules(surviving) == []


def test_reasoning_blocks_are_reasoning_parts_signed_or_not() -> None:
    from agentstate_reducer.read import ReasoningPart, reasoning_parts

    use = {"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}
    signed = {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "s"}}}
    unsigned = {"reasoningContent": {"reasoningText": {"text": "hm"}}}
    redacted = {"reasoningContent": {"redactedContent": "b64"}}
    message = {"role": "assistant", "content": [signed, unsigned, redacted, use]}
    assert reasoning_parts(message) == (
        ReasoningPart("reasoningContent", 0, True),
        ReasoningPart("reasoningContent", 1, False),
        ReasoningPart("reasoningContent", 2, True),
    )
    assert reasoning_parts({"role": "assistant", "content": [use]}) == ()
