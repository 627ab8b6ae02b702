"""The command line, run as installed (console script and ``python -m``) on fixture transcripts."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstate_reducer import cli
from agentstate_reducer.cli import transcript as cli_transcript
from agentstate_reducer.tokens import approximate_token_count

FIXTURES = Path(__file__).parents[2] / "fixtures" / "transcripts"
SCRIPT = Path(sys.executable).parent / "agentstate-reducer"
ENTRY_POINTS = {
    "script": [str(SCRIPT)],
    "module": [sys.executable, "-m", "agentstate_reducer"],
}
# The fixtures hold one conversation: a system prompt, then 15 messages (14 in the Anthropic
# request, whose tool results share user messages). With these options the last three stay.
SMALL = ["--max-messages", "8", "--min-messages", "4"]
# trim keeps a leading system prompt by default; these tests measure the plain tail.
TAIL_ONLY = ["--no-include-system"]
LIST_SHAPES = ["list.json", "langchain_messages_to_dict.json", "langchain_dumpd.json"]


PROGS = {"script": "agentstate-reducer", "module": "python -m agentstate_reducer"}


def run_installed(
    *args: str, stdin: str | None = None, entry: str = "script"
) -> subprocess.CompletedProcess[str]:
    """The command line as installed, in a child process (console script or ``python -m``)."""
    env = dict(os.environ, COLUMNS="200", PYTHONIOENCODING="utf-8")
    return subprocess.run(
        [*ENTRY_POINTS[entry], *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        check=False,
        timeout=60,
    )


def _text(data: bytes) -> str:
    # Read back as a child's output is (text mode: universal newlines).
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline=None).read()


def run(
    *args: str, stdin: str | None = None, entry: str = "script"
) -> subprocess.CompletedProcess[str]:
    """The command line in this process: ``cli.main`` over byte streams standing in for the
    standard ones (what a child adds, the installed entry points, has tests of its own)."""
    out, err = io.BytesIO(), io.BytesIO()
    streams = (
        io.TextIOWrapper(io.BytesIO((stdin or "").encode("utf-8")), encoding="utf-8"),
        io.TextIOWrapper(out, encoding="utf-8", write_through=True),
        io.TextIOWrapper(err, encoding="utf-8", write_through=True),
    )
    saved = sys.stdin, sys.stdout, sys.stderr
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "200"
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        status: object = cli.main(list(args), prog=PROGS[entry])
    except SystemExit as exc:
        status = exc.code
    finally:
        for stream in streams[1:]:
            stream.flush()
        sys.stdin, sys.stdout, sys.stderr = saved
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    code = status if isinstance(status, int) else 0 if status is None else 1
    return subprocess.CompletedProcess(
        list(args), code, _text(out.getvalue()), _text(err.getvalue())
    )


def ok(*args: str, stdin: str | None = None, entry: str = "script") -> str:
    proc = run(*args, stdin=stdin, entry=entry)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def fail(*args: str, status: int = 1, stdin: str | None = None) -> str:
    proc = run(*args, stdin=stdin)
    assert proc.returncode == status, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    return proc.stderr


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def test_the_console_script_is_installed() -> None:
    assert SCRIPT.exists(), "run the tests from the dev environment (make test)"


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("name", LIST_SHAPES)
def test_reduce_json_lists_keeps_first_and_recent_tail(entry: str, name: str) -> None:
    original = fixture(name)
    out = json.loads(ok("reduce", str(FIXTURES / name), *SMALL, entry=entry))
    assert out == [original[0], *original[-3:]]


def test_both_installed_entry_points_print_what_main_prints() -> None:
    args = ("reduce", str(FIXTURES / "openai_request.json"), *SMALL, "--explain")
    printed = ok(*args)
    for entry in sorted(ENTRY_POINTS):
        proc = run_installed(*args, entry=entry)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == printed


def test_python_m_names_itself_in_usage() -> None:
    proc = run_installed("reduce", entry="module")
    assert proc.returncode == 2
    assert "python -m agentstate_reducer" in proc.stderr


@pytest.mark.parametrize("name", ["wrapped.json", "openai_request.json"])
def test_reduce_request_objects_keep_their_other_keys(name: str) -> None:
    original = fixture(name)
    out = json.loads(ok("reduce", str(FIXTURES / name), *SMALL))
    assert list(out) == list(original)
    assert {k: v for k, v in out.items() if k != "messages"} == {
        k: v for k, v in original.items() if k != "messages"
    }
    assert out["messages"] == [original["messages"][0], *original["messages"][-3:]]


def test_reduce_anthropic_request_puts_system_back_at_the_top() -> None:
    original = fixture("anthropic_request.json")
    proc = run("reduce", str(FIXTURES / "anthropic_request.json"), *SMALL, "--start-on", "none")
    out = json.loads(proc.stdout)
    assert out["system"] == original["system"]
    assert all(m["role"] != "system" for m in out["messages"])
    # The top-level system counts as the preserved first message; 3 recent messages remain,
    # opening with the assistant, which Anthropic rejects: exit status 3.
    assert out["messages"] == original["messages"][-3:]
    assert proc.returncode == 3
    assert out["model"] == original["model"]


def test_anthropic_start_on_human_keeps_the_request_valid() -> None:
    original = fixture("anthropic_request.json")
    out = json.loads(
        ok("reduce", str(FIXTURES / "anthropic_request.json"), *SMALL, "--start-on", "human")
    )
    # The cut moves back to the question of the turn it fell in.
    assert out["messages"] == original["messages"][-6:]
    assert out["messages"][0]["role"] == "user"
    # The default for an Anthropic request.
    default = json.loads(ok("reduce", str(FIXTURES / "anthropic_request.json"), *SMALL))
    assert default == out


def test_reduce_jsonl_writes_jsonl() -> None:
    lines = (FIXTURES / "transcript.jsonl").read_text(encoding="utf-8").splitlines()
    out = ok("reduce", str(FIXTURES / "transcript.jsonl"), *SMALL)
    assert out.splitlines() == [lines[0], *lines[-3:]]


def test_reduce_reads_standard_input() -> None:
    text = (FIXTURES / "transcript.jsonl").read_text(encoding="utf-8")
    assert ok("reduce", "-", *SMALL, stdin=text) == ok(
        "reduce", str(FIXTURES / "transcript.jsonl"), *SMALL
    )


def test_output_keeps_indentation_and_unicode() -> None:
    out = ok("reduce", str(FIXTURES / "list.json"), *SMALL)
    assert out.startswith('[\n  {\n    "role": "system"')
    assert "°C" in out


def test_compact_input_gives_compact_output(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(fixture("list.json")), encoding="utf-8")
    out = ok("reduce", str(path), *SMALL)
    assert out.count("\n") == 1
    assert json.loads(out) == json.loads(ok("reduce", str(FIXTURES / "list.json"), *SMALL))


def test_under_threshold_output_equals_input() -> None:
    for name in [*LIST_SHAPES, "wrapped.json", "openai_request.json", "anthropic_request.json"]:
        out = json.loads(ok("reduce", str(FIXTURES / name), "--max-messages", "100"))
        assert out == fixture(name), name


def test_token_mode_fits_target() -> None:
    original = fixture("list.json")
    out = json.loads(
        ok("reduce", str(FIXTURES / "list.json"), "--max-tokens", "200", "--target-tokens", "120")
    )
    total = sum(approximate_token_count(m) for m in out)
    assert total <= 120
    assert sum(approximate_token_count(m) for m in original) > 200
    assert out[0] == original[0]
    assert len(out) < len(original)


def test_no_cascade_keeps_tool_results_of_pruned_calls() -> None:
    proc = run("reduce", str(FIXTURES / "list.json"), *SMALL, "--no-cascade")
    assert proc.returncode == 3  # orphaned results: the output breaks OpenAI's rules
    out = json.loads(proc.stdout)
    tools = [m for m in out if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["call_1", "call_2", "call_3", "call_4"]
    with_cascade = json.loads(ok("reduce", str(FIXTURES / "list.json"), *SMALL))
    assert not [m for m in with_cascade if m["role"] == "tool"]


def test_no_preserve_first_may_prune_index_zero(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    messages = [{"role": "user", "content": f"q{i}"} for i in range(6)]
    path.write_text(json.dumps(messages), encoding="utf-8")
    args = ("reduce", str(path), "--max-messages", "4", "--min-messages", "2")
    assert json.loads(ok(*args)) == [messages[0], *messages[-2:]]
    assert json.loads(ok(*args, "--no-preserve-first")) == messages[-2:]


# -- --explain ----------------------------------------------------------------------


def explain_rows(text: str) -> dict[str, list[str]]:
    """Rows of the --explain table keyed by their index: [role, tokens, result, why, content]."""
    rows = {}
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "role"])
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())  # columns are two spaces apart at least
        rows[cells[0]] = cells[1:]
    return rows


def test_explain_table_gives_every_reason() -> None:
    text = ok("reduce", str(FIXTURES / "list.json"), *SMALL, "--explain")
    rows = explain_rows(text)
    assert list(rows) == [str(i) for i in range(16)]
    assert rows["0"][0] == "system" and rows["0"][2:4] == ["kept", "preserved first"]
    assert rows["1"][2:4] == ["pruned", "in window"]
    assert rows["1"][4] == "What's the weather in Lisbon tomorrow?"
    assert rows["3"][2:4] == ["pruned", "cascade from 2"]
    assert rows["7"][3] == rows["8"][3] == "cascade from 6"
    assert rows["12"][3] == "cascade from 11"
    assert rows["15"][2:4] == ["kept", "recent tail"]
    assert "input: " in text and "JSON list of messages, 16 messages" in text
    assert "count mode: prune above 8 messages, keep the last 4" in text
    original = fixture("list.json")
    before = sum(approximate_token_count(m) for m in original)
    after = sum(approximate_token_count(m) for m in [original[0], *original[-3:]])
    assert f"before: 16 messages, {before} tokens" in text
    assert f"after:   4 messages,  {after} tokens (12 pruned" in text


def test_explain_tokens_column_matches_the_counter() -> None:
    rows = explain_rows(ok("reduce", str(FIXTURES / "list.json"), *SMALL, "--explain"))
    counts = [approximate_token_count(m) for m in fixture("list.json")]
    assert [int(rows[str(i)][1]) for i in range(16)] == counts


def test_explain_no_cascade_and_never_pruned_role() -> None:
    text = run("reduce", str(FIXTURES / "list.json"), *SMALL, "--no-cascade", "--explain").stdout
    rows = explain_rows(text)
    assert rows["3"][2:4] == ["kept", "never-pruned role"]
    assert "no cascade" in text


def test_explain_orphaned_tool_result(tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "tool", "tool_call_id": "gone", "content": "result of a call that is not here"},
    ] + [{"role": "user", "content": f"q{i}"} for i in range(4)]
    path = tmp_path / "orphan.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    text = ok("reduce", str(path), "--max-messages", "3", "--min-messages", "2", "--explain")
    assert explain_rows(text)["1"][2:4] == ["pruned", "orphaned tool result"]


def test_explain_exchange_in_progress(tmp_path: Path) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q0"},
        {"role": "assistant", "content": "a0"},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    ]
    path = write(tmp_path, "progress.json", json.dumps(messages))
    rows = explain_rows(ok("reduce", path, "--max-messages", "4", "--min-messages", "1",
                           "--explain"))
    assert [rows[str(i)][2:4] for i in (5, 6, 7)] == [["kept", "current turn"]] * 3
    assert rows["4"][2:4] == ["pruned", "in window"]


def test_explain_under_threshold() -> None:
    text = ok("reduce", str(FIXTURES / "list.json"), "--explain")
    rows = explain_rows(text)
    assert all(r[2] == "kept" for r in rows.values())
    assert rows["5"][3] == "under threshold"
    assert "(0 pruned)" in text


def test_explain_anthropic_numbers_messages_as_in_the_file() -> None:
    text = ok("reduce", str(FIXTURES / "anthropic_request.json"), *SMALL, "--explain")
    rows = explain_rows(text)
    assert list(rows) == ["-", *(str(i) for i in range(14))]
    assert rows["-"][0] == "system" and rows["-"][2] == "kept"
    # The tool results ride in user messages; they go with the assistant turn that called.
    assert rows["2"][0] == "human" and rows["2"][3] == "cascade from 1"
    assert "Anthropic Messages request" in text


def test_explain_start_on_human() -> None:
    text = ok(
        "reduce", str(FIXTURES / "anthropic_request.json"), *SMALL, "--start-on", "human",
        "--explain",
    )
    rows = explain_rows(text)
    assert rows["7"][2:4] == ["pruned", "in window"]
    assert rows["8"][2:4] == ["kept", "recent tail"]  # the question of the turn cut into
    assert "over: 7 messages kept, over the budget of 8" not in text
    default = ok("reduce", str(FIXTURES / "anthropic_request.json"), *SMALL, "--explain")
    assert "start_on human: the default for an Anthropic, Gemini or Bedrock request" in default
    assert explain_rows(default) == rows


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("list.json", "JSON list of messages"),
        ("wrapped.json", 'JSON object with a "messages" list'),
        ("openai_request.json", "OpenAI chat-completions request"),
        ("anthropic_request.json", "Anthropic Messages request"),
        ("transcript.jsonl", "JSONL"),
        ("langchain_messages_to_dict.json", "JSON list of messages (LangChain messages_to_dict)"),
        ("langchain_dumpd.json", "JSON list of messages (LangChain dumpd)"),
    ],
)
def test_explain_names_the_detected_shape(name: str, label: str) -> None:
    first = ok("reduce", str(FIXTURES / name), "--explain").splitlines()[0]
    assert first.startswith(f"input: {FIXTURES / name}: {label}")


def test_explain_with_out_writes_the_file_too(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    text = ok("reduce", str(FIXTURES / "list.json"), *SMALL, "--explain", "--out", str(out))
    assert "cascade from 2" in text
    assert len(json.loads(out.read_text(encoding="utf-8"))) == 4


def test_explain_checks_provider_rules_of_input_and_output() -> None:
    path = str(FIXTURES / "anthropic_request.json")
    proc = run("reduce", path, *SMALL, "--start-on", "none", "--explain")
    assert proc.returncode == 3
    text = proc.stdout
    assert "anthropic rules, input: OK" in text
    assert "anthropic rules, output: 1 problem\n  message 11: " in text
    assert "[first-not-user]\n    fix: " in text
    fixed = ok("reduce", path, *SMALL, "--explain")
    assert "anthropic rules, output: OK" in fixed


def test_explain_reports_a_broken_input(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "tool", "tool_call_id": "call_9", "content": "from nowhere"},
        {"role": "assistant", "content": "a"},
    ]
    text = ok("reduce", write(tmp_path, "orphan.json", json.dumps(messages)), "--explain")
    assert "openai rules, input: 1 problem\n  message 1: " in text
    assert "[orphan-result]" in text
    # The plan removes an orphaned result even under the threshold, so the output is valid.
    assert "openai rules, output: OK" in text


def test_provider_option_overrides_the_detected_shape() -> None:
    path = str(FIXTURES / "list.json")
    assert "openai rules, output: OK" in ok("reduce", path, *SMALL, "--explain")
    proc = run("reduce", path, *SMALL, "--explain", "--provider", "anthropic", "--start-on", "none")
    assert proc.returncode == 3
    assert "anthropic rules, output: 1 problem" in proc.stdout
    assert "[first-not-user]" in proc.stdout
    text = ok("reduce", path, *SMALL, "--explain", "--provider", "anthropic")
    assert "anthropic rules, output: OK" in text and "start_on human: the default" in text


def test_reduce_warns_on_stderr_when_the_output_breaks_the_rules() -> None:
    path = str(FIXTURES / "anthropic_request.json")
    proc = run("reduce", path, *SMALL, "--start-on", "none")
    assert proc.returncode == 3
    assert json.loads(proc.stdout)["messages"][0]["role"] == "assistant"
    assert proc.stderr.startswith("agentstate-reducer: warning: the output breaks anthropic rules")
    assert "[first-not-user]; fix: " in proc.stderr
    default = run("reduce", path, *SMALL)
    assert (default.returncode, default.stderr) == (0, "")


def test_trim_that_splits_a_pair_is_flagged() -> None:
    path = str(FIXTURES / "list.json")
    original = fixture("list.json")
    budget = str(sum(approximate_token_count(m) for m in original[12:]))
    proc = run("trim", path, "--max-tokens", budget, *TAIL_ONLY, "--no-keep-tool-pairs")
    assert proc.returncode == 3
    assert "message 12: tool result answers 'call_4'" in proc.stderr
    assert "[orphan-result]" in proc.stderr
    text = run(
        "trim", path, "--max-tokens", budget, *TAIL_ONLY, "--no-keep-tool-pairs", "--explain"
    ).stdout
    assert "openai rules, output: 1 problem\n  message 12: " in text
    assert run("trim", path, "--max-tokens", budget, *TAIL_ONLY).stderr == ""


# -- --out ----------------------------------------------------------------------------


def test_out_writes_atomically_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "reduced.json"
    out.write_text("old", encoding="utf-8")
    out.chmod(0o640)
    assert ok("reduce", str(FIXTURES / "list.json"), *SMALL, "--out", str(out)) == ""
    assert len(json.loads(out.read_text(encoding="utf-8"))) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reduced.json"]
    assert out.stat().st_mode & 0o777 == 0o640


def test_out_replaces_a_symlink_itself_never_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    out = tmp_path / "reduced.json"
    out.symlink_to(victim)
    assert ok("reduce", str(FIXTURES / "list.json"), *SMALL, "--out", str(out)) == ""
    assert victim.read_text(encoding="utf-8") == "precious"
    assert not out.is_symlink() and len(json.loads(out.read_text(encoding="utf-8"))) == 4


def test_bad_input_leaves_out_untouched(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"role": "user"', encoding="utf-8")
    out = tmp_path / "reduced.json"
    out.write_text("precious", encoding="utf-8")
    fail("reduce", str(bad), "--out", str(out))
    assert out.read_text(encoding="utf-8") == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "reduced.json"]


def test_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "reduced.json"
    out.write_text("precious", encoding="utf-8")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli_transcript.os, "replace", broken_replace)
    with pytest.raises(SystemExit) as exc:
        cli.main(["reduce", str(FIXTURES / "list.json"), "--out", str(out)])
    assert exc.value.code == 1
    assert out.read_text(encoding="utf-8") == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reduced.json"]


def test_out_into_a_missing_directory_fails(tmp_path: Path) -> None:
    err = fail("reduce", str(FIXTURES / "list.json"), "--out", str(tmp_path / "no" / "x.json"))
    assert "cannot write --out" in err


# -- bad input ------------------------------------------------------------------------


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_invalid_json_reports_line_and_column(tmp_path: Path) -> None:
    text = '[\n  {"role": "user", "content": "hi"},\n  {"role" "ai"}\n]\n'
    path = write(tmp_path, "bad.json", text)
    err = fail("reduce", path)
    assert "invalid JSON at line 3, column 11" in err
    assert "bad.json" in err


def test_invalid_jsonl_reports_the_line(tmp_path: Path) -> None:
    good = json.dumps({"role": "user", "content": "hi"})
    path = write(tmp_path, "bad.jsonl", f"{good}\n{good}\n{{oops}}\n{good}\n")
    assert "invalid JSON at line 3, column 2" in fail("reduce", path)


def test_message_without_a_role_names_its_index(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "a"}, {"content": "b"}]
    path = write(tmp_path, "norole.json", json.dumps(messages))
    err = fail("reduce", path)
    assert "message 1 has no role" in err
    assert "'content': 'b'" in err


def test_jsonl_message_without_a_role_names_index_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "norole.jsonl", '{"role": "user", "content": "a"}\n\n{"content": "b"}\n')
    assert "message 1 (line 3) has no role" in fail("reduce", path)


def test_anthropic_message_index_is_the_files(tmp_path: Path) -> None:
    doc = {"system": "s", "messages": [{"role": "user", "content": "a"}, {"content": "b"}]}
    path = write(tmp_path, "a.json", json.dumps(doc))
    assert "message 1 has no role" in fail("count", path)


def test_a_message_that_is_not_an_object(tmp_path: Path) -> None:
    path = write(tmp_path, "s.json", json.dumps([{"role": "user", "content": "a"}, "hello"]))
    assert "message 1 is a str ('hello')" in fail("reduce", path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "is empty"),
        ("  \n", "is empty"),
        ("42", "got a JSON int"),
        ('{"model": "x"}', "got an object with keys ['model']"),
        ('{"messages": "hi"}', '"messages" must be a list'),
    ],
)
def test_unusable_documents(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in fail("reduce", write(tmp_path, "x.json", text))


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('[{"role": "user", "content": "caf\xe9"}]'.encode("latin-1"))
    assert "the byte at offset 33 is not UTF-8" in fail("reduce", str(path))


def test_missing_file() -> None:
    assert "cannot read 'no-such-file.json'" in fail("reduce", "no-such-file.json")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--min-messages", "30"], "--min-messages (30) must be <= --max-messages (20)"),
        (["--target-tokens", "10"], "--target-tokens=10 needs --max-tokens"),
        (["--max-tokens", "10", "--target-tokens", "20"], "must be <= --max-tokens (10)"),
        (["--start-on", "ai"], "only start the kept tail on a human turn"),
        (["--max-messages", "-1"], "expected a number >= 0"),
        (["--counter", "words"], "not in the model registry; known families: gpt-5"),
    ],
)
def test_bad_options_exit_2(args: list[str], expected: str) -> None:
    err = fail("reduce", str(FIXTURES / "list.json"), *args, status=2)
    assert expected in err
    assert "_messages" not in err and "_tokens" not in err  # flags, not ReducerConfig fields


def test_max_messages_alone_derives_min_messages() -> None:
    text = ok("reduce", str(FIXTURES / "list.json"), "--max-messages", "4", "--explain")
    assert "count mode: prune above 4 messages, keep the last 2" in text
    assert "count mode: prune above 20 messages, keep the last 10" in ok(
        "reduce", str(FIXTURES / "list.json"), "--explain"
    )
    assert "half of --max-messages" in ok("reduce", "--help")


def test_token_mode_wins_over_count_flags_with_a_warning() -> None:
    proc = run("reduce", str(FIXTURES / "list.json"), "--max-tokens", "100",
               "--max-messages", "4")
    assert proc.returncode == 0
    assert "warning: --max-tokens and --max-messages both given: token mode wins" in proc.stderr
    alone = run("reduce", str(FIXTURES / "list.json"), "--max-tokens", "100")
    assert alone.stderr == "" and alone.stdout == proc.stdout


@pytest.mark.parametrize("alias", ["user", "human", "HumanMessage"])
def test_start_on_takes_role_aliases_in_every_command(alias: str) -> None:
    path = str(FIXTURES / "list.json")
    assert ok("reduce", path, *SMALL, "--start-on", alias) == ok(
        "reduce", path, *SMALL, "--start-on", "human"
    )
    assert ok("trim", path, "--max-tokens", "120", "--start-on", alias) == ok(
        "trim", path, "--max-tokens", "120", "--start-on", "human"
    )


def long_history(tmp_path: Path, n: int) -> str:
    path = tmp_path / "long.json"
    roles = ["user", "assistant"]
    path.write_text(json.dumps([{"role": "system", "content": "be brief"}] + [
        {"role": roles[i % 2], "content": f"message {i}"} for i in range(1, n)
    ]))
    return str(path)


@pytest.mark.parametrize("command", [["reduce", "--max-messages", "20"], ["trim", "--max-tokens",
                                                                          "100"]])
def test_explain_on_a_long_input_shows_a_head_a_tail_and_a_summary(
    tmp_path: Path, command: list[str]
) -> None:
    path = long_history(tmp_path, 100)
    name, *options = command
    text = ok(name, path, *options, "--explain")
    rows = explain_rows(text)
    assert list(rows)[:10] == [str(i) for i in range(10)]
    assert list(rows)[-20:] == [str(i) for i in range(80, 100)]
    hidden = re.search(r"… 70 more messages \((\d+) (pruned|trimmed)(?:, (\d+) kept)?\); "
                       r"--all shows every one", text)
    assert hidden is not None, text
    assert int(hidden[1]) + int(hidden[3] or 0) == 70
    assert list(explain_rows(ok(name, path, *options, "--explain", "--all"))) == [
        str(i) for i in range(100)
    ]
    short = long_history(tmp_path, 40)
    assert len(explain_rows(ok(name, short, *options, "--explain"))) == 40


# -- trim ----------------------------------------------------------------------------


def longest_tail(messages: list[Any], budget: int) -> list[Any]:
    counts = [approximate_token_count(m) for m in messages]
    start = len(messages)
    while start > 0 and sum(counts[start - 1 :]) <= budget:
        start -= 1
    return messages[start:]


def test_trim_keeps_the_longest_tail_within_budget() -> None:
    original = fixture("list.json")
    out = json.loads(ok("trim", str(FIXTURES / "list.json"), "--max-tokens", "120", *TAIL_ONLY))
    assert out == longest_tail(original, 120)
    assert 3 <= len(out) < len(original)


@pytest.mark.parametrize("name", ["transcript.jsonl", "langchain_dumpd.json", "wrapped.json"])
def test_trim_writes_the_shape_it_read(name: str) -> None:
    path = str(FIXTURES / name)
    out = ok("trim", path, "--max-tokens", "120", *TAIL_ONLY)
    if name.endswith(".jsonl"):
        lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
        messages = [json.loads(line) for line in lines]
        assert out.splitlines() == lines[-len(longest_tail(messages, 120)) :]
    elif name == "wrapped.json":
        original = fixture(name)
        tail = longest_tail(original["messages"], 120)
        assert json.loads(out) == {**original, "messages": tail}
    else:
        assert json.loads(out) == longest_tail(fixture(name), 120)


def test_trim_anthropic_include_system_and_start_on() -> None:
    original = fixture("anthropic_request.json")
    out = json.loads(
        ok("trim", str(FIXTURES / "anthropic_request.json"), "--max-tokens", "160",
           "--include-system", "--start-on", "human")
    )
    assert out["system"] == original["system"]
    assert out["messages"] == original["messages"][8:]
    assert out["messages"][0]["role"] == "user"


def test_trim_keeps_a_requests_system_prompt_by_default() -> None:
    for name in ("anthropic_request.json", "openai_request.json"):
        path = str(FIXTURES / name)
        out = json.loads(ok("trim", path, "--max-tokens", "60"))
        assert out == json.loads(ok("trim", path, "--max-tokens", "60", "--include-system"))
        assert ("system" in out) if name.startswith("anthropic") else (
            out["messages"][0]["role"] == "system")
    assert "include_system" in ok("trim", path, "--max-tokens", "60", "--explain")
    # --strategy first keeps the start anyway, and include_system does not apply to it.
    ok("trim", path, "--max-tokens", "60", "--strategy", "first")


def test_trim_without_include_system_drops_the_anthropic_system() -> None:
    path = str(FIXTURES / "anthropic_request.json")
    out = json.loads(ok("trim", path, "--max-tokens", "60", "--no-include-system"))
    assert "system" not in out
    # start_on human is the default for an Anthropic request.
    assert out["messages"] == fixture("anthropic_request.json")["messages"][-2:]
    proc = run("trim", path, "--max-tokens", "60", "--no-include-system", "--start-on", "none")
    assert proc.returncode == 3
    assert json.loads(proc.stdout)["messages"] == fixture("anthropic_request.json")["messages"][-3:]


def test_trim_keeps_tool_pairs_unless_told_not_to() -> None:
    path = str(FIXTURES / "list.json")
    original = fixture("list.json")
    # A budget that reaches back to the tool result at 12 but not to its call at 11.
    budget = str(sum(approximate_token_count(m) for m in original[12:]))
    assert json.loads(ok("trim", path, "--max-tokens", budget, *TAIL_ONLY)) == original[13:]
    split = json.loads(
        run("trim", path, "--max-tokens", budget, *TAIL_ONLY, "--no-keep-tool-pairs").stdout
    )
    assert split == original[12:]
    assert split[0]["role"] == "tool"


def long_transcript(tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
    long = " ".join(f"Sentence number {i} is here." for i in range(30))
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": long, "id": "u1"},
        {"role": "assistant", "content": "ok", "id": "a1"},
        {"role": "user", "content": "next", "id": "u2"},
    ]
    return write(tmp_path, "long.json", json.dumps(messages)), messages


def test_trim_allow_partial_keeps_the_end_of_the_edge_message(tmp_path: Path) -> None:
    path, messages = long_transcript(tmp_path)
    args = ("trim", path, "--max-tokens", "60", "--include-system", "--allow-partial")
    out = json.loads(ok(*args, "--split-on", "sentence"))
    assert [m.get("id") for m in out] == [None, "u1", "a1", "u2"]
    text = out[1]["content"]
    assert messages[1]["content"].endswith(text)
    assert text.startswith("Sentence number") and text.endswith("29 is here.")
    assert sum(approximate_token_count(m) for m in out) <= 60
    words = json.loads(ok(*args, "--split-on", "word"))[1]["content"]
    assert messages[1]["content"].endswith(words)
    assert len(words) >= len(text)  # words are finer pieces than sentences
    rows = explain_rows(ok(*args, "--split-on", "sentence", "--explain"))
    kept_tokens = approximate_token_count(out[1])
    total = approximate_token_count(messages[1])
    assert rows["1"][1:3] == [f"{kept_tokens}/{total}", "partial"]
    assert rows["1"][3].startswith("Sentence number")


def test_trim_explain_reports_the_selection_by_index_even_with_shared_ids(
    tmp_path: Path,
) -> None:
    # The partial copy shares its id with the kept message after it: only the input
    # index trim_messages selected tells which message was cut.
    long = " ".join(f"Sentence number {i} is here." for i in range(30))
    messages = [
        {"role": "user", "content": long, "id": "dup"},
        {"role": "assistant", "content": "ok", "id": "dup"},
    ]
    path = write(tmp_path, "dup.json", json.dumps(messages))
    args = ("trim", path, "--max-tokens", "40", *TAIL_ONLY, "--allow-partial")
    rows = explain_rows(ok(*args, "--split-on", "sentence", "--explain"))
    assert [rows["0"][2], rows["1"][2]] == ["partial", "kept"]


def test_trim_explain_table() -> None:
    text = ok("trim", str(FIXTURES / "list.json"), "--max-tokens", "120", *TAIL_ONLY, "--explain")
    rows = explain_rows(text)
    tail = longest_tail(fixture("list.json"), 120)
    n = len(tail)
    assert [rows[str(i)][2] for i in range(16)] == ["trimmed"] * (16 - n) + ["kept"] * n
    assert "trim: keep the last messages within 120 tokens (approximate counter)" in text
    kept = sum(approximate_token_count(m) for m in tail)
    assert f"after:  {n:>2} messages, {kept:>3} tokens ({16 - n} trimmed, 0 partial" in text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--max-tokens", "50", "--strategy", "first", "--include-system"], "--include-system"),
        (["--max-tokens", "50", "--start-on", "nobody"], "'nobody'"),
        (["--max-tokens", "50", "--end-on", "robot"], "'robot'"),
        ([], "--max-tokens"),
    ],
)
def test_trim_bad_options_exit_2(args: list[str], expected: str) -> None:
    assert expected in fail("trim", str(FIXTURES / "list.json"), *args, status=2)


# -- count --------------------------------------------------------------------------


def test_count_prints_per_message_and_total() -> None:
    text = ok("count", str(FIXTURES / "wrapped.json"))
    messages = fixture("wrapped.json")["messages"]
    counts = [approximate_token_count(m) for m in messages]
    lines = text.splitlines()
    assert lines[0].endswith('JSON object with a "messages" list, 16 messages')
    header = lines[2].split()
    assert header[:3] == ["#", "role", "approximate"]
    column = header.index("approximate") - 1
    for i, count in enumerate(counts):
        cells = lines[3 + i].split()
        assert cells[0] == str(i)
        assert int(cells[column + 1]) == count
    total = next(line for line in lines if line.split()[:1] == ["total"])
    assert int(total.split()[1]) == sum(counts)


def run_without_tiktoken(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in a child where tiktoken cannot be imported (no [tokens] extra)."""
    code = (
        "import sys; sys.modules['tiktoken'] = None; "
        "from agentstate_reducer.cli import main; sys.exit(main())"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False,
        timeout=60,
    )


