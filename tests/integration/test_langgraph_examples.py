"""The LangGraph examples the README shows run, warning-free, and print what they claim."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

EXPECTED = {
    "langgraph_saver.py": "turn 5: checkpoint holds 5 messages, store 20",
    "langgraph_in_graph.py": "remembered under ('alice',): 20",
    "langgraph_agent.py": "remembered: 8",
    "langgraph_react_agent.py": "remembered: 8",
    "langgraph_custom_saver.py": "turn 3: stored 4 messages",
    "langgraph_context_editing.py": "stored originals: 5",
    "langgraph_async.py": "remembered: ['echo: hello 0', 'echo: hello 1', 'hello 0', 'hello 1']",
}


def test_every_langgraph_example_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("langgraph_*.py")) == sorted(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert EXPECTED[name] in done.stdout, done.stdout
