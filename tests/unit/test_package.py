"""The package as a library: its version, and a logger that stays quiet until configured."""

from __future__ import annotations

import importlib.metadata
import logging
import re
import subprocess
import sys
from pathlib import Path

import agentstate_reducer

ROOT = Path(__file__).parents[2]


def test_version_is_the_installed_distributions() -> None:
    assert isinstance(agentstate_reducer.__version__, str)
    assert re.fullmatch(r"\d+\.\d+\.\d+", agentstate_reducer.__version__)
    # pyproject.toml reads it from _version.py: the installed metadata is the same string.
    assert importlib.metadata.version("agentstate-reducer") == agentstate_reducer.__version__


def test_the_version_is_written_in_one_place() -> None:
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^dynamic = \["version"\]$', project, re.M)
    assert not re.search(r"^version = ", project, re.M)
    assert 'path = "src/agentstate_reducer/_version.py"' in project
    # What the README and the CHANGELOG say this version is.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"This is version {agentstate_reducer.__version__}," in readme
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^## (\S+)", changelog, re.M)
    assert first is not None and first[1] == agentstate_reducer.__version__


def test_the_library_logger_has_a_null_handler() -> None:
    handlers = logging.getLogger("agentstate_reducer").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


def test_an_unconfigured_application_sees_no_library_log_on_stderr() -> None:
    # Without a handler, logging's last resort prints warnings to stderr: an application
    # that never configured logging would see the library's warnings there.
    code = (
        "import logging, agentstate_reducer\n"
        "logging.getLogger('agentstate_reducer').warning('library warning')\n"
        "logging.getLogger('agentstate_reducer.tokens').error('library error')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert proc.stderr == ""
    # Configured, the application sees them as usual.
    configured = "import logging; logging.basicConfig()\n" + code
    proc = subprocess.run(
        [sys.executable, "-c", configured], capture_output=True, text=True, check=True,
        timeout=60,
    )
    assert "library warning" in proc.stderr and "library error" in proc.stderr