def test_count_without_tiktoken_says_so() -> None:
    proc = run_without_tiktoken("count", str(FIXTURES / "list.json"))
    assert proc.returncode == 0, proc.stderr
    assert "o200k_base: not available" in proc.stdout
    assert "cl100k_base: not available" in proc.stdout
    assert 'pip install "agentstate-reducer[tokens]"' in proc.stdout
    assert proc.stdout.splitlines()[2].split()[2:] == ["approximate", "content"]


def test_counter_tiktoken_without_tiktoken_exits_2() -> None:
    proc = run_without_tiktoken("reduce", str(FIXTURES / "list.json"), "--counter", "tiktoken")
    assert proc.returncode == 2
    assert "--counter 'tiktoken' is not available" in proc.stderr
    assert 'pip install "agentstate-reducer[tokens]"' in proc.stderr


def test_count_with_tiktoken_gives_exact_counts() -> None:
    pytest.importorskip("tiktoken")
    from agentstate_reducer import resolve_token_counter

    messages = fixture("list.json")
    lines = ok("count", str(FIXTURES / "list.json")).splitlines()
    assert lines[2].split()[:5] == ["#", "role", "approximate", "o200k_base", "cl100k_base"]
    total = next(line for line in lines if line.split()[:1] == ["total"]).split()
    for column, name in ((3, "o200k_base"), (4, "cl100k_base")):
        exact = resolve_token_counter(name)
        assert int(total[column - 1]) == sum(exact(m) for m in messages)
        assert [int(line.split()[column]) for line in lines[3:19]] == [exact(m) for m in messages]


