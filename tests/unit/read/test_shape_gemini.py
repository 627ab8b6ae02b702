"""Gemini ``contents``: the reader, the validator's Gemini rules, and the guarantee.

Histories are drawn by :func:`gemini_histories`: user questions (some with an image),
model turns of parallel calls (often of the same tool, with or without ``id``, the first
call carrying a ``thoughtSignature`` when the history is signed, sometimes after a
``thought`` part), the user content answering them by name and order, final answers,
and pending calls at the end.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reading import read_or_error

from agentstate_reducer import (
    MessageReducer,
    ReducerConfig,
    agent_config,
    cli,
    trim_messages,
    validate_history,
)
from agentstate_reducer.edit import ClearToolResults, Offload, handle_of
from agentstate_reducer.plan import CASCADE, make_plan
from agentstate_reducer.read import (
    content_kinds,
    editable_parts,
    is_injected,
    message_parts,
    read_message,
    read_messages,
    synthetic_results,
    with_parts,
)
from agentstate_reducer.tokens import resolve_token_counter

_count = resolve_token_counter("approximate")


def count_message(message: Any) -> int:
    return int(_count(message))


TOOLS = ("lookup", "fetch")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def model(text: str) -> dict[str, Any]:
    return {"role": "model", "parts": [{"text": text}]}


def calls(*specs: tuple[str, dict[str, Any]], sign: str | None = None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"functionCall": {"name": n, "args": a}} for n, a in specs]
    if sign is not None:
        parts[0]["thoughtSignature"] = sign
    return {"role": "model", "parts": parts}


def responses(*specs: tuple[str, Any]) -> dict[str, Any]:
    parts = [{"functionResponse": {"name": n, "response": {"result": r}}} for n, r in specs]
    return {"role": "user", "parts": parts}


def rules(history: list[Any]) -> list[tuple[int, str]]:
    return [(p.index, p.rule) for p in validate_history(history, provider="gemini")]


# -- the reader ----------------------------------------------------------------------


def test_calls_without_ids_are_named_by_name_and_occurrence() -> None:
    issuer = calls(("lookup", {"q": "a"}), ("fetch", {}), ("lookup", {"q": "b"}))
    answer = responses(("lookup", 1), ("fetch", 2), ("lookup", 3))
    assert read_message(issuer).calls == ("lookup#0", "fetch#0", "lookup#1")
    assert read_message(answer).answers == ("lookup#0", "fetch#0", "lookup#1")
    assert read_message(issuer).role == "ai" and read_message(answer).role == "human"


def test_ids_are_used_where_present() -> None:
    issuer = {"role": "model", "parts": [{"functionCall": {"id": "x1", "name": "f", "args": {}}}]}
    answer = {
        "role": "user",
        "parts": [{"functionResponse": {"id": "x1", "name": "f", "response": {}}}],
    }
    assert read_message(issuer).calls == ("x1",)
    assert read_message(answer).answers == ("x1",)


def test_snake_case_parts_of_the_python_sdk_are_read() -> None:
    issuer = {
        "role": "model",
        "parts": [{"function_call": {"name": "f", "args": {"a": 1}}, "thought_signature": "s"}],
    }
    answer = {"role": "user", "parts": [{"function_response": {"name": "f", "response": {}}}]}
    assert read_message(issuer).calls == ("f#0",)
    assert read_message(answer).answers == ("f#0",)
    assert message_parts(issuer).tool_calls == (("f", '{"a":1}'),)


def test_parallel_calls_of_one_tool_repeated_across_turns_link_to_their_own_turn() -> None:
    history = [
        user("compare a and b"),
        calls(("lookup", {"q": "a"}), ("lookup", {"q": "b"})),
        responses(("lookup", "A"), ("lookup", "B")),
        model("a beats b"),
        user("and c, d?"),
        calls(("lookup", {"q": "c"}), ("lookup", {"q": "d"})),
        responses(("lookup", "C"), ("lookup", "D")),
        model("c beats d"),
    ]
    views = read_messages(history)
    assert views[1].calls == views[5].calls == ("lookup#0", "lookup#1")
    # Pruning the first turn takes its responses with it, never the second turn's.
    plan = make_plan(views, ReducerConfig(min_messages=5, max_messages=5, preserve_first=False))
    assert plan.pruned == (0, 1, 2)
    assert plan.why[2] == (CASCADE, 1)
    result = MessageReducer(config=agent_config(min_messages=0, max_messages=5)).reduce(history)
    assert rules(result.surviving) == []
    assert history[5] in result.surviving and history[6] in result.surviving


def test_billing_counts_text_thoughts_calls_responses_and_media_but_not_signatures() -> None:
    signature = "S" * 4000
    signed = {
        "role": "model",
        "parts": [
            {"text": "let me think", "thought": True},
            {"functionCall": {"name": "f", "args": {"x": 1}}, "thoughtSignature": signature},
        ],
    }
    parts = message_parts(signed)
    assert parts.texts == ("let me think",)
    assert parts.tool_calls == (("f", '{"x":1}'),)
    unsigned = copy.deepcopy(signed)
    del unsigned["parts"][1]["thoughtSignature"]
    assert count_message(signed) == count_message(unsigned)
    answered = message_parts(responses(("f", "sunny")))
    assert answered.tool_result_ids == ("f#0",)
    assert any("sunny" in t for t in answered.texts)
    image = {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "AA"}}]}
    assert message_parts(image).media == 1
    assert count_message(model("word " * 50)) > count_message(model("word"))


def test_content_kinds_of_parts() -> None:
    content = {
        "role": "model",
        "parts": [
            {"text": "hmm", "thought": True},
            {"text": "  "},
            {"text": "ok"},
            {"functionCall": {"name": "f", "args": {}}},
            {"fileData": {"fileUri": "gs://b/f.pdf", "mimeType": "application/pdf"}},
        ],
    }
    assert content_kinds(content) == ("reasoning", "blank", "text", "tool_use", "media")


def test_written_back_losslessly_with_unknown_keys_and_signatures_in_place() -> None:
    content = {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "f", "response": {"r": "x" * 50}, "extra": 1}},
            {"text": "and now?", "partMetadata": {"k": "v"}},
        ],
        "zzz": [1, 2],
    }
    parts = editable_parts(content)
    assert [p.path for p in parts] == [
        ("parts", 0, "functionResponse", "response"),
        ("parts", 1, "text"),
    ]
    same = with_parts(content, {p.path: p.value for p in parts})
    assert same == content and json.dumps(same) == json.dumps(content)
    cleared = with_parts(content, {parts[0].path: {"cleared": True}})
    assert list(cleared) == list(content)
    assert list(cleared["parts"][0]["functionResponse"]) == ["name", "response", "extra"]
    assert cleared["parts"][0]["functionResponse"]["response"] == {"cleared": True}
    assert content["parts"][0]["functionResponse"]["response"] == {"r": "x" * 50}
    signed = calls(("f", {"big": "y" * 40}), sign="sig")
    (args,) = editable_parts(signed)
    edited = with_parts(signed, {args.path: {}})
    assert edited["parts"][0] == {
        "functionCall": {"name": "f", "args": {}},
        "thoughtSignature": "sig",
    }


def test_context_editing_clears_an_old_response_and_keeps_the_shape() -> None:
    history = [
        user("q"),
        calls(("lookup", {"q": "a"}), sign="sig"),
        responses(("lookup", "r " * 400)),
        model("a"),
        user("next"),
        calls(("lookup", {"q": "b"}), sign="sig2"),
        responses(("lookup", "s " * 400)),
        model("done"),
    ]
    edits = [ClearToolResults(keep=1, trigger_messages=1)]
    config = agent_config(max_messages=100, context_edits=edits)
    surviving = MessageReducer(config=config).reduce(history).surviving
    cleared = surviving[2]
    assert cleared is not history[2] and list(cleared) == list(history[2])
    body = cleared["parts"][0]["functionResponse"]
    assert list(body) == ["name", "response"] and body["name"] == "lookup"
    assert "r r r" not in json.dumps(body["response"])
    assert surviving[1] is history[1] and surviving[5:] == history[5:]
    assert rules(surviving) == []


def test_synthetic_results_answer_in_gemini_shape() -> None:
    issuer = {
        "role": "model",
        "parts": [
            {"functionCall": {"name": "f", "args": {}}},
            {"functionCall": {"id": "k", "name": "g", "args": {}}},
        ],
    }
    (found,) = synthetic_results(issuer, ("f#0", "k"))
    assert found["role"] == "user"
    assert [list(p) for p in found["parts"]] == [["functionResponse"], ["functionResponse"]]
    assert read_message(found).answers == ("f#0", "k")
    assert found["parts"][1]["functionResponse"]["id"] == "k"
    assert rules([user("q"), issuer, found]) == []


def test_dead_calls_are_repaired_in_gemini_shape() -> None:
    history = [user("q"), calls(("f", {})), user("never mind"), model("ok")]
    assert ("1", "unanswered-call") in [(str(i), r) for i, r in rules(history)]
    result = MessageReducer(config=agent_config(max_messages=100)).reduce(history)
    assert rules(result.surviving) == []


# -- the validator ----------------------------------------------------------------------


def test_a_valid_history_has_no_problem() -> None:
    history = [
        {"role": "system", "parts": [{"text": "be brief"}]},
        user("q"),
        calls(("f", {}), ("f", {}), sign="s"),
        responses(("f", 1), ("f", 2)),
        model("a"),
        user("again"),
        calls(("g", {}), sign="t"),
    ]
    assert rules(history) == []


def test_first_content_must_be_user() -> None:
    assert rules([model("hi"), user("q")]) == [(0, "first-not-user")]


def test_response_count_must_match_the_call_turn() -> None:
    history = [user("q"), calls(("f", {}), ("g", {})), responses(("f", 1))]
    assert rules(history) == [(2, "response-count")]
    problem = validate_history(history, provider="gemini")[0]
    assert "number of function response parts is equal" in problem.detail


def test_responses_split_over_two_contents() -> None:
    history = [user("q"), calls(("f", {}), ("g", {})), responses(("f", 1)), responses(("g", 2))]
    assert rules(history) == [(2, "response-count"), (3, "late-result")]


def test_response_without_its_call_turn() -> None:
    assert rules([user("q"), responses(("f", 1))]) == [(1, "orphan-result")]
    history = [user("q"), calls(("f", {})), responses(("f", 1)), model("a"), responses(("f", 1))]
    assert rules(history) == [(4, "duplicate-result")]
    history = [user("q"), calls(("f", {})), model("a"), responses(("f", 1))]
    assert rules(history) == [(1, "unanswered-call"), (3, "late-result")]


def test_calls_answered_by_a_question_are_unanswered() -> None:
    history = [user("q"), calls(("f", {})), user("other"), model("a")]
    assert rules(history) == [(1, "unanswered-call")]


def test_pending_calls_at_the_end_are_allowed() -> None:
    assert rules([user("q"), calls(("f", {}), ("f", {}))]) == []


def test_call_turn_must_follow_a_user_turn() -> None:
    history = [user("q"), model("thinking aloud"), calls(("f", {})), responses(("f", 1))]
    assert rules(history) == [(2, "call-turn-order")]


def test_current_turn_calls_need_their_signature_when_the_model_signs() -> None:
    history = [
        user("q"),
        calls(("f", {}), sign="s1"),
        responses(("f", 1)),
        calls(("g", {}), ("g", {})),  # the signature was dropped on the way back
        responses(("g", 1), ("g", 2)),
    ]
    assert rules(history) == [(3, "missing-thought-signature")]
    problem = validate_history(history, provider="gemini")[0]
    assert "missing a thought_signature" in problem.detail and "parts[0]" in problem.detail
    # Earlier turns are not checked, and a history that never signs is not checked.
    assert rules([*history, model("a"), user("next")]) == []
    unsigned = [user("q"), calls(("f", {})), responses(("f", 1))]
    assert rules(unsigned) == []


def test_empty_parts_and_blank_text_are_named_in_geminis_words() -> None:
    empty = validate_history([user("q"), {"role": "model", "parts": []}], provider="gemini")
    assert empty[0].detail == 'content 1 has no parts: "contents.parts must not be empty"'
    blank = validate_history(
        [{"role": "user", "parts": [{"text": "q"}, {"text": " "}]}], provider="gemini"
    )
    assert blank[0].detail == (
        'text part parts[1] is empty: "Unable to submit request because it has an empty '
        'text parameter."'
    )


def test_empty_parts_and_roles() -> None:
    assert rules([user("q"), {"role": "model", "parts": []}]) == [(1, "empty-text")]
    assert rules([user(" ")]) == [(0, "empty-text")]
    critic = {"role": "critic", "parts": [{"text": "x"}]}
    assert rules([user("q"), critic]) == [(1, "unknown-role")]  # every provider's rule
    assert rules([user("q"), {"role": "tool", "tool_call_id": "c", "content": "x"}]) == [
        (1, "alternation")  # a role the package knows but Gemini has not
    ]


# -- generated histories and the guarantee ----------------------------------------------

_words = st.text(alphabet="abcdefgh ", min_size=1, max_size=20).filter(lambda s: s.strip())


@st.composite
def gemini_histories(draw: st.DrawFn, max_turns: int = 5) -> list[dict[str, Any]]:
    """Valid Gemini histories (see the module docstring)."""
    signed = draw(st.booleans())
    with_ids = draw(st.booleans())
    out: list[dict[str, Any]] = []
    serial = 0
    if draw(st.booleans()):
        out.append({"role": "system", "parts": [{"text": draw(_words)}]})
    turns = draw(st.integers(1, max_turns))
    for turn in range(turns):
        question: dict[str, Any] = user(draw(_words))
        if draw(st.integers(0, 4)) == 0:
            question["parts"].append({"inlineData": {"mimeType": "image/png", "data": "iVBO"}})
        out.append(question)
        steps = draw(st.integers(0, 3))
        last = turn == turns - 1
        pending = last and steps > 0 and draw(st.booleans())
        for step in range(steps):
            names = draw(st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3))
            call_parts: list[dict[str, Any]] = []
            if draw(st.booleans()):
                call_parts.append({"text": draw(_words), "thought": True})
            ids = []
            for name in names:
                serial += 1
                body: dict[str, Any] = {"name": name, "args": {"q": draw(_words)}}
                if with_ids:
                    body = {"id": f"call-{serial}", **body}
                ids.append(body.get("id"))
                call_parts.append({"functionCall": body})
            if signed:
                first = 1 if "thought" in call_parts[0] else 0
                call_parts[first]["thoughtSignature"] = f"sig-{serial}"
            out.append({"role": "model", "parts": call_parts})
            if pending and step == steps - 1:
                return out
            answers = []
            for name, ident in zip(names, ids, strict=True):
                body = {"name": name, "response": {"output": draw(_words) * 3}}
                if ident is not None:
                    body = {"id": ident, **body}
                answers.append({"functionResponse": body})
            out.append({"role": "user", "parts": answers})
        if not last or draw(st.booleans()):
            out.append(model(draw(_words)))
    return out


@st.composite
def _agent_configs(draw: st.DrawFn) -> ReducerConfig:
    if draw(st.booleans()):
        most = draw(st.integers(1, 400))
        return agent_config(
            max_tokens=most, target_tokens=draw(st.integers(1, most)), token_counter="approximate"
        )
    least = draw(st.integers(0, 6))
    return agent_config(min_messages=least, max_messages=draw(st.integers(least, least + 8)))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(history=gemini_histories())
def test_generated_histories_are_valid(history: list[dict[str, Any]]) -> None:
    assert rules(history) == []


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(history=gemini_histories(), config=_agent_configs())
def test_reduce_keeps_a_valid_gemini_history_valid(
    history: list[dict[str, Any]], config: ReducerConfig
) -> None:
    before = copy.deepcopy(history)
    result = MessageReducer(config=config).reduce(history)
    assert rules(result.surviving) == []
    assert history == before
    # Every survivor is an input, or the turn ladder's note (a Gemini content as well).
    assert all(any(m is s for s in history) or is_injected(m) for m in result.surviving)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["first", "last"])
@settings(max_examples=100, deadline=None)
@given(history=gemini_histories(), budget=st.integers(0, 400), partial=st.booleans())
def test_trim_messages_keeps_a_valid_gemini_history_valid(
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


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(history=gemini_histories())
def test_the_view_and_the_parts_name_calls_alike(history: list[dict[str, Any]]) -> None:
    for content in history:
        view = read_message(content)
        named = {p.call_id for p in editable_parts(content) if p.call_id is not None}
        assert set(view.calls) | set(view.answers) == named


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(history=gemini_histories())
def test_every_editable_part_writes_back_to_an_equal_copy(history: list[dict[str, Any]]) -> None:
    for i, content in enumerate(history):
        parts = editable_parts(content, i)
        assert json.dumps(with_parts(content, {p.path: p.value for p in parts})) == json.dumps(
            content
        )


# -- a scripted Gemini agent, turn after turn ---------------------------------------------


class ScriptedGemini:
    """Acts like Gemini working through a plan each turn, one step of parallel calls at a time.

    It reads its turn from the latest user question (``"turn N: ..."``) and pairs function
    responses with calls the way Gemini does (the k-th response of a name answers the
    k-th call of that name in the model turn just before). A step whose results it cannot
    see (pruned away) is called again. Each call turn starts with a thought and signs its
    first call; every content it returns is kept to check it comes back unchanged.
    """

    def __init__(self, steps: list[list[tuple[str, str]]]) -> None:
        self.steps = steps
        self.requests = 0
        self.calls: dict[tuple[str, str], int] = {}
        self.returned: list[dict[str, Any]] = []

    @staticmethod
    def visible(contents: list[dict[str, Any]]) -> set[tuple[str, str]]:
        seen: set[tuple[str, str]] = set()
        for before, after in itertools.pairwise(contents):
            if before.get("role") != "model" or after.get("role") != "user":
                continue
            issued: dict[str, list[str]] = {}
            for part in before["parts"]:
                if "functionCall" in part:
                    call = part["functionCall"]
                    issued.setdefault(call["name"], []).append(call["args"]["q"])
            taken: dict[str, int] = {}
            for part in after["parts"]:
                if "functionResponse" in part:
                    name = part["functionResponse"]["name"]
                    k = taken.get(name, 0)
                    taken[name] = k + 1
                    if k < len(issued.get(name, ())):
                        seen.add((name, issued[name][k]))
        return seen

    def __call__(self, contents: list[dict[str, Any]]) -> dict[str, Any]:
        self.requests += 1
        question = next(
            c
            for c in reversed(contents)
            if c["role"] == "user"
            and "text" in c["parts"][0]
            and c["parts"][0]["text"][:5] == "turn "
        )
        turn = question["parts"][0]["text"].split(":")[0]
        visible = self.visible(contents)
        for step in self.steps:
            missing = [
                (name, f"{turn} {q}") for name, q in step if (name, f"{turn} {q}") not in visible
            ]
            if missing:
                parts: list[dict[str, Any]] = [
                    {"text": f"I need {len(missing)} more", "thought": True}
                ]
                for name, q in missing:
                    self.calls[(name, q)] = self.calls.get((name, q), 0) + 1
                    parts.append({"functionCall": {"name": name, "args": {"q": q}}})
                parts[1]["thoughtSignature"] = f"sig-{self.requests}"
                reply = {"role": "model", "parts": parts}
                break
        else:
            reply = model(f"answer to {turn}")
        self.returned.append(reply)
        return reply


def _run_tools(reply: dict[str, Any], words: int) -> dict[str, Any]:
    parts = []
    for part in reply["parts"]:
        if "functionCall" in part:
            call = part["functionCall"]
            text = f"{call['args']['q']}: " + "lorem ipsum dolor " * (words // 3)
            parts.append({"functionResponse": {"name": call["name"], "response": {"output": text}}})
    return {"role": "user", "parts": parts}


#: ``(reducer options, words per tool result, whether a turn fits the budget)``. In the
#: tight budget a turn's steps do not fit: the oldest are pruned, the model calls them
#: again, and every request must still be valid.
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
    ({"max_tokens": 500, "target_tokens": 300, "token_counter": "approximate"}, 90, False),
]


@pytest.mark.parametrize(("options", "words", "fits"), SCENARIOS)
def test_scripted_gemini_agent_sends_only_valid_requests(
    options: dict[str, Any], words: int, fits: bool
) -> None:
    steps = [[("lookup", "a"), ("lookup", "b")], [("fetch", "c")], [("lookup", "d")]]
    agent = ScriptedGemini(steps)
    reducer = MessageReducer(config=agent_config(**options))
    history: list[dict[str, Any]] = []
    answered = pruned = 0
    for turn in range(30):
        history.append(user(f"turn {turn}: work through the steps"))
        for _ in range(8):
            result = reducer.reduce(history)
            pruned += len(result.pruned)
            request = result.surviving
            assert validate_history(request, provider="gemini") == [], (turn, request)
            reply = agent(request)
            history = [*request, reply]
            if not any("functionCall" in p for p in reply["parts"]):
                answered += 1
                break
            history.append(_run_tools(reply, words))
    assert pruned > 0
    recalls = sum(n - 1 for n in agent.calls.values())
    # A turn over the budget clears its older results (agent_config's turn ladder): the
    # agent sees every step done, as when the turn fits.
    assert fits or recalls == 0
    assert answered == 30 and agent.requests == 30 * (len(steps) + 1)
    # Every model content the agent returned went back to it unchanged, signature and all,
    # or not at all (context edits change responses, never the model's contents).
    sent = [c for c in history if c["role"] == "model"]
    assert all(any(c is r for r in agent.returned) for c in sent)


# -- the command line ---------------------------------------------------------------------


def _request(contents: list[dict[str, Any]], system: bool = True) -> dict[str, Any]:
    document: dict[str, Any] = {}
    if system:
        document["systemInstruction"] = {"parts": [{"text": "be brief"}]}
    document["contents"] = contents
    document["generationConfig"] = {"temperature": 0}
    return document


def _cli(capsys: pytest.CaptureFixture[str], document: Any, *args: str) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "request.json"
        path.write_text(json.dumps(document, indent=2), encoding="utf-8")
        status = cli.main([*args, str(path)])
    return status, capsys.readouterr().out


def _two_turns() -> list[dict[str, Any]]:
    return [
        user("weather in Paris and Rome?"),
        calls(("get", {"city": "Paris"}), ("get", {"city": "Rome"}), sign="c2ln"),
        responses(("get", "sunny"), ("get", "rain")),
        model("Paris sunny, Rome rain"),
        user("and Oslo?"),
        calls(("get", {"city": "Oslo"}), sign="c2ln"),
        responses(("get", "snow")),
        model("Oslo snow"),
    ]


def test_cli_detects_a_gemini_request_and_writes_it_back_in_its_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = _request(_two_turns())
    status, out = _cli(capsys, document, "reduce", "--max-messages", "5", "--explain")
    assert status == 0
    assert "Gemini generateContent request (top-level systemInstruction planned" in out
    assert "gemini rules, input: OK" in out and "gemini rules, output: OK" in out
    status, out = _cli(capsys, document, "reduce", "--max-messages", "5")
    written = json.loads(out)
    assert list(written) == ["systemInstruction", "contents", "generationConfig"]
    assert written["systemInstruction"] == document["systemInstruction"]
    assert written["contents"] == document["contents"][4:]
    assert written["generationConfig"] == {"temperature": 0}


def test_cli_drops_a_pruned_system_instruction_and_reads_plain_lists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = _request(_two_turns())
    status, out = _cli(capsys, document, "trim", "--max-tokens", "60", "--no-include-system")
    written = json.loads(out)
    assert status == 0 and "systemInstruction" not in written
    assert validate_history(written["contents"], provider="gemini") == []
    status, out = _cli(capsys, _two_turns(), "trim", "--max-tokens", "40", "--explain")
    assert status == 0 and "gemini rules, output: OK" in out


@settings(max_examples=40, deadline=None)
@given(
    history=gemini_histories(),
    command=st.sampled_from(
        [
            ("reduce", "--max-messages", "6", "--min-messages", "2"),
            ("reduce", "--max-tokens", "150"),
            ("trim", "--max-tokens", "120"),
            ("trim", "--max-tokens", "60", "--strategy", "first"),
        ]
    ),
)
def test_cli_output_of_a_valid_gemini_request_is_valid(
    history: list[dict[str, Any]], command: tuple[str, ...]
) -> None:
    contents = [c for c in history if c["role"] != "system"]
    document = _request(contents, system=len(contents) < len(history))
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "in.json", Path(tmp) / "out.json"
        source.write_text(json.dumps(document), encoding="utf-8")
        assert cli.main([*command, "--out", str(target), str(source)]) == 0
        written = json.loads(target.read_text(encoding="utf-8"))
    assert validate_history(written["contents"], provider="gemini") == []
    assert all(c in contents for c in written["contents"])


def test_offloading_never_touches_a_thought_part_or_its_signature() -> None:
    thought = {"text": "reasoning " * 300, "thought": True}
    call = {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "sig"}
    content = {"role": "model", "parts": [thought, call, {"text": "word " * 300}]}
    history = [user("q"), content, responses(("f", "r " * 300)), model("done")]
    config = agent_config(max_messages=100, context_edits=[Offload(above=100, head=20, tail=10)])
    surviving = MessageReducer(config=config).reduce(history).surviving
    edited = surviving[1]
    assert edited is not content and edited["parts"][0] == thought
    assert edited["parts"][1] == content["parts"][1]
    assert edited["parts"][2]["text"].startswith("[offloaded:")
    assert rules(surviving) == []


def test_thought_parts_are_reasoning_parts() -> None:
    from agentstate_reducer.read import ReasoningPart, reasoning_parts

    content = {"role": "model", "parts": [
        {"text": "let me think", "thought": True},
        {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "sig"},
        {"text": "done"},
    ]}
    # Gemini checks the signature on the call (call_signatures), never on the thought.
    assert reasoning_parts(content) == (ReasoningPart("thought", 0, True),)
    assert reasoning_parts({"role": "user", "parts": [{"text": "q"}]}) == ()


# -- the turn ladder on contents without ids ------------------------------------------------


def _long_turn(steps: int) -> list[dict[str, Any]]:
    """One question, then ``steps`` steps of one ``fetch`` call without an id each (every
    call is ``fetch#0`` of its own content), each result ~500 tokens."""
    history = [user("compile the report")]
    for k in range(steps):
        history.append(calls(("fetch", {"page": k, "text": "p" * 200})))
        history.append(responses(("fetch", f"page {k}: " + "x" * 2000)))
    return history


def test_ladder_placeholders_name_the_call_of_their_own_step() -> None:
    """Ids repeat across contents (``fetch#0`` in each): a cleared result names the
    arguments of the call it answers, not those of the latest ``fetch#0``."""
    reducer = MessageReducer(config=agent_config(max_tokens=3000, target_tokens=2000))
    history = _long_turn(8)
    page_of = {
        handle_of(c["parts"][0]["functionResponse"]["response"]): k
        for k, c in enumerate(history[2::2])
    }
    result = reducer.reduce(history)
    named = 0
    for content in result.surviving:
        for part in content["parts"]:
            output = part.get("functionResponse", {}).get("response", {}).get("output")
            if isinstance(output, str) and output.startswith("[cleared: "):
                handle = re.search(r"handle (ctx_[0-9a-f]{16})", output)
                assert handle is not None, output
                assert f'"page": {page_of[handle.group(1)]},' in output, output
                named += 1
    assert named >= 2
    assert validate_history(result.surviving, provider="gemini") == []


def test_a_turn_note_in_contents_is_a_gemini_content() -> None:
    """The note standing for dropped steps is written as a content of one text part."""
    reducer = MessageReducer(config=agent_config(max_tokens=2000, target_tokens=1500))
    result = reducer.reduce(_long_turn(30))
    assert result.turn_steps_dropped
    notes = [c for c in result.surviving if c["parts"][0].get("text", "").startswith(
        "[turn note: ")]
    assert len(notes) == 1 and notes[0]["role"] == "user" and "content" not in notes[0]
    assert read_message(notes[0]).role == "human"
    assert validate_history(result.surviving, provider="gemini") == []
    # Reduced again, the note is recognised as the package's own and carried on.
    again = reducer.reduce(result.surviving)
    assert sum(c["parts"][0].get("text", "").startswith("[turn note: ")
               for c in again.surviving) == 1


_odd = st.sampled_from(
    [None, "", "f", "g", "id1", 0, 7, [], {}, True, {"a": [1]}, {"output": "x\n\"\u00e9"}]
)
_names = st.sampled_from([None, "", "f", "g"])
_bodies = st.one_of(
    st.fixed_dictionaries(
        {"name": _names},
        optional={"id": st.sampled_from([None, "", "c1", "c2"]), "args": _odd, "response": _odd},
    ),
    st.fixed_dictionaries(
        {},
        optional={"name": _odd, "id": _odd, "args": _odd, "response": _odd},
    ),
    _odd,
)
_part_keys = st.sampled_from(
    ["text", "thought", "functionCall", "function_call", "functionResponse",
     "function_response", "thoughtSignature", "inlineData"]
)
_parts = st.one_of(
    st.dictionaries(_part_keys, st.one_of(_odd, _bodies), max_size=3),
    st.builds(lambda t: {"text": t}, st.sampled_from(["", "hi", "x y"])),
    st.builds(lambda b: {"functionCall": b}, _bodies),
    st.builds(lambda b: {"functionResponse": b}, _bodies),
    _odd,
)
_contents = st.fixed_dictionaries(
    {"parts": st.lists(_parts, max_size=4)},
    optional={
        "role": st.sampled_from(["user", "model", "Model", "system", "tool", "narrator", 3]),
        "id": _odd,
        "content": st.just("x"),
    },
) | st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "model"]), "parts": st.lists(_parts, max_size=4)}
)


@settings(max_examples=400, deadline=None)
@given(content=_contents)
def test_the_plain_content_reader_gives_the_full_reader_s_record(content: dict[str, Any]) -> None:
    """A dict goes through the one-pass reader; the same fields as another mapping through
    links() and billed(): the record (or the error) is the same."""
    from types import MappingProxyType

    from agentstate_reducer.read.gemini import _GEMINI

    plain = read_or_error(lambda m: _GEMINI.read(m, 0), content)
    full = read_or_error(lambda m: _GEMINI.read(MappingProxyType(m), 0), content)
    assert plain == full
    assert read_or_error(read_message, content) == read_or_error(
        read_message, MappingProxyType(content)
    )


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=4) | st.integers(), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(response=_json_values | st.dictionaries(st.text(), st.text(), min_size=1, max_size=1))
def test_a_response_of_one_text_is_the_json_the_encoder_writes(response: Any) -> None:
    """The shortcut for a response ``{"output": text}`` writes what ``_json`` writes."""
    from agentstate_reducer.read.fields import _json
    from agentstate_reducer.read.gemini import _response_json

    assert _response_json(response) == _json(response)
