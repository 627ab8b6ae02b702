"""docs/validation.md lists every rule of every provider, as ``validate.RULES`` has them."""

from __future__ import annotations

import re
from pathlib import Path

from agentstate_reducer import validate

DOC = (Path(__file__).resolve().parents[2] / "docs" / "validation.md").read_text("utf-8")


def _rule_constants() -> set[str]:
    """The value of every exported rule constant (``ORPHAN_RESULT`` ...)."""
    values = (getattr(validate, name) for name in validate.__all__ if name.isupper())
    return {v for v in values if isinstance(v, str)}


def test_every_rule_constant_is_documented() -> None:
    rules = _rule_constants()
    assert rules == {r for found in validate.RULES.values() for r in found}
    missing = sorted(r for r in rules if f"`{r}`" not in DOC)
    assert missing == []


def _table(after: str) -> list[list[str]]:
    """The rows of the first table after the line ``after``, as lists of cells."""
    lines = DOC[DOC.index(after) :].splitlines()[1:]
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _names(cell: str) -> set[str]:
    return set(re.findall(r"`([a-z-]+)`", cell))


def test_the_rules_table_gives_each_provider_its_rules() -> None:
    found: dict[str, set[str]] = {p: set() for p in validate.PROVIDERS}
    for rule, providers, _ in _table("## Rules"):
        names = {p.strip() for p in providers.split(",")}
        for provider in validate.PROVIDERS if names == {"every provider"} else names:
            found[provider] |= _names(rule)
    for rule, *_ in _table("### OpenAI Responses"):
        found["openai-responses"] |= _names(rule)
    assert found == {p: set(rules) for p, rules in validate.RULES.items()}


def test_the_provider_table_lists_each_providers_rules() -> None:
    rows = _table("Each provider's rules apply to the shapes it takes:")
    found = {re.sub(r'[`"]', "", provider): _names(rules) for provider, _, rules in rows}
    assert found == {p: set(rules) for p, rules in validate.RULES.items()}
