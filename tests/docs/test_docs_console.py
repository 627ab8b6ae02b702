"""Every ``$ agentstate-reducer ...`` block of README.md and docs/*.md prints what it shows.

A block is a ```` ```console ```` fence whose first line is ``$ `` and a command (continued
with ``\\``), then the output. A line ``...`` in the shown output stands for any lines
(the head of a table left out). The command runs from the repository root with the
console script of the environment running the tests, 100 columns wide.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```console\n(?P<body>\$ .*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, list[str], str]]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            lines = match["body"].splitlines()
            command = [lines[0][2:]]
            while command[-1].endswith("\\"):
                command[-1] = command[-1][:-1]
                command.append(lines[len(command)])
            line = text.count("\n", 0, match.start()) + 1
            shown = "\n".join(lines[len(command):])
            found.append((f"{doc.relative_to(ROOT)}:{line}", shlex.split(" ".join(command)), shown))
    return found


BLOCKS = _blocks()


def _matches(shown: str, printed: str) -> bool:
    """``printed`` equals ``shown``, where a ``...`` line of ``shown`` stands for any lines."""
    pattern = "".join(
        r"(?:.*\n)*?" if line == "..." else re.escape(line) + r"\n"
        for line in shown.rstrip("\n").splitlines()
    )
    return re.fullmatch(pattern, printed.rstrip("\n") + "\n") is not None


def test_the_docs_show_commands() -> None:
    assert len(BLOCKS) >= 5, [where for where, _, _ in BLOCKS]


@pytest.mark.parametrize(("where", "argv", "shown"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_a_documented_command_prints_what_the_docs_show(
    where: str, argv: list[str], shown: str
) -> None:
    program = argv[0].rsplit("/", 1)[-1]
    assert program == "agentstate-reducer", f"{where}: {argv[0]} is not the command line"
    script = Path(sys.executable).parent / program
    proc = subprocess.run(
        [str(script), *argv[1:]], cwd=ROOT, capture_output=True, text=True, check=False,
        timeout=120, env={**os.environ, "COLUMNS": "100"},
    )
    assert proc.returncode in (0, 3), proc.stderr
    assert _matches(shown, proc.stdout), (
        f"{where} shows something else than the command prints now; paste its output:\n"
        + proc.stdout
    )


def test_an_elision_stands_for_lines_and_nothing_else() -> None:
    assert _matches("a\n...\nd", "a\nb\nc\nd\n")
    assert _matches("a\n...\nd", "a\nd")
    assert not _matches("a\n...\nd", "a\nb\nc\n")
    assert not _matches("a\nd", "a\nb\nd")
