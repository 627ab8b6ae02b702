"""Cuts that pay for themselves: how far a prune cuts when ``cache_aware`` is on. Pure.

A provider's prompt cache reads a repeated prefix at a tenth of the input price and
writes new tokens at 1.25 times it (Anthropic; recent OpenAI models likewise). Moving
the cut point rewrites everything kept. Cutting ``X`` tokens when the budget ``M`` is
reached saves them on each of the about ``X / d`` requests until the next cut (``d``:
tokens a request adds), at the cached price; the rewrite costs the kept ``M - X`` at
the write price. The cut goes as deep as it must to pay for itself,
``READ * X * X / d >= WRITE * (M - X)``, never keeping more than the target nor less
than half of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ("READ", "WRITE", "cache_target", "growth")

#: Price of a cached input token, relative to an uncached one.
READ = 0.1
#: Price of writing an input token to the cache, relative to an uncached one.
WRITE = 1.25
#: Recent messages the growth per request is measured over (two a request: a reply and
#: its result, or an answer and the next question).
_RECENT = 16


def growth(counts: Sequence[int], start: int = 0) -> float:
    """Tokens a request adds, from the latest messages: two of them per request."""
    recent = counts[max(start, len(counts) - _RECENT) :]
    if not recent:
        return 1.0
    return max(1.0, 2.0 * sum(recent) / len(recent))


def cache_target(max_tokens: int, target: int, added: float) -> int:
    """The tokens a cut keeps so that it pays for itself (see the module docstring)."""
    a = READ / added
    cut = (-WRITE + math.sqrt(WRITE * WRITE + 4.0 * a * WRITE * max_tokens)) / (2.0 * a)
    kept = int(max_tokens - cut)
    return max(target // 2, min(target, kept))