@pytest.mark.parametrize("name", ["gpt-4o", "cl100k_base", "claude-sonnet-4-5", "gemini-2.5-pro"])
def test_reduce_takes_a_model_or_encoding_name_as_counter(name: str) -> None:
    pytest.importorskip("tiktoken")
    from agentstate_reducer import resolve_token_counter

    counter = resolve_token_counter(name)
    out = json.loads(
        ok("reduce", str(FIXTURES / "list.json"), "--max-tokens", "200", "--counter", name)
    )
    assert sum(counter(m) for m in out) <= 200 < sum(counter(m) for m in fixture("list.json"))


def test_reduce_token_mode_with_tiktoken() -> None:
    pytest.importorskip("tiktoken")
    from agentstate_reducer import resolve_token_counter

    exact = resolve_token_counter("tiktoken")
    out = json.loads(
        ok("reduce", str(FIXTURES / "list.json"), "--max-tokens", "200", "--counter", "tiktoken")
    )
    assert sum(exact(m) for m in out) <= 200 < sum(exact(m) for m in fixture("list.json"))


# -- in-process invariants --------------------------------------------------------------

_roles = st.sampled_from(["user", "assistant", "system"])
_message = st.fixed_dictionaries(
    {"role": _roles, "content": st.text(max_size=20)},
    optional={"id": st.uuids().map(str)},
)
_shapes = st.sampled_from(["list", "object", "openai", "anthropic", "jsonl"])


