"""The CLI on hostile input (issue 25 item 7): one line on stderr, exit 1, never a
traceback or the transcript's text; ``--out`` is written private (0600)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from agentstate_reducer.cli import main

SECRET = "card 4111-1111"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv), prog="agentstate-reducer")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(SECRET),  # a top-level JSON string
        '[{"role": "user", "content": "x", "n": ' + "9" * 100_000 + "}]",
        "[" * 990 + "]" * 990,
        '[{"role": "user", "content": "x", "extra": ' + "[" * 990 + "]" * 990 + "}]",
    ],
    ids=["string", "huge-int", "deep", "deep-field"],
)
@pytest.mark.parametrize("command", ["reduce", "trim", "count"])
def test_hostile_input_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, command: str
) -> None:
    path = tmp_path / "in.json"
    path.write_text(text)
    extra = ["--max-tokens", "5"] if command == "trim" else []
    code, _, err = run(capsys, command, str(path), *extra)
    assert code == 1
    assert err.count("\n") == 1 and "Traceback" not in err
    assert SECRET not in err


def test_a_lone_surrogate_is_written_back_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.json"
    path.write_text('[{"role": "user", "content": "a\\ud800b"}]')
    code, out, err = run(capsys, "reduce", str(path))
    assert code == 0, err
    assert json.loads(out) == [{"role": "user", "content": "a\ud800b"}]  # lossless


def test_out_is_written_private(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps([{"role": "user", "content": SECRET}]))
    target = tmp_path / "out.json"
    old = os.umask(0o022)
    try:
        code, _, err = run(capsys, "reduce", str(path), "--out", str(target))
    finally:
        os.umask(old)
    assert code == 0, err
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
