"""The rules every provider check reports: their names, by provider, and the problem record."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import ReducerError
from ..read import (
    AI,
    BLANK_PART,
    FUNCTION,
    HUMAN,
    SYSTEM,
    TOOL,
    MessageRecord,
    read_messages,
)

#: Providers whose rules are known.
PROVIDERS = ("openai", "anthropic", "gemini", "bedrock", "openai-responses")


# Rules of every provider.
UNKNOWN_ROLE = "unknown-role"


ORPHAN_RESULT = "orphan-result"


LATE_RESULT = "late-result"


DUPLICATE_RESULT = "duplicate-result"


UNANSWERED_CALL = "unanswered-call"


SPLIT_PARALLEL = "split-parallel"


# Rules of Anthropic only.
FIRST_NOT_USER = "first-not-user"


ALTERNATION = "alternation"


RESULTS_FIRST = "results-first"


EMPTY_TEXT = "empty-text"


UNSIGNED_THINKING = "unsigned-thinking"


THINKING_FIRST = "thinking-first"


THINKING_LAST = "thinking-last"


THINKING_TURN = "thinking-turn"


# Rules of OpenAI-compatible chat only (DeepSeek's thinking mode).
MISSING_REASONING = "missing-reasoning"


# Rules of Gemini only.
RESPONSE_COUNT = "response-count"


CALL_TURN_ORDER = "call-turn-order"


MISSING_SIGNATURE = "missing-thought-signature"


# Rules of Bedrock only.
REASONING_FIRST = "reasoning-first"


# Rules of the OpenAI Responses API only.
REASONING_ALONE = "reasoning-alone"


DUPLICATE_ITEM = "duplicate-item"


#: What every provider but the Responses API checks: known roles, each result after its one call.
_LINKED = (UNKNOWN_ROLE, ORPHAN_RESULT, LATE_RESULT, DUPLICATE_RESULT, UNANSWERED_CALL)

#: Every rule, by provider.
RULES: dict[str, tuple[str, ...]] = {
    "openai": (
        *_LINKED,
        SPLIT_PARALLEL,
        MISSING_REASONING,
    ),
    "anthropic": (
        *_LINKED,
        SPLIT_PARALLEL,
        FIRST_NOT_USER,
        ALTERNATION,
        RESULTS_FIRST,
        EMPTY_TEXT,
        UNSIGNED_THINKING,
        THINKING_FIRST,
        THINKING_LAST,
        THINKING_TURN,
    ),
    "gemini": (
        *_LINKED,
        RESPONSE_COUNT,
        FIRST_NOT_USER,
        ALTERNATION,
        CALL_TURN_ORDER,
        MISSING_SIGNATURE,
        EMPTY_TEXT,
    ),
    "bedrock": (
        *_LINKED,
        SPLIT_PARALLEL,
        FIRST_NOT_USER,
        ALTERNATION,
        REASONING_FIRST,
        EMPTY_TEXT,
    ),
    "openai-responses": (
        UNKNOWN_ROLE, ORPHAN_RESULT, UNANSWERED_CALL, REASONING_ALONE, DUPLICATE_ITEM
    ),
}


@dataclass(frozen=True)
class Problem:
    """One rule a history breaks: which message, which rule, what is wrong and how to fix it."""

    #: Index of the offending message in the list checked.
    index: int
    #: The rule's name (see :data:`RULES`).
    rule: str
    #: What is wrong, naming the call ids or roles involved.
    detail: str
    #: A short fix.
    fix: str

    def __str__(self) -> str:
        return f"message {self.index}: {self.detail} [{self.rule}]; fix: {self.fix}"


class InvalidHistoryError(ReducerError, ValueError):
    """A history breaks a provider's rules; ``problems`` lists every one."""

    def __init__(self, provider: str, problems: list[Problem]) -> None:
        self.provider = provider
        self.problems = list(problems)
        count = len(problems)
        lines = "".join(f"\n  {p}" for p in problems)
        super().__init__(
            f"history is not valid for provider {provider!r}: {count} "
            f"problem{'' if count == 1 else 's'} found:{lines}"
        )


#: Roles every provider's checks know (after aliasing); any other role, or none, is
#: reported as :data:`UNKNOWN_ROLE` and the message takes no further part in the checks.
_KNOWN_ROLES = frozenset({HUMAN, AI, SYSTEM, TOOL, FUNCTION})


def _unknown_role(index: int, role: str) -> Problem:
    """The :data:`UNKNOWN_ROLE` problem every provider's checker reports first."""
    return Problem(
        index,
        UNKNOWN_ROLE,
        f"role {role!r} is not a message role" if role else "message has no role",
        "give it a role: 'user', 'assistant', 'system' or 'tool' (LangChain types: "
        "'human', 'ai', 'system', 'tool')",
    )


def _ids(ids: Iterable[str]) -> str:
    return ", ".join(repr(i) for i in ids)


class _Checks:
    """What every provider's checker holds: the messages and their records, the problems
    found, and the tool calls issued and answered so far."""

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages
        self.views = read_messages(messages)
        self.problems: list[Problem] = []
        #: call id -> index of the latest assistant message (model content) that issued it.
        self.issued: dict[str, int] = {}
        #: call ids answered since they were issued.
        self.answered: set[str] = set()

    def add(self, index: int, rule: str, detail: str, fix: str) -> None:
        self.problems.append(Problem(index, rule, detail, fix))

    def known(self) -> Iterator[tuple[int, MessageRecord]]:
        """Each message whose role is known, with its record; any other is reported as
        :data:`UNKNOWN_ROLE` (for every provider, before its own rules) and skipped."""
        for i, view in enumerate(self.views):
            if view.role in _KNOWN_ROLES:
                yield i, view
            else:
                self.problems.append(_unknown_role(i, view.role))

    def current(self) -> int:
        """The index of the current turn's question (the last human message that answers
        no call), ``-1`` when there is none."""
        return max(
            (i for i, v in enumerate(self.views) if v.role == HUMAN and not v.answers),
            default=-1,
        )

    def found(self) -> list[Problem]:
        """The problems, in message order."""
        return sorted(self.problems, key=lambda p: p.index)


class _PartChecks(_Checks):
    """A checker whose provider refuses a message without parts and a blank text part,
    each in its own words: :attr:`NO_PARTS` and :attr:`BLANK`."""

    #: ``(detail, fix)`` of a message without parts; ``{index}`` is its index.
    NO_PARTS: tuple[str, str]
    #: ``(detail, fix)`` of a blank text part; ``{at}`` is the part's position.
    BLANK: tuple[str, str]

    def empty(self, index: int, kinds: tuple[str, ...]) -> None:
        """Report message ``index`` if it has no parts or a blank text part."""
        if not kinds:
            detail, fix = self.NO_PARTS
            self.add(index, EMPTY_TEXT, detail.format(index=index), fix)
        elif BLANK_PART in kinds:
            detail, fix = self.BLANK
            self.add(index, EMPTY_TEXT, detail.format(index=index, at=kinds.index(BLANK_PART)), fix)