def _render(shape: str, messages: list[dict[str, Any]]) -> str:
    if shape == "jsonl":
        return "".join(json.dumps(m) + "\n" for m in messages)
    if shape == "list":
        return json.dumps(messages, indent=1)
    if shape == "object":
        return json.dumps({"messages": messages, "meta": 1})
    if shape == "openai":
        return json.dumps({"model": "m", "messages": messages})
    return json.dumps({"system": "be kind", "messages": messages}, indent="\t")


def _survivors(shape: str, text: str) -> list[Any]:
    if shape == "jsonl":
        return [json.loads(line) for line in text.split("\n") if line]
    document = json.loads(text)
    return document if shape == "list" else document["messages"]  # type: ignore[no-any-return]


@settings(max_examples=150, deadline=None)
@given(shape=_shapes, messages=st.lists(_message, max_size=12), cap=st.integers(0, 14))
def test_output_is_the_reducers_survivors_in_the_input_shape(
    shape: str, messages: list[dict[str, Any]], cap: int
) -> None:
    from agentstate_reducer import MessageReducer

    if shape == "jsonl" and not messages:
        return  # an empty JSONL file is an empty file, which is refused
    text = _render(shape, messages)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        transcript = cli.load(path)
    assert transcript.shape == shape
    # Nothing pruned: the same document comes back.
    same = cli.dump(transcript, list(transcript.messages))
    assert _survivors(shape, same) == messages
    if shape != "jsonl":
        assert json.loads(same) == json.loads(text)
    reducer = MessageReducer(min_messages=min(cap, 2), max_messages=cap)
    dumped = cli.dump(transcript, reducer.reduce(transcript.messages).surviving)
    system = [{"role": "system", "content": "be kind"}] if shape == "anthropic" else []
    expected = reducer.reduce(system + messages).surviving[len(system) :]
    assert _survivors(shape, dumped) == expected
    if shape == "anthropic":
        assert json.loads(dumped)["system"] == "be kind"


