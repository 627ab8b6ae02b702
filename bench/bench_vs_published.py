"""This checkout against the published agentstate-reducer 0.5.0, as a black box.

Both run the same timing script (documented public API only) on the same generated
history, in separate interpreters, in the same run:

    python3 -m venv /tmp/baseline && /tmp/baseline/bin/pip install agentstate-reducer==0.5.0
    BASELINE_PYTHON=/tmp/baseline/bin/python .venv/bin/python bench/bench_vs_published.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SCRIPT = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from bench_reduce import history
from agentstate_reducer import MessageReducer, ReducerConfig

def best(fn, repeat):
    out = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out * 1000

rows = {}
for n in (1_000, 2_500, 10_000):
    msgs = history(n)
    count = ReducerConfig(min_messages=n // 5, max_messages=n // 2)
    rows[n] = best(lambda: MessageReducer(config=count).reduce(existing=msgs), 3)
print(json.dumps(rows))
"""


def run(python: str) -> dict[str, float]:
    out = subprocess.run(
        [python, "-c", SCRIPT, str(HERE)], capture_output=True, text=True, check=True
    )
    return {k: float(v) for k, v in json.loads(out.stdout).items()}


def main() -> None:
    baseline = os.environ.get("BASELINE_PYTHON")
    if not baseline:
        print(__doc__)
        return
    ours, theirs = run(sys.executable), run(baseline)
    print(f"{'messages':>9} {'0.5.0 ms':>10} {'this ms':>9} {'speed-up':>9}")
    for n in ours:
        print(f"{n:>9} {theirs[n]:>10.1f} {ours[n]:>9.2f} {theirs[n] / ours[n]:>8.0f}x")


if __name__ == "__main__":
    main()
