"""The module graph of ``src/``: no import circle, and no import from the core into an
integration (docs/ARCHITECTURE.md, "Rules of the house").

Every ``import`` and ``from ... import`` of the package is read with ``ast``, at any depth
(an import inside a function ties two modules as much as one at the top). A package's
``__init__`` re-exports its modules: importing a name from the package is an import of
the module that defines it, so a face does not close a circle by itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "agentstate_reducer"
SRC = Path(__file__).resolve().parents[2] / "src" / PACKAGE

#: Integrations: optional extras that import the core, never imported by it.
INTEGRATIONS = ("langgraph", "outbox", "openai_agents", "pydantic_ai", "adk", "agent_framework")


def _name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _defined_in(package: str, name: str) -> str:
    """The module a package's face takes ``name`` from (the face itself if none)."""
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level and any(
            (a.asname or a.name) == name for a in node.names
        ):
            target = _resolve(package, node)
            return target if target in MODULES else package
    return package


def _resolve(module: str, node: ast.ImportFrom) -> str:
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def imports(module: str) -> set[str]:
    """The modules of the package that ``module`` imports."""
    found: set[str] = set()
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(PACKAGE + "."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                target = _resolve(module, node)
            elif node.module and node.module.split(".")[0] == PACKAGE:
                target = node.module
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:
                    found.add(sub)
                elif target in MODULES and _is_package(target) and target != module:
                    found.add(_defined_in(target, alias.name))
                elif target in MODULES:
                    found.add(target)
    found.discard(module)
    return {m for m in found if m in MODULES}


GRAPH = {m: imports(m) for m in MODULES}


def _integration(module: str) -> bool:
    return module.split(".")[1:2] != [] and module.split(".")[1] in INTEGRATIONS


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read() -> None:
    assert f"{PACKAGE}.reducer" in GRAPH
    assert f"{PACKAGE}.plan.types" in GRAPH[f"{PACKAGE}.reducer"]


def test_no_import_circle() -> None:
    circles = _circles()
    described = [
        " -> ".join(part) + ": " + "; ".join(
            f"{a} imports {b}" for a in part for b in sorted(GRAPH[a]) if b in part
        )
        for part in circles
    ]
    assert not circles, "\n".join(described)


def test_the_core_imports_no_integration() -> None:
    wrong = sorted(
        f"{a} imports {b}"
        for a, targets in GRAPH.items()
        if not _integration(a) and a != PACKAGE
        for b in targets
        if _integration(b)
    )
    assert not wrong, wrong


def test_the_package_face_imports_no_integration() -> None:
    assert not [b for b in GRAPH[PACKAGE] if _integration(b)]
