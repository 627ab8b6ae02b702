"""The pipeline is visible in the code (docs/ARCHITECTURE.md, "One call, stage by stage"):
``reduce_flow`` calls each stage's function once, in pipeline order, each taken from its
stage's module, ``prepare`` reads, repairs, takes the structure, edits, plans and
writes the turn note, in that order, on an append or on the whole list alike, and the
repair asks the structure of the records the read stage read. Read with ``ast``: what
is checked is the code a reader follows."""

from __future__ import annotations

import ast
from pathlib import Path

REDUCING = Path(__file__).resolve().parents[2] / "src" / "agentstate_reducer" / "reducing"


def _function(path: Path, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return next(
        node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name
    )


def _calls(function: ast.FunctionDef) -> list[str]:
    """The plain names ``function`` calls (``f(...)``, not ``obj.f(...)``), in source order."""
    calls = [
        node
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]
    calls.sort(key=lambda node: (node.lineno, node.col_offset))
    return [node.func.id for node in calls if isinstance(node.func, ast.Name)]


def _imported_from(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        alias.asname or alias.name: node.module or ""
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_the_driver_calls_each_stage_once_in_pipeline_order() -> None:
    flow = REDUCING / "flow.py"
    stages = {
        "_concat": "lists",
        "prepare": "prepare",
        "summarise": "summaries",
        "result": "result",
        "hand_over": "handover",
        "replay": "replay",
    }
    called = [name for name in _calls(_function(flow, "reduce_flow")) if name in stages]
    assert called == list(stages)
    imported = _imported_from(flow)
    assert {name: imported[name] for name in stages} == stages


def test_prepare_reads_repairs_structures_edits_plans_then_writes_the_note() -> None:
    """One path: ``prepare`` runs the stages (``_prepare``) on an append, then, when a
    stage finds that only the whole list can tell, on the whole list; each stage's room
    has one door there, in pipeline order (the read first: the repair reads no more)."""
    prepare = REDUCING / "prepare.py"
    assert [n for n in _calls(_function(prepare, "prepare")) if n != "Prepared"] == [
        "_prepare", "_prepare"
    ]
    order = [
        "_read", "read_records", "repair", "structure_of", "settled", "_edit", "planned",
        "_pinned_plan", "note_structure",
    ]
    called = [name for name in _calls(_function(prepare, "_prepare")) if name in order]
    assert called == order
    assert [n for n in _calls(_function(prepare, "_edit")) if n.startswith("edit")] == [
        "edit_structure"
    ]
    imported = _imported_from(prepare)
    assert imported["read_records"] == "read.chat"
    assert imported["repair"] == "repair"
    assert imported["structure_of"] == "_structure"
    assert imported["edit_structure"] == "edit"
    assert imported["note_structure"] == "_note"
    assert {imported[name] for name in ("settled", "planned")} == {"append"}


def test_the_repair_asks_the_structure_of_the_records_read_before_it() -> None:
    repair = REDUCING / "repair.py"
    called = _calls(_function(repair, "repair"))
    assert {"dangling_calls", "pending_from"} <= set(called)
    assert not {"read_messages", "read_records"} & set(called)
    assert _imported_from(repair)["dangling_calls"] == "_structure"


def test_both_drivers_run_the_one_core() -> None:
    reducer = REDUCING.parent / "reducer.py"
    tree = ast.parse(reducer.read_text(encoding="utf-8"))
    methods = {
        node.name: node
        for cls in tree.body
        if isinstance(cls, ast.ClassDef) and cls.name == "MessageReducer"
        for node in cls.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
        and not any(
            isinstance(d, ast.Name) and d.id == "overload" for d in node.decorator_list
        )
    }
    for name, driver in (("reduce", "_drive"), ("areduce", "_adrive")):
        calls = {
            node.func.id
            for node in ast.walk(methods[name])
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        assert {"reduce_flow", driver} <= calls, name