def test_repair_dangling_calls_adds_a_synthetic_result(tmp_path: Path) -> None:
    call = {"id": "call_9", "type": "function", "function": {"name": "book", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "book it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "never mind"},
    ]
    path = write(tmp_path, "dead.json", json.dumps(messages))
    proc = run("reduce", path)
    assert proc.returncode == 3 and "[unanswered-call]" in proc.stderr
    out = json.loads(ok("reduce", path, "--repair-dangling-calls"))
    assert out[3] == {"role": "tool", "tool_call_id": "call_9",
                      "content": "The tool call was interrupted; no result was recorded."}
    assert out[:3] + out[4:] == messages
    text = ok("reduce", path, "--repair-dangling-calls", "--explain")
    added = explain_rows(text)["+"]
    assert (added[0], added[2], added[3]) == ("tool", "added", "repair: no result recorded")
    assert "1 synthetic result added" in text and "openai rules, output: OK" in text


def test_explain_says_why_the_survivors_are_over_the_budget(tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s"},
                                      {"role": "user", "content": "go"}]
    for i in range(5):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": f"r{i}"}]
    path = write(tmp_path, "turn.json", json.dumps(messages))
    text = ok("reduce", path, *SMALL, "--explain")
    rows = explain_rows(text)
    assert all(r[2:4] == ["kept", "current turn"] for k, r in rows.items() if k != "0")
    assert ("over: 12 messages kept, over the budget of 8: the current turn is kept while "
            "it has tool calls (in token mode its question and latest step at the least), and "
            "the turn alone is over") in text


def test_trim_puts_a_partial_system_prompt_back_on_top(tmp_path: Path) -> None:
    # The reader writes trim's partial copy of a top-level system prompt back in its key.
    system = "first line of the prompt\nsecond line of the prompt\n" + "a long third line " * 8
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"model": "c", "system": system, "messages": [
        {"role": "user", "content": "hello there, how are you today"},
        {"role": "assistant", "content": "fine"},
    ]}))
    out = json.loads(ok("trim", str(path), "--max-tokens", "12", "--strategy", "first",
                        "--allow-partial"))
    assert out == {"model": "c", "system": "first line of the prompt\n", "messages": []}


