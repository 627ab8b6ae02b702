"""Cuts that pay for themselves: the prompt-cache cost model of ``cache_aware``. Pure.

A provider's prompt cache reads a repeated prefix at a tenth of the input price and
writes new tokens at 1.25 times it (Anthropic; recent OpenAI models likewise). A cut
changes the first messages of the request, so the next request writes everything it
keeps to the cache again. With ``M`` tokens (``max_tokens``) when a cut is due, a cut
of ``X`` tokens keeps ``M - X``, and the next cut comes about ``X / d`` requests later
(``d``: tokens a request adds). What is compared:

* saved: the ``X`` tokens no longer sent, on each of those ``X / d`` requests, at the
  cached price: ``READ * X * X / d``;
* paid: the kept tokens written once more: ``WRITE * (M - X)``.

The cut is the shallowest that pays for itself, ``READ * X * X / d >= WRITE * (M - X)``,
keeping no more than ``target_tokens`` and no less than half of it
(:func:`cache_target`); the plan then moves it onto a question that opens a turn
(``plan._cache_cut``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..read import AI, MessageRecord

__all__ = ("READ", "WRITE", "cache_target", "growth")

#: Price of a cached input token, relative to an uncached one.
READ = 0.1
#: Price of writing an input token to the cache, relative to an uncached one.
WRITE = 1.25
#: Latest messages the growth per request is measured over.
_RECENT = 32


def growth(views: Sequence[MessageRecord], counts: Sequence[int], start: int = 0) -> float:
    """Tokens a request adds: the latest messages' tokens over the requests that made
    them (one a reply: an ai message)."""
    lo = max(start, len(views) - _RECENT)
    if lo >= len(views):
        return 1.0
    tokens = sum(counts[i] for i in range(lo, len(views)))
    replies = sum(1 for i in range(lo, len(views)) if views[i].role == AI)
    return max(1.0, tokens / max(1, replies))


def cache_target(max_tokens: int, target: int, added: float) -> int:
    """The tokens a cut keeps so that it pays for itself (see the module docstring).

    The least ``X`` with ``READ * X * X / added >= WRITE * (max_tokens - X)``, the
    positive root of the quadratic, gives ``max_tokens - X`` kept, clamped to
    ``[target // 2, target]``.
    """
    a = READ / added
    cut = (-WRITE + math.sqrt(WRITE * WRITE + 4.0 * a * WRITE * max_tokens)) / (2.0 * a)
    kept = int(max_tokens - math.ceil(cut))
    return max(target // 2, min(target, kept))
