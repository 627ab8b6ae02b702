"""Re-derive the heuristic's weights, per encoding, from the calibration corpus.

Fits, by non-negative least squares over the lines and paragraphs of
``tests/fixtures/token_corpus/calibration`` (its JSON also pretty-printed), the weights
the heuristic gives to the counts it measures (``tokens.heuristic._COUNTED``), once for
``o200k_base`` and once for ``cl100k_base``. Held as they are: a token per run, per
chunk of a long run and per spaced number (how a BPE encoding cuts text), and the
weight of a script the calibration half has fewer than 60 characters of. Prints the
fitted weights (in hundredths of a token, next to the ones in use, and as the literal
to paste into ``tokens.heuristic._WEIGHTS``), then, with the weights in use, the error per class
on both halves and over single lines. Needs the ``tokens`` extra.

    python bench/calibrate_tokens.py
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

from agentstate_reducer import tokens
from agentstate_reducer.tokens import load_encoding

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "token_corpus"


def measure(text: str) -> tuple[int, ...]:
    """The counts the heuristic weighs."""
    return tokens.heuristic._measure(text, text.encode("utf-8", "surrogatepass"))


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


#: Weights held as they are: a token per run (as a BPE encoding cuts text before it
#: merges), per further chunk of a long run of letters, and per spaced number; and
#: punctuation outside ASCII, a token a mark (too few in the corpus, and too tied to the
#: letters around it, to be fitted apart).
HELD = tuple(
    tokens.heuristic._COUNTED.index(name)
    for name in (
        "runs", "long-run chunks", "spaced numbers", "typographic punctuation",
        "CJK punctuation", "full-width forms",
    )
)
#: Weights held at zero per encoding: o200k_base, trained on many languages, cuts ASCII
#: prose in another language about as it cuts English (the fitted weight is 0.02 a
#: letter, and holding it at zero lowers the error), so its estimate skips telling the
#: language.
ZERO = {"o200k_base": (tokens.heuristic._COUNTED.index("letters of foreign prose"),)}
#: A script with fewer characters than this in the calibration half keeps its weight.
MIN_CHARS = 60


def fit(encoding: str, exact: Callable[[str], int]) -> list[float]:
    """The weights of ``tokens.heuristic._COUNTED`` for ``encoding``, in hundredths of a token."""
    in_use = tokens.heuristic._WEIGHTS[encoding].flat()
    measured = [(measure(text), exact(text)) for _, text in samples("calibration")]
    totals = [sum(counts[i] for counts, _ in measured) for i in range(len(in_use))]
    free = [
        i for i in range(len(in_use))
        if i not in HELD and i not in ZERO.get(encoding, ()) and (i < 6 or totals[i] >= MIN_CHARS)
    ]
    rows, ys = [], []
    for counts, n in measured:
        scale = n**-0.5  # relative errors, softened so long lines still count more
        rows.append([counts[i] * scale for i in free])
        held = sum(counts[i] * in_use[i] for i in range(len(in_use)) if i not in free) / 100
        ys.append((n - held) * scale)
    weights = [float(w) for w in in_use]
    for i, w in zip(free, nnls(rows, ys), strict=True):
        weights[i] = w * 100
    return weights


def table(encoding: str, exact: Callable[[str], int]) -> None:
    estimate = tokens.heuristic._HEURISTICS[encoding]
    for half in ("calibration", "holdout"):
        total_exact = total_heuristic = 0
        errors = []
        for path in sorted((CORPUS / half).glob("*.txt")):
            text = path.read_text(encoding="utf-8")
            e, h = exact(text), estimate(text)
            total_exact += e
            total_heuristic += h
            errors.append(f"{path.stem} {(h - e) / e:+.1%}")
        print(f"  {half}: total {(total_heuristic - total_exact) / total_exact:+.1%}")
        print("   ", ", ".join(errors))
    lines = [
        abs(estimate(line) - exact(line)) / exact(line)
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


def main() -> None:
    for encoding in tokens.heuristic._WEIGHTS:
        encode = load_encoding(encoding).encode_ordinary

        def exact(text: str, encode: Callable[[str], list[int]] = encode) -> int:
            return len(encode(text))

        fitted = fit(encoding, exact)
        in_use = tokens.heuristic._WEIGHTS[encoding].flat()
        print(f"{encoding}: fitted weights, hundredths of a token (in use in parentheses)")
        for label, weight, now in zip(tokens.heuristic._COUNTED, fitted, in_use, strict=True):
            print(f"  {label:<26} {weight:6.1f}  ({now})")
        rounded = [round(w) for w in fitted]
        print(f"  literal: _Weights(*{tuple(rounded[:6])}, {tuple(rounded[6:])})")
        print("  with the weights in use: error per class, and over lines of 20+ characters")
        table(encoding, exact)
        print()


if __name__ == "__main__":
    main()
