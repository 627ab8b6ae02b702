"""examples/demo.py: a short run on SQLite (and on PostgreSQL when one is reachable)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).parents[1] / "examples" / "demo.py"
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
    assert (tmp_path / "checkpoints.sqlite").exists()
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
