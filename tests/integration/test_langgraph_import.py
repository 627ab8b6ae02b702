"""The extra's import contract: its public names, and the error when it is not installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

import agentstate_reducer.langgraph as extra

INSTALL = 'pip install "agentstate-reducer[langgraph]"'


def run_blocked(blocked: list[str], code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where importing ``blocked`` fails."""
    prelude = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in blocked)
    return subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=60
    )


def test_all_is_sorted_and_resolves() -> None:
    assert list(extra.__all__) == sorted(extra.__all__)
    for name in extra.__all__:
        assert getattr(extra, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        extra.nope  # noqa: B018


@pytest.mark.slow
def test_without_langgraph_the_error_names_the_extra() -> None:
    done = run_blocked(["langgraph"], "import agentstate_reducer.langgraph")
    assert done.returncode == 1
    assert "ImportError" in done.stderr
    assert INSTALL in done.stderr


def test_without_langgraph_the_core_still_imports() -> None:
    done = run_blocked(
        ["langgraph", "langchain_core", "langchain"],
        "import agentstate_reducer\n"
        "r = agentstate_reducer.MessageReducer(1, 2)\n"
        "print(len(r.reduce([{'role': 'user', 'content': str(i)} for i in range(3)]).surviving))",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"


@pytest.mark.slow
def test_without_langchain_only_the_middleware_is_missing() -> None:
    done = run_blocked(
        ["langchain"],
        "import agentstate_reducer.langgraph as extra\n"
        "print(extra.ReducingSaver.__name__)\n"
        "from agentstate_reducer.langgraph import ReducingMiddleware\n",
    )
    assert done.stdout.strip() == "ReducingSaver"
    assert done.returncode == 1
    assert "ReducingMiddleware needs langchain" in done.stderr
    assert INSTALL in done.stderr
