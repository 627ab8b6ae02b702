"""The ``make bench`` harness runs end to end in smoke mode (tiny sizes, no timing asserted)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_harness", BENCH / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_smoke_run_writes_one_table_with_every_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    harness = _harness()
    out = tmp_path / "benchmarks.md"
    assert harness.main(["--smoke", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "smoke mode" in text and "Machine:" in text and "Date:" in text
    sections = ("one-shot", "append loop", "as users run it", "trim_messages", "heuristic",
                "memory", "turn ladder")
    for section in sections:
        assert f"| **{section}** |" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "**" not in line]
    assert len(rows) > 20
    for row in rows[1:]:  # after the header: every ratio is a finite positive figure
        ratio = row.split(" | ")[3]
        value = float(ratio.split("x")[0].removesuffix("%"))  # a multiple, or a share
        assert math.isfinite(value) and value > 0, row
    assert "0.5.0:" not in text  # smoke mode never installs or runs the published package
    assert capsys.readouterr().out.count("| ") > 20  # the same table on stdout
