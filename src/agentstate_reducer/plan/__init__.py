"""The pure pruning plan: records + token counts + config -> which indices go, and why.

:func:`make_plan` and every rule it applies, with the laws they keep, are in ``rules``;
what a plan says (the reasons, :class:`Plan`) in ``types``; the plan of an append to a
settled history (:func:`settle`, :func:`plan_append`) in ``append``; the prompt-cache
cost model of ``cache_aware`` in ``cache``. The structure the plan reads (turns, call
links, responses) is the stage before it, ``_structure``; its names are re-exported here.
"""

from __future__ import annotations

from .._structure import Parents as Parents
from .._structure import Results as Results
from .._structure import Turn, current_turn, dangling_calls, link_calls, response_units
from .._structure import Views as Views
from .append import Settled, plan_append, settle
from .rules import make_plan
from .rules import plan_structure as plan_structure
from .types import (
    CASCADE,
    COMPACTED,
    CURRENT_TURN,
    IN_PROGRESS,
    NEVER_PRUNED,
    OLD_STEP,
    ORPHAN,
    PINNED,
    PRESERVED_FIRST,
    RECENT,
    START_ON,
    UNDER_THRESHOLD,
    WINDOW,
    Plan,
)
from .types import SUMMARY_BLOCK as SUMMARY_BLOCK
from .types import SUMMARY_FAILED as SUMMARY_FAILED
from .types import UNSTORED_ORIGINAL as UNSTORED_ORIGINAL

__all__ = (
    "CASCADE",
    "COMPACTED",
    "CURRENT_TURN",
    "IN_PROGRESS",
    "NEVER_PRUNED",
    "OLD_STEP",
    "ORPHAN",
    "PINNED",
    "PRESERVED_FIRST",
    "RECENT",
    "START_ON",
    "UNDER_THRESHOLD",
    "WINDOW",
    "Plan",
    "Settled",
    "Turn",
    "current_turn",
    "dangling_calls",
    "link_calls",
    "make_plan",
    "plan_append",
    "response_units",
    "settle",
)
