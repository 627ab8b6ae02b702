"""examples/demo.py: a short run on SQLite (and on PostgreSQL when one is reachable)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).parents[2] / "examples" / "demo.py"
POSTGRES_URL = os.environ.get(
    "AGENTSTATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def run_demo(out_dir: Path, database_url: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    proc = subprocess.run(
        [sys.executable, str(DEMO), "--turns", "20", "--out-dir", str(out_dir)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    return proc.stdout


def row(text: str, label: str) -> tuple[str, str, str]:
    """The three values (without, with reducer, with retention too) of a table row."""
    line = next(line for line in text.splitlines() if line.strip().startswith(label))
    values = re.split(r"\s{2,}", line.strip())[1:]
    assert len(values) == 3, line
    return values[0], values[1], values[2]


def size(text: str) -> float:
    number, unit = text.split()
    return float(number) * {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}[unit]


def check_report(text: str, out_dir: Path) -> None:
    assert "turn 20/20" in text  # progress
    without, with_, retained = (int(v) for v in row(text, "messages in the thread"))
    # 20 scripted turns write 89 messages; the reducer keeps at most max_messages=40.
    assert without == 89
    assert with_ <= 40
    assert retained == with_
    # Retention deletes old checkpoints only: far fewer bytes, the same window.
    plain_bytes, reduced_bytes, retained_bytes = (size(v) for v in row(text, "bytes stored"))
    assert retained_bytes < reduced_bytes / 3 < plain_bytes
    assert re.search(r"with keep_checkpoints=10, \d+x fewer", text)
    pruned = re.search(r"Pruned: (\d+) of (\d+) messages left the window \((\d+) kept\)", text)
    assert pruned is not None
    assert int(pruned[1]) + int(pruned[3]) == int(pruned[2]) == without
    assert f"{pruned[1]} items." in text
    assert "exactly once" in text and "PROBLEM" not in text
    assert "The last window the model saw" in text
    assert "0  system  You are a travel assistant" in text
    chart = out_dir / "storage.png"
    assert f"Chart of storage per turn: {chart}" in text
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    transcript = json.loads((out_dir / "transcript.json").read_text(encoding="utf-8"))
    assert len(transcript) == without


@pytest.mark.slow
def test_demo_on_sqlite_and_its_transcript_feeds_the_cli(tmp_path: Path) -> None:
    text = run_demo(tmp_path)
    check_report(text, tmp_path)
    assert "on SQLite" in text
    # Nothing big is left behind: the databases go, the chart and the transcript stay.
    assert re.search(r"The SQLite files \([\d.]+ [kM]B\) were deleted", text)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["storage.png", "transcript.json"]
    plain, reduced, retained = row(text, "bytes stored for the thread")
    assert plain.endswith("MB") and reduced.endswith("kB") and retained.endswith("kB")
    # The transcript it writes is what the command line reads.
    cli = Path(sys.executable).parent / "agentstate-reducer"
    proc = subprocess.run(
        [str(cli), "reduce", str(tmp_path / "transcript.json"), "--max-messages", "40",
         "--min-messages", "20", "--explain"],
        capture_output=True, text=True, check=False, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "(LangChain messages_to_dict), 89 messages" in proc.stdout


def _postgres_reachable() -> bool:
    try:
        import psycopg
    except ImportError:
        return False
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.OperationalError:
        return False
    return True


@pytest.mark.slow
def test_demo_on_postgres(tmp_path: Path) -> None:
    if not _postgres_reachable():
        pytest.skip(
            f"no PostgreSQL at {POSTGRES_URL}; start one or set AGENTSTATE_TEST_POSTGRES_URL"
        )
    text = run_demo(tmp_path, POSTGRES_URL)
    check_report(text, tmp_path)
    assert "on PostgreSQL" in text
    assert not (tmp_path / "checkpoints.sqlite").exists()
    assert "threads and memories were deleted from PostgreSQL" in text


def test_the_chart_labels_every_line_apart_and_shows_all_three(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import importlib.util

    import matplotlib.pyplot as plt

    spec = importlib.util.spec_from_file_location("demo", DEMO)
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    sys.modules["demo"] = demo  # its dataclasses look their module up
    try:
        spec.loader.exec_module(demo)
        days = range(1, 201)
        # The shape of a 200-turn run: megabytes against kilobytes, one window shared.
        window = [20 + t % 20 for t in days]
        plain = demo.Thread("without", None, None, {}, [int(3.6e3 * t * t) for t in days],
                            [4 * t for t in days])
        reduced = demo.Thread("with", None, None, {}, [55_000 * t for t in days], window)
        retained = demo.Thread("retained", None, None, {}, [100_000] * 200, list(window))
        sizes = [demo._size(t.bytes[-1]) for t in (plain, reduced, retained)]
        fig = demo.chart_figure(plain, reduced, retained, "SQLite")
    finally:
        del sys.modules["demo"]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    left, right = fig.axes
    assert left.get_yscale() == "log"  # else 100 kB lies on the axis under 144 MB
    for ax in (left, right):
        boxes = [t.get_window_extent(renderer) for t in ax.texts]
        assert len(boxes) == len({t.get_text() for t in ax.texts})
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), [t.get_text() for t in ax.texts]
        # The dashed retention line is drawn over the reducer's, not hidden under it.
        dashed = next(line for line in ax.lines if line.get_linestyle() == "--")
        others = [line.get_zorder() for line in ax.lines if line is not dashed]
        assert dashed.get_zorder() > max(others)
    assert [t.get_text() for t in left.texts] == sizes
    plt.close(fig)
