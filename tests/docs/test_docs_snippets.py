"""Every Python block of README.md and docs/*.md runs as written, and the README's first
command prints what the README shows.

The convention (also in README.md, "Development"):

* a block fenced ```` ```python ```` is complete: it runs here, on its own, in a fresh
  namespace and an empty working directory;
* ```` ```python fragment ```` marks a piece of a larger program (it names objects it
  does not define); it is only compiled, so it stays valid Python;
* ```` ```python postgres ```` / ```` ```python redis ```` need that server
  (``AGENTSTATE_TEST_POSTGRES_URL`` / ``AGENTSTATE_TEST_REDIS_URL``, or the local
  defaults): they run when it answers and are skipped, saying so, when not.

A failure names the file and the line of the block, and the traceback points at lines of
the Markdown file itself.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KINDS = {"", "fragment", "postgres", "redis"}
_FENCE = re.compile(r"^```python(?P<info>[^\n]*)\n(?P<body>.*?)^```", re.S | re.M)
POSTGRES_URL = os.environ.get(
    "AGENTSTATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("AGENTSTATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@dataclass(frozen=True)
class Block:
    page: Path
    #: Line of the first line of code in the page (the line after the fence).
    line: int
    kind: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def compiled(self) -> Any:
        # Padded so a traceback's line numbers are the page's own.
        # dont_inherit: this module's `from __future__ import annotations` is not the snippet's.
        source = "\n" * (self.line - 1) + self.code
        return compile(source, str(self.page), "exec", dont_inherit=True)


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 2
            found.append(Block(page, line, match["info"].strip(), match["body"]))
    return found


BLOCKS = blocks()


def test_every_block_says_what_it_is() -> None:
    bad = [f"{b.where}: ```python {b.kind}" for b in BLOCKS if b.kind not in KINDS]
    assert not bad, f"unknown fence info strings (expected one of {sorted(KINDS)}): {bad}"
    assert len(BLOCKS) > 20


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_block(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        code = block.compiled()
    except SyntaxError as exc:
        pytest.fail(f"{block.where}: the block is not valid Python: {exc}")
    if block.kind == "fragment":
        return
    if block.kind == "postgres":
        _need_postgres()
    if block.kind == "redis":
        _need_redis()
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__snippet__"}
    with warnings.catch_warnings():
        # A snippet is what a user runs: LangGraph's own deprecation notices are not its fault.
        warnings.simplefilter("default")
        try:
            exec(code, namespace)
        except Exception as exc:
            raise AssertionError(
                f"{block.where}: the block does not run as written "
                f"({type(exc).__name__}: {exc}); fix it, or fence it ```python fragment "
                "if it is a piece of a larger program"
            ) from exc


def _need_postgres() -> None:
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.OperationalError:
        pytest.skip(f"no PostgreSQL at {POSTGRES_URL}; start one or set "
                    "AGENTSTATE_TEST_POSTGRES_URL")


def _need_redis() -> None:
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"no Redis at {REDIS_URL}; start one or set AGENTSTATE_TEST_REDIS_URL")


# -- the README's first command ------------------------------------------------------------


def first_command() -> tuple[str, str]:
    """The first ``$ ...`` command of README.md and the output printed under it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^```console\n\$ (?P<cmd>[^\n]+)\n(?P<out>.*?)^```", text, re.S | re.M)
    assert match is not None, "README.md shows no $ command"
    return match["cmd"], match["out"]


def test_the_first_command_runs_as_written_and_prints_what_the_readme_shows() -> None:
    command, shown = first_command()
    program, *args = command.split()
    # "after make demo": the script is in the environment running these tests.
    assert program == ".venv/bin/agentstate-reducer", command
    script = Path(sys.executable).parent / "agentstate-reducer"
    for arg in args:
        if not arg.startswith("-") and "/" in arg:
            assert (ROOT / arg).is_file(), f"README.md's first command names {arg}, missing"
    proc = subprocess.run(
        [str(script), *args], cwd=ROOT, capture_output=True, text=True, check=False,
        timeout=60, env={**os.environ, "COLUMNS": "100"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip("\n") == shown.rstrip("\n"), (
        "README.md's first command prints something else now; paste its output:\n" + proc.stdout
    )


# -- the extras cover what the snippets import -----------------------------------------------


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~ ;]", r, maxsplit=1)[0].lower().replace("_", "-")
            for r in requirements}


def _closure(names: set[str]) -> set[str]:
    """``names`` and everything they require, as installed here."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += _requirement_names([r for r in requires if "extra ==" not in r])
    return seen


def test_the_extras_install_every_package_a_snippet_imports() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    direct = _requirement_names([r for name, reqs in extras.items() if name != "dev" for r in reqs])
    installable = _closure(direct)
    distributions = importlib.metadata.packages_distributions()
    missing = set()
    for block in BLOCKS:
        for node in ast.walk(ast.parse(block.code)):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules = [node.module]
            else:
                continue
            for module in modules:
                root = module.split(".")[0]
                if root in sys.stdlib_module_names or root == "agentstate_reducer":
                    continue
                names = _requirement_names(distributions.get(root, [root]))
                # A namespace package (langgraph) is shared by several distributions: the
                # module's own one is the one named like its dotted path.
                candidates = {n for n in names if n in installable}
                if module.startswith(("langgraph.checkpoint.", "langgraph.store.")):
                    backend = module.split(".")[2]
                    candidates = {n for n in candidates & direct if backend in n} or (
                        {"langgraph"} if backend in ("memory", "base") else set()
                    )
                if not candidates:
                    missing.add(f"{block.where}: {module}")
    assert not missing, f"no extra installs what these snippets import: {sorted(missing)}"
