"""Provider rules for message histories: find what a provider would reject with a 400.

Every rule is documented, with the provider's own wording, in ``docs/validation.md``.
Messages are read only through the reader (``read/``), so every shape the
package reads is checked the same way.

Law (tested with hypothesis): with ``cascade_tool_messages`` on (the default), if
``validate_history(xs, provider=p) == []`` then
``validate_history(MessageReducer(config=c).reduce(xs).surviving, provider=p) == []``
for every config ``c`` with ``c.start_on == "human"`` when ``p == "anthropic"``; for
``p == "gemini"`` with ``c = agent_config(...)`` and for ``p == "bedrock"`` with
``c = agent_config(provider="bedrock", ...)`` (``tests/unit/read/test_shape_gemini.py``,
``tests/unit/read/test_shape_bedrock.py``).

By provider: ``rules`` (the rule names, by provider, and :class:`Problem`), ``chat``
(OpenAI-compatible chat and Anthropic), ``gemini``, ``bedrock``, ``responses`` (OpenAI
Responses items), ``check`` (:func:`validate_history`, :func:`check_history`).
"""

from __future__ import annotations

from .check import check_history, validate_history
from .rules import (
    ALTERNATION,
    CALL_TURN_ORDER,
    DUPLICATE_ITEM,
    DUPLICATE_RESULT,
    EMPTY_TEXT,
    FIRST_NOT_USER,
    LATE_RESULT,
    MISSING_REASONING,
    MISSING_SIGNATURE,
    ORPHAN_RESULT,
    PROVIDERS,
    REASONING_ALONE,
    REASONING_FIRST,
    RESPONSE_COUNT,
    RESULTS_FIRST,
    RULES,
    SPLIT_PARALLEL,
    THINKING_FIRST,
    THINKING_LAST,
    THINKING_TURN,
    UNANSWERED_CALL,
    UNKNOWN_ROLE,
    UNSIGNED_THINKING,
    InvalidHistoryError,
    Problem,
)

__all__ = (
    "ALTERNATION",
    "CALL_TURN_ORDER",
    "DUPLICATE_ITEM",
    "DUPLICATE_RESULT",
    "EMPTY_TEXT",
    "FIRST_NOT_USER",
    "LATE_RESULT",
    "MISSING_REASONING",
    "MISSING_SIGNATURE",
    "ORPHAN_RESULT",
    "PROVIDERS",
    "REASONING_FIRST",
    "RESPONSE_COUNT",
    "REASONING_ALONE",
    "RESULTS_FIRST",
    "RULES",
    "SPLIT_PARALLEL",
    "THINKING_FIRST",
    "THINKING_LAST",
    "THINKING_TURN",
    "UNANSWERED_CALL",
    "UNKNOWN_ROLE",
    "UNSIGNED_THINKING",
    "InvalidHistoryError",
    "Problem",
    "check_history",
    "validate_history",
)


