"""The command line on large inputs: a status on a terminal, ``count`` row by row, and a
quiet end when the reader closes the pipe."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentstate_reducer import cli
from agentstate_reducer.cli import commands, progress
from agentstate_reducer.tokens import approximate_token_count

SCRIPT = Path(sys.executable).parent / "agentstate-reducer"


class _Terminal(io.TextIOWrapper):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _transcript(tmp_path: Path, n: int) -> Path:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(n // 2):
        messages.append({"role": "user", "content": f"question {i} " + "lorem ipsum " * (i % 7)})
        messages.append({"role": "assistant", "content": f"answer {i}"})
    path = tmp_path / "big.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    return path


def _run(
    args: list[str], *, terminal_err: bool, terminal_out: bool = False
) -> tuple[int, str, str]:
    out, err = io.BytesIO(), io.BytesIO()
    stdout = (_Terminal if terminal_out else io.TextIOWrapper)(
        out, encoding="utf-8", write_through=True
    )
    stderr = (_Terminal if terminal_err else io.TextIOWrapper)(
        err, encoding="utf-8", write_through=True
    )
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr
    try:
        status = cli.main(args, prog="agentstate-reducer")
    finally:
        stdout.flush()
        stderr.flush()
        sys.stdout, sys.stderr = saved
    return status, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8")


@pytest.fixture
def small_large(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make 200 messages "large", and every count an update."""
    monkeypatch.setattr(progress, "LARGE_MESSAGES", 200)
    monkeypatch.setattr(progress, "_EVERY", 0.0)
    yield


@pytest.mark.parametrize(
    "args",
    [
        ["reduce", "--max-messages", "40"],
        ["reduce", "--max-messages", "40", "--explain"],
        ["trim", "--max-tokens", "300", "--explain"],
        ["count"],
    ],
)
def test_a_large_input_shows_a_status_on_a_terminal_and_nothing_elsewhere(
    small_large: None, tmp_path: Path, args: list[str]
) -> None:
    path = str(_transcript(tmp_path, 400))
    status, out, err = _run([*args, path], terminal_err=True)
    plain_status, plain_out, plain_err = _run([*args, path], terminal_err=False)
    assert (status, out) == (plain_status, plain_out)  # standard output is the same
    assert plain_err == ""
    assert err.startswith("\ragentstate-reducer: ")
    assert err.endswith("\r\x1b[K")  # the line is erased at the end
    shown = [part.removesuffix("\x1b[K") for part in err.split("\r") if part.strip("\x1b[K")]
    assert any("checking 401 messages" in part for part in shown), shown
    if args[0] == "count":
        assert "agentstate-reducer: counted 401 of 401 messages" in shown
    else:
        assert any(part.endswith(("planning 401 messages", "trimming 401 messages"))
                   for part in shown), shown


def test_a_small_input_shows_no_status(tmp_path: Path) -> None:
    path = str(_transcript(tmp_path, 40))
    _, _, err = _run(["count", path], terminal_err=True)
    assert err == ""


def test_count_on_a_terminal_prints_rows_not_a_status(small_large: None, tmp_path: Path) -> None:
    path = str(_transcript(tmp_path, 400))
    _, _, err = _run(["count", path], terminal_err=True, terminal_out=True)
    assert "counted" not in err


def test_count_prints_each_row_before_the_next_message_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _transcript(tmp_path, 60)
    n = len(json.loads(path.read_text(encoding="utf-8")))
    out = io.BytesIO()
    seen: list[int] = []

    def counter(message: Any) -> int:
        seen.append(out.getvalue().count(b"\n"))  # lines printed when this one is counted
        return approximate_token_count(message)

    monkeypatch.setattr(commands, "_COUNTERS", ("approximate",))
    monkeypatch.setattr(commands, "_counter", lambda name: counter)
    saved = sys.stdout
    stdout = sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    try:
        assert cli.main(["count", str(path)], prog="agentstate-reducer") == 0
    finally:
        sys.stdout = saved
    # The input line, a blank, the header: then one row per message already counted.
    assert seen == [3 + i for i in range(n)]
    lines = out.getvalue().decode("utf-8").splitlines()
    stdout.close()
    assert lines[-1].split() == ["total", str(sum(approximate_token_count(m)
                                                  for m in json.loads(path.read_text())))]


@pytest.mark.slow
@pytest.mark.parametrize("command", [["count"], ["reduce", "--max-messages", "5000"]])
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(
    tmp_path: Path, command: list[str]
) -> None:
    path = _transcript(tmp_path, 4_000)  # far more output than a pipe holds
    with subprocess.Popen(
        [str(SCRIPT), *command, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()  # as `| head -1` does
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 0
    assert err == b""