# -- --turn-ladder ------------------------------------------------------------------


def _long_turn(steps: int) -> list[dict[str, Any]]:
    """A system prompt, a question, then ``steps`` calls of ``step`` with ~500-token results."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "work through the steps"},
                                 {"role": "user", "content": "please work through the steps"}]
    for k in range(steps):
        arguments = json.dumps({"query": f"0.{k}"})
        call = {"id": f"c{k}", "type": "function",
                "function": {"name": "step", "arguments": arguments}}
        out += [{"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{k}", "content": "lorem ipsum " * 250}]
    return out


LADDER = ["--max-tokens", "3000", "--target-tokens", "2000", "--turn-ladder"]


def _laddered(messages: list[Any]) -> Any:
    from agentstate_reducer import MessageReducer, ReducerConfig

    config = ReducerConfig(max_tokens=3000, target_tokens=2000, token_counter="approximate",
                           turn_ladder=True, dedupe_on_prune=False)
    return MessageReducer(config=config).reduce(messages)


def test_turn_ladder_writes_what_reduce_returns(tmp_path: Path) -> None:
    messages = _long_turn(120)
    path = write(tmp_path, "turn.json", json.dumps(messages))
    result = _laddered(messages)
    assert json.loads(ok("reduce", path, *LADDER)) == result.surviving
    plain = json.loads(ok("reduce", path, *LADDER[:-1]))
    assert not any("[turn note: " in str(m.get("content")) for m in plain)


def test_explain_shows_what_the_turn_ladder_did(tmp_path: Path) -> None:
    messages = _long_turn(120)
    path = write(tmp_path, "turn.json", json.dumps(messages))
    result = _laddered(messages)
    assert result.turn_steps_dropped and result.turn_results_cleared
    text = ok("reduce", path, *LADDER, "--explain", "--all")
    assert (f"turn ladder: cleared {result.turn_results_cleared} older results and dropped "
            f"{result.turn_steps_dropped} oldest steps (one note stands for them)") in text
    rows = explain_rows(text)
    note = rows["+"]
    assert note[2:4] == ["added", f"turn note: {result.turn_steps_dropped} steps dropped"]
    assert note[4].startswith("[turn note: ")
    latest = rows[str(len(messages) - 1)]
    assert latest[2] == "kept"  # the latest step whole
    cleared = rows[str(len(messages) - 3)]
    assert cleared[2:4] == ["cleared", "turn ladder"] and "/" in cleared[1]
    after = sum(approximate_token_count(m) for m in result.surviving)
    assert f"after:  {len(result.surviving):>3} messages, {after:>5} tokens" in text
    assert "openai rules, output: OK" in text


def test_explain_says_when_the_ladder_had_nothing_to_do(tmp_path: Path) -> None:
    path = write(tmp_path, "turn.json", json.dumps(_long_turn(3)))
    text = ok("reduce", path, *LADDER, "--explain")
    assert "turn ladder: nothing to do (the current turn fits max_tokens)" in text


def test_turn_ladder_needs_token_mode() -> None:
    err = fail("reduce", str(FIXTURES / "list.json"), "--turn-ladder", status=2)
    assert "--turn-ladder needs --max-tokens" in err
