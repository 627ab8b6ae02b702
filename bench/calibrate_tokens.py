"""Re-derive the heuristic's ASCII weights from the calibration corpus (least squares).

Fits, by non-negative least squares over the lines and paragraphs of
``tests/fixtures/token_corpus/calibration`` (its JSON also pretty-printed), the weights
``approximate_text_tokens`` gives to the character counts it measures. Held as they are:
a token per run and per chunk of a long run (how cl100k cuts text), and the per-script
weights of non-ASCII characters. Prints the fitted weights (in hundredths of a token,
next to the ones in use), then the error per class on both halves and over single lines
with the weights in use. Needs the ``tokens`` extra.

    python bench/calibrate_tokens.py
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

from agentstate_reducer import tokens
from agentstate_reducer.tokens import approximate_text_tokens, load_cl100k_base

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "token_corpus"


def measure(text: str) -> tuple[tuple[int, ...], float]:
    """The counts the heuristic weighs, and its non-ASCII part in tokens."""
    counts, scripts = tokens._measure(text, text.encode("utf-8", "surrogatepass"))
    return counts, scripts / 100


def samples(half: str) -> list[tuple[str, str]]:
    """``(class, text)`` per line of 20 characters or more, and per paragraph of several lines.

    Each JSON value of the half also comes pretty-printed, as ``json.dumps`` writes tool
    results by default (a space after ``:`` and ``,``), which the corpus lacks.
    """
    out = []
    for path in sorted((CORPUS / half).glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        parts = text.split("\n\n") if path.stem in ("code", "json") else text.splitlines()
        out += [(path.stem, part) for part in parts if len(part) >= 20]
        if path.stem not in ("code", "json"):  # and whole paragraphs, for the line breaks
            out += [(path.stem, part) for part in text.split("\n\n") if "\n" in part.strip()]
        if path.stem == "json":
            out += [("json, pretty", json.dumps(value)) for value in _json_values(text)]
    return out


def _json_values(text: str) -> list[object]:
    values = []
    for line in text.splitlines():
        try:
            values.append(json.loads(line))
        except ValueError:
            continue  # a value spread over several lines
    return values


def solve(rows: list[list[float]], ys: list[float]) -> list[float]:
    """Least squares by the normal equations (Gauss-Jordan); small systems only."""
    k = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    b = [sum(r[i] * y for r, y in zip(rows, ys, strict=True)) for i in range(k)]
    for col in range(k):
        pivot = max(range(col, k), key=lambda r: abs(a[r][col]))
        a[col], a[pivot] = a[pivot], a[col]
        b[col], b[pivot] = b[pivot], b[col]
        for r in range(k):
            if r != col and a[col][col]:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col], strict=True)]
                b[r] -= f * b[col]
    return [b[i] / a[i][i] if a[i][i] else 0.0 for i in range(k)]


def nnls(rows: list[list[float]], ys: list[float]) -> list[float]:
    """Non-negative least squares: drop the most negative weight and solve again."""
    active = list(range(len(rows[0])))
    while True:
        found = solve([[r[i] for i in active] for r in rows], ys)
        if min(found) >= 0:
            out = [0.0] * len(rows[0])
            for i, w in zip(active, found, strict=True):
                out[i] = w
            return out
        active.pop(found.index(min(found)))


#: Weights held as they are: a token per run (as cl100k cuts text before it merges), and
#: per further chunk of a long run of letters.
HELD = ("_RUN_WEIGHT", "_LONG_RUN_WEIGHT", "_SPACED_NUMBER_WEIGHT")


def fit(exact: Callable[[str], int]) -> list[float]:
    """The weights of :data:`tokens._COUNTED` (in tokens), the held ones as they are."""
    names = [name for _, name in tokens._COUNTED]
    free = [i for i, name in enumerate(names) if name not in HELD]
    held = {i: getattr(tokens, names[i]) / 100 for i in range(len(names)) if i not in free}
    rows, ys = [], []
    for _, text in samples("calibration"):
        counts, scripts = measure(text)
        n = exact(text)
        scale = n**-0.5  # relative errors, softened so long lines still count more
        rows.append([counts[i] * scale for i in free])
        ys.append((n - scripts - sum(counts[i] * w for i, w in held.items())) * scale)
    weights = dict(held)
    weights.update(zip(free, nnls(rows, ys), strict=True))
    return [weights[i] for i in range(len(names))]


def main() -> None:
    encode = load_cl100k_base().encode_ordinary

    def exact(text: str) -> int:
        return len(encode(text))

    print("fitted weights, hundredths of a token (in use in parentheses):")
    for (label, name), weight in zip(tokens._COUNTED, fit(exact), strict=True):
        print(f"  {name:<24} {weight * 100:6.1f}  ({getattr(tokens, name)})  {label}")
    print("\nwith the weights in use: error per class, and over lines of 20+ characters")
    for half in ("calibration", "holdout"):
        total_exact = total_heuristic = 0
        errors = []
        for path in sorted((CORPUS / half).glob("*.txt")):
            text = path.read_text(encoding="utf-8")
            e, h = exact(text), approximate_text_tokens(text)
            total_exact += e
            total_heuristic += h
            errors.append(f"{path.stem} {(h - e) / e:+.1%}")
        print(f"  {half}: total {(total_heuristic - total_exact) / total_exact:+.1%}")
        print("   ", ", ".join(errors))
    lines = [
        abs(approximate_text_tokens(line) - exact(line)) / exact(line)
        for half in ("calibration", "holdout")
        for path in sorted((CORPUS / half).glob("*.txt"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if len(line) >= 20
    ]
    lines.sort()
    print(
        f"  {len(lines)} lines: median error {statistics.median(lines):.1%}, "
        f"90% within {lines[int(0.9 * len(lines))]:.1%}, worst {lines[-1]:.0%}"
    )


if __name__ == "__main__":
    main()
