"""Calibration from reported usage: how fast the corrected estimate meets the truth.

An honest stand-in for a provider: exact ``o200k_base`` counts are the "reported" input
tokens of each request, and a counter that only estimates them (the heuristic, and the
Claude estimator, the heuristic times 1.3) is corrected by ``MessageReducer.calibrate``
after each request. The conversation switches language every message (lines of the
holdout half of ``tests/fixtures/token_corpus``: English, Russian, Chinese, code,
European languages, Japanese, JSON, Hindi); each request sends the conversation so far,
eight more messages each turn. Prints, per turn, the counter's own error, the error of
the calibrated estimate made before that turn's report (what a budget would have used),
and the factor after it, as docs/tokens.md has them. Needs the ``tokens`` extra.

    python bench/bench_calibration.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.tokens import REPLY_PRIMING_TOKENS, exact_token_counter

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "token_corpus"
LANGUAGES = ("english", "russian", "chinese", "code", "european", "japanese", "json", "hindi")
TURNS = 8


def conversation() -> list[dict[str, Any]]:
    """Eight messages a turn, one per language, user and assistant in turn."""
    lines = {
        name: [x for x in (CORPUS / "holdout" / f"{name}.txt").read_text().splitlines() if x]
        for name in LANGUAGES
    }
    out: list[dict[str, Any]] = []
    for turn in range(TURNS):
        for k, name in enumerate(LANGUAGES):
            text = lines[name][turn % len(lines[name])]
            out.append({"role": "user" if k % 2 == 0 else "assistant", "content": text})
    return out


def convergence(counter: str) -> list[tuple[int, int, int, float, float, float]]:
    """Per turn: messages sent, reported, estimated, the counter's error, the calibrated
    error (with what was learned before the turn), the factor after it."""
    truth = exact_token_counter("o200k_base")
    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**6, token_counter=counter))
    history = conversation()
    step = len(history) // TURNS
    rows = []
    for turn in range(1, TURNS + 1):
        sent = history[: turn * step]
        reported = sum(truth(m) for m in sent) + REPLY_PRIMING_TOKENS
        estimate = sum(reducer.count_tokens(sent)) + REPLY_PRIMING_TOKENS
        before = reducer.calibration().factor * estimate
        factor = reducer.calibrate(sent, reported)
        rows.append(
            (len(sent), reported, estimate, (estimate - reported) / reported,
             (before - reported) / reported, factor)
        )
    return rows


def main() -> None:
    for counter in ("approximate", "claude-sonnet-4-5"):
        print(f"counter {counter!r}, truth: exact o200k_base")
        print(
            "| turn | messages | reported | estimated | counter's error | calibrated error "
            "| factor after |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for turn, (n, reported, estimate, raw, calibrated, factor) in enumerate(
            convergence(counter), 1
        ):
            print(
                f"| {turn} | {n} | {reported} | {estimate} | {raw:+.1%} | {calibrated:+.1%} "
                f"| {factor:.3f} |"
            )
        print()


if __name__ == "__main__":
    main()
