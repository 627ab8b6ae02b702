"""Provider rules for message histories: find what a provider would reject with a 400.

Every rule is documented, with the provider's own wording, in ``docs/validation.md``.
Messages are read only through the reader (``read/``), so every shape the
package reads is checked the same way.

Law (tested with hypothesis): with ``cascade_tool_messages`` on (the default), if
``validate_history(xs, provider=p) == []`` then
``validate_history(MessageReducer(config=c).reduce(xs).surviving, provider=p) == []``
for every config ``c`` with ``c.start_on == "human"`` when ``p == "anthropic"``; for
``p == "gemini"`` with ``c = agent_config(...)`` and for ``p == "bedrock"`` with
``c = agent_config(provider="bedrock", ...)`` (``tests/test_shape_gemini.py``,
``tests/test_shape_bedrock.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError, ReducerError
from .plan import response_units
from .read import (
    AI,
    BLANK_PART,
    FUNCTION,
    GROUP_REASONING,
    HUMAN,
    REASONING_PART,
    SYSTEM,
    TOOL,
    TOOL_RESULT_PART,
    TOOL_USE_PART,
    MessageRecord,
    call_signatures,
    content_kinds,
    item_type,
    read_messages,
    reasoning_parts,
)
from .reducer import as_message_list

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

#: Every rule, by provider.
RULES: dict[str, tuple[str, ...]] = {
    "openai": (
        UNKNOWN_ROLE,
        ORPHAN_RESULT,
        LATE_RESULT,
        DUPLICATE_RESULT,
        UNANSWERED_CALL,
        SPLIT_PARALLEL,
        MISSING_REASONING,
    ),
    "anthropic": (
        UNKNOWN_ROLE,
        ORPHAN_RESULT,
        LATE_RESULT,
        DUPLICATE_RESULT,
        UNANSWERED_CALL,
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
        UNKNOWN_ROLE,
        ORPHAN_RESULT,
        LATE_RESULT,
        DUPLICATE_RESULT,
        UNANSWERED_CALL,
        RESPONSE_COUNT,
        FIRST_NOT_USER,
        ALTERNATION,
        CALL_TURN_ORDER,
        MISSING_SIGNATURE,
        EMPTY_TEXT,
    ),
    "bedrock": (
        UNKNOWN_ROLE,
        ORPHAN_RESULT,
        LATE_RESULT,
        DUPLICATE_RESULT,
        UNANSWERED_CALL,
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


class _Checker:
    """One pass over the views; collects problems in message order."""

    def __init__(self, messages: list[Any], anthropic: bool) -> None:
        self.messages = messages
        self.views = read_messages(messages)
        self.anthropic = anthropic
        self.problems: list[Problem] = []
        #: call id -> index of the latest assistant message that issued it.
        self.issued: dict[str, int] = {}
        #: call ids answered since they were issued.
        self.answered: set[str] = set()
        #: calls of the open assistant turn still awaiting a result: id -> issuer index.
        self.awaiting: dict[str, int] = {}
        #: whether the open assistant turn got any result at all.
        self.got_result = False
        #: role of the previous message that takes part in turns (None before the first).
        self.previous: str | None = None

    def add(self, index: int, rule: str, detail: str, fix: str) -> None:
        self.problems.append(Problem(index, rule, detail, fix))

    def close(self, at: int | None, *, inclusive: bool = False) -> None:
        """End the open assistant turn's results: every call still awaiting one is a problem.

        ``at`` is the index of the message that ends them (``inclusive``: the results end
        with that message, not before it), or ``None`` at the end of the list.
        """
        if self.awaiting:
            # Calls of the last message may be pending: the tools have not run yet.
            pending = at is None and not self.got_result and self.previous == AI
            if not pending:
                by_issuer: dict[int, list[str]] = {}
                for call, issuer in self.awaiting.items():
                    by_issuer.setdefault(issuer, []).append(call)
                if at is None:
                    where = "by the end of the history"
                else:
                    where = f"{'by' if inclusive else 'before'} message {at}"
                for issuer, calls in sorted(by_issuer.items()):
                    self._report_unanswered(issuer, calls, where)
        self.awaiting = {}
        self.got_result = False

    def _report_unanswered(self, issuer: int, calls: list[str], where: str) -> None:
        if self.got_result:
            self.add(
                issuer,
                SPLIT_PARALLEL,
                f"parallel tool calls answered only in part: {_ids(calls)} "
                f"{'get' if len(calls) > 1 else 'gets'} no result {where}, while other calls "
                "of the same turn do",
                f"answer every call of message {issuer} in the tool results that directly "
                "follow it, or drop the unanswered calls",
            )
        else:
            self.add(
                issuer,
                UNANSWERED_CALL,
                f"tool call{'s' if len(calls) > 1 else ''} {_ids(calls)} never answered {where}",
                f"add a tool result for each call directly after message {issuer}, or remove "
                "the calls (only the last message may have calls still pending)",
            )

    def assistant(self, index: int, calls: tuple[str, ...]) -> None:
        if not (self.anthropic and self.previous == AI):
            self.close(index)
        # Consecutive assistant messages are one Anthropic turn: their calls join it.
        for call in calls:
            self.issued[call] = index
            self.answered.discard(call)
            self.awaiting[call] = index

    def result(self, index: int, answers: tuple[str, ...]) -> None:
        if not answers:
            self.add(
                index,
                ORPHAN_RESULT,
                "tool message names no tool call id",
                "set tool_call_id to the id of the call it answers",
            )
        for call in answers:
            if call in self.awaiting:
                del self.awaiting[call]
                self.answered.add(call)
                self.got_result = True
            elif call in self.answered:
                self.add(
                    index,
                    DUPLICATE_RESULT,
                    f"tool call {call!r} (message {self.issued[call]}) is answered more than once",
                    "keep one tool result per call",
                )
            elif call in self.issued:
                issuer = self.issued[call]
                self.add(
                    index,
                    LATE_RESULT,
                    f"tool result for {call!r} is not among the results that directly follow "
                    f"its call at message {issuer}",
                    f"move it right after message {issuer}, before any other user or "
                    "assistant message",
                )
            else:
                self.add(
                    index,
                    ORPHAN_RESULT,
                    f"tool result answers {call!r}, which no earlier assistant message issued",
                    "remove this result, or restore the assistant message that made the call",
                )

    def run(self) -> list[Problem]:
        last = len(self.views) - 1
        for i, view in enumerate(self.views):
            role = view.role
            if role not in _KNOWN_ROLES:  # for every provider, before its own rules
                self.problems.append(_unknown_role(i, role))
                continue
            if role == SYSTEM:
                if not self.anthropic:
                    self.close(i)  # OpenAI: nothing may come between calls and their results
                continue  # Anthropic: system prompts are not turns
            if self.anthropic:
                self._anthropic_checks(i, view.role, bool(view.calls), bool(view.answers), last)
            if role == AI:
                self.assistant(i, view.calls)
            elif role == TOOL or (role == HUMAN and view.answers):
                self.result(i, view.answers)
                if role == HUMAN and self._text_after_results(i):
                    self.close(i, inclusive=True)  # content after the results ends them
            else:
                self.close(i)
            self.previous = role
        self.close(None)
        if self.anthropic:
            self._thinking_checks()
        else:
            self._reasoning_content_checks()
        return sorted(self.problems, key=lambda p: p.index)

    def _turns(self) -> list[list[int]]:
        """The assistant turns: runs of consecutive ai messages (system messages aside)."""
        turns: list[list[int]] = []
        run: list[int] = []
        for i, view in enumerate(self.views):
            if view.role == SYSTEM:
                continue
            if view.role == AI:
                run.append(i)
            elif run:
                turns.append(run)
                run = []
        if run:
            turns.append(run)
        return turns

    def _thinking_checks(self) -> None:
        """Anthropic extended thinking: signed blocks, first in their message, never last,
        and the message issuing the latest tool round's calls opening with one."""
        thinking = False
        for i, view in enumerate(self.views):
            if view.role != AI:
                continue
            parts = reasoning_parts(self.messages[i], i)
            if not parts:
                continue
            thinking = True
            for part in parts:
                if not part.signed:
                    field = "signature" if part.kind == "thinking" else "data"
                    self.add(
                        i,
                        UNSIGNED_THINKING,
                        f"{part.kind} block content[{part.block}] has no {field} (Anthropic: "
                        f"'messages.{i}.content.{part.block}.{part.kind}.{field}: Field "
                        "required')",
                        "send the block back exactly as the API returned it, or drop it",
                    )
            kinds = content_kinds(self.messages[i], i)
            if REASONING_PART not in kinds:
                continue
            if kinds[0] != REASONING_PART:
                self.add(
                    i,
                    THINKING_FIRST,
                    f"the assistant message holds thinking blocks but opens with {kinds[0]!r} "
                    "(Anthropic: 'If an assistant message contains any thinking blocks, the "
                    "first block must be thinking or redacted_thinking.')",
                    "keep the thinking blocks first, as the API returned them",
                )
            # Calls kept outside the content (tool_calls) are sent as tool_use blocks last.
            if kinds[-1] == REASONING_PART and not view.calls:
                self.add(
                    i,
                    THINKING_LAST,
                    "the assistant message ends with a thinking block (Anthropic: 'The final "
                    "block in an assistant message cannot be `thinking`.')",
                    "keep the blocks that followed the thinking block, or drop it",
                )
        turns = self._turns()
        if not thinking or not turns:
            return
        last = turns[-1]
        after = [v for v in self.views[last[-1] + 1 :] if v.role != SYSTEM]
        callers = [i for i in last if self.views[i].calls]
        if not callers or any(not v.answers for v in after):
            return  # no tool round in progress: the rule is about the latest one
        i = callers[-1]
        kinds = content_kinds(self.messages[i], i)
        if not kinds or kinds[0] != REASONING_PART:
            self.add(
                i,
                THINKING_TURN,
                "thinking is on, but the assistant message of the latest tool round does not "
                "open with a thinking block (Anthropic: 'When `thinking` is enabled, a final "
                "`assistant` message must start with a thinking block (preceeding the "
                "lastmost set of `tool_use` and `tool_result` blocks).')",
                "send that message's thinking block back with it",
            )

    def _reasoning_content_checks(self) -> None:
        """DeepSeek's thinking mode: once any assistant message carries reasoning_content,
        each one issuing tool calls must carry it too."""
        parts = [
            reasoning_parts(self.messages[i], i) if v.role == AI else ()
            for i, v in enumerate(self.views)
        ]
        if not any(p.kind == "reasoning_content" for found in parts for p in found):
            return
        for i, view in enumerate(self.views):
            if view.role != AI or not view.calls:
                continue
            if not any(p.kind == "reasoning_content" for p in parts[i]):
                self.add(
                    i,
                    MISSING_REASONING,
                    "assistant message issues tool calls without the reasoning_content other "
                    "assistant messages carry (DeepSeek: 'Missing `reasoning_content` field in "
                    f"the assistant message at message index {i}.')",
                    "send reasoning_content back on every assistant message of a tool round",
                )

    def _text_after_results(self, index: int) -> bool:
        kinds = content_kinds(self.messages[index], index)
        seen = False
        for kind in kinds:
            if kind == TOOL_RESULT_PART:
                seen = True
            elif seen:
                return True
        return False

    def _anthropic_checks(
        self, index: int, role: str, calls: bool, answers: bool, last: int
    ) -> None:
        if self.previous is None and role == AI:
            self.add(
                index,
                FIRST_NOT_USER,
                "the first non-system message is an assistant message",
                "start the conversation with a user message (reduce with start_on='human', "
                "or keep the user's request)",
            )
        if role not in (HUMAN, AI, TOOL):
            self.add(
                index,
                ALTERNATION,
                f"role {role!r} is neither a user nor an assistant turn",
                "convert it to a user or assistant message, or drop it",
            )
            return
        kinds = content_kinds(self.messages[index], index)
        if role == HUMAN and answers and _content_before_results(kinds):
            self.add(
                index,
                RESULTS_FIRST,
                "content comes before the tool_result blocks of this user message",
                "put every tool_result block first in the content, and text after them",
            )
        if BLANK_PART in kinds:
            self.add(
                index,
                EMPTY_TEXT,
                f"text block content[{kinds.index(BLANK_PART)}] is empty or only whitespace",
                "remove the empty text block or give it text",
            )
        elif not kinds and role != TOOL and not calls and not (role == AI and index == last):
            self.add(
                index,
                EMPTY_TEXT,
                f"{'user' if role == HUMAN else 'assistant'} message has empty content",
                "give it text, or drop it (only a final assistant message may be empty)",
            )


class _GeminiChecker:
    """Gemini ``contents`` rules, in Gemini's wording: a function call turn is answered by
    the very next content, one function response part per function call part."""

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages
        self.views = read_messages(messages)
        self.problems: list[Problem] = []
        #: call id -> index of the latest model content that issued it.
        self.issued: dict[str, int] = {}
        #: call ids answered since they were issued.
        self.answered: set[str] = set()
        #: ``(index, call ids, call parts)`` of the model turn awaiting its responses.
        self.open: tuple[int, tuple[str, ...], int] | None = None

    def add(self, index: int, rule: str, detail: str, fix: str) -> None:
        self.problems.append(Problem(index, rule, detail, fix))

    def close(self, at: int) -> None:
        if self.open is not None:
            issuer, calls, _ = self.open
            self.add(
                issuer,
                UNANSWERED_CALL,
                f"function call{'s' if len(calls) > 1 else ''} {_ids(calls)} "
                f"{'get' if len(calls) > 1 else 'gets'} no function response before content "
                f"{at}: \"Please ensure that function response turn comes immediately after a "
                'function call turn."',
                f"put a user content with one functionResponse part per call right after "
                f"content {issuer}, or remove the calls (only the last content may have calls "
                "still pending)",
            )
            self.open = None

    def run(self) -> list[Problem]:
        signing = any(
            v.role == AI and call_signatures(m)[0]
            for m, v in zip(self.messages, self.views, strict=True)
        )
        current = max(
            (i for i, v in enumerate(self.views) if v.role == HUMAN and not v.answers),
            default=-1,
        )
        previous: str | None = None
        for i, view in enumerate(self.views):
            role = view.role
            if role not in _KNOWN_ROLES:  # for every provider, before its own rules
                self.problems.append(_unknown_role(i, role))
                continue
            if role == SYSTEM:
                continue  # the request's systemInstruction, planned as a message
            if role not in (HUMAN, AI):
                self.add(
                    i,
                    ALTERNATION,
                    f"role {role!r} is not a Gemini role: \"Please use a valid role: user, "
                    'model."',
                    "convert it to a user or model content, or drop it",
                )
                self.close(i)
                previous = role
                continue
            kinds = content_kinds(self.messages[i], i)
            self._empty(i, kinds)
            if previous is None and role != HUMAN:
                self.add(
                    i,
                    FIRST_NOT_USER,
                    "the first content comes from the model: \"First content should be with "
                    "role 'user', got model\"",
                    "start the contents with a user content (reduce with start_on='human', "
                    "or keep the user's request)",
                )
            if role == AI:
                self.close(i)
                if view.calls:
                    self._calls(i, view.calls, kinds, previous, signing and i > current)
            elif view.answers:
                self._responses(i, view.answers, kinds)
            else:
                self.close(i)
            previous = role
        return sorted(self.problems, key=lambda p: p.index)

    def _empty(self, index: int, kinds: tuple[str, ...]) -> None:
        if not kinds:
            self.add(
                index,
                EMPTY_TEXT,
                f'content {index} has no parts: "contents.parts must not be empty"',
                "give it a part, or drop it",
            )
        elif BLANK_PART in kinds:
            self.add(
                index,
                EMPTY_TEXT,
                f"text part parts[{kinds.index(BLANK_PART)}] is empty: \"Unable to submit "
                'request because it has an empty text parameter."',
                "remove the empty text part or give it text",
            )

    def _calls(
        self,
        index: int,
        calls: tuple[str, ...],
        kinds: tuple[str, ...],
        previous: str | None,
        check_signature: bool,
    ) -> None:
        if previous == AI:
            self.add(
                index,
                CALL_TURN_ORDER,
                "a function call turn follows a model turn: \"Please ensure that function call "
                'turn comes immediately after a user turn or after a function response turn."',
                f"merge content {index} into the model content before it, or drop one of them",
            )
        if check_signature:
            _, signed = call_signatures(self.messages[index])
            if signed and not signed[0][2]:
                call, position, _ = signed[0]
                self.add(
                    index,
                    MISSING_SIGNATURE,
                    f"function call {call!r} (parts[{position}]) of the current turn has no "
                    'thoughtSignature: "Function call is missing a thought_signature in '
                    'functionCall parts."',
                    "send the model's content back exactly as it was returned, signatures and "
                    "all",
                )
        for call in calls:
            self.issued[call] = index
            self.answered.discard(call)
        self.open = (index, calls, kinds.count(TOOL_USE_PART))

    def _responses(self, index: int, answers: tuple[str, ...], kinds: tuple[str, ...]) -> None:
        awaiting = self.open
        self.open = None
        expected = set(awaiting[1]) if awaiting is not None else set()
        for call in answers:
            if call in expected:
                self.answered.add(call)
            elif call in self.answered:
                self.add(
                    index,
                    DUPLICATE_RESULT,
                    f"function call {call!r} (content {self.issued[call]}) is answered more "
                    "than once",
                    "keep one function response per call",
                )
            elif call in self.issued:
                self.add(
                    index,
                    LATE_RESULT,
                    f"function response {call!r} does not come right after its call at content "
                    f"{self.issued[call]}: \"Please ensure that function response turn comes "
                    'immediately after a function call turn."',
                    f"move it into the user content right after content {self.issued[call]}",
                )
            else:
                self.add(
                    index,
                    ORPHAN_RESULT,
                    f"function response {call!r} answers no function call of the model turn "
                    "before it",
                    "remove this response, or restore the model content that made the call",
                )
        if awaiting is not None:
            responses = kinds.count(TOOL_RESULT_PART)
            if responses != awaiting[2]:
                self.add(
                    index,
                    RESPONSE_COUNT,
                    f"{responses} function response part{'' if responses == 1 else 's'} "
                    f"answer {awaiting[2]} function call part{'' if awaiting[2] == 1 else 's'} "
                    f"of content {awaiting[0]}: \"Please ensure that the number of function "
                    "response parts is equal to the number of function call parts of the "
                    'function call turn."',
                    f"answer every call of content {awaiting[0]} in this one content, once",
                )


class _BedrockChecker:
    """Bedrock Converse rules, in Bedrock's wording: user and assistant messages alternate,
    and each assistant ``toolUse`` is answered by a ``toolResult`` in the next message."""

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages
        self.views = read_messages(messages)
        self.problems: list[Problem] = []
        #: call id -> index of the latest assistant message that issued it.
        self.issued: dict[str, int] = {}
        #: call ids answered since they were issued.
        self.answered: set[str] = set()

    def add(self, index: int, rule: str, detail: str, fix: str) -> None:
        self.problems.append(Problem(index, rule, detail, fix))

    def run(self) -> list[Problem]:
        kinds = [content_kinds(m, i) for i, m in enumerate(self.messages)]
        thinking = any(
            v.role == AI and REASONING_PART in k for v, k in zip(self.views, kinds, strict=True)
        )
        current = max(
            (i for i, v in enumerate(self.views) if v.role == HUMAN and not v.answers),
            default=-1,
        )
        last_ai = max((i for i, v in enumerate(self.views) if v.role == AI), default=-1)
        previous: str | None = None
        open_calls: tuple[int, tuple[str, ...]] | None = None
        for i, view in enumerate(self.views):
            role = view.role
            if role not in _KNOWN_ROLES:  # for every provider, before its own rules
                self.problems.append(_unknown_role(i, role))
                continue
            if role == SYSTEM:
                continue  # the request's top-level system, planned as a message
            if role not in (HUMAN, AI):
                self.add(
                    i,
                    ALTERNATION,
                    f"role {role!r}: \"Member must satisfy enum value set: [user, assistant]\"",
                    "convert it to a user or assistant message, or drop it",
                )
                previous = role
                continue
            self._empty(i, kinds[i])
            if previous is None and role != HUMAN:
                self.add(
                    i,
                    FIRST_NOT_USER,
                    "the first message is an assistant message: \"A conversation must start "
                    "with a user message. Try again with a conversation that starts with a "
                    'user message."',
                    "start the conversation with a user message (reduce with "
                    "start_on='human', or keep the user's request)",
                )
            elif previous == role:
                self.add(
                    i,
                    ALTERNATION,
                    f"two {'user' if role == HUMAN else 'assistant'} messages in a row: \"A "
                    "conversation must alternate between user and assistant roles.\"",
                    f"merge message {i} into the message before it, or drop one of them",
                )
            if role == AI:
                if open_calls is not None:
                    self._unanswered(i, open_calls, ())
                open_calls = (i, view.calls) if view.calls else None
                for call in view.calls:
                    self.issued[call] = i
                    self.answered.discard(call)
                final = thinking and view.calls and i == last_ai and i > current
                if final and kinds[i][:1] != (REASONING_PART,):
                    self.add(
                        i,
                        REASONING_FIRST,
                        "the last assistant message uses tools but does not start with its "
                        "reasoningContent block: \"Expected `thinking` or `redacted_thinking`, "
                        "but found `tool_use`. When `thinking` is enabled, a final `assistant` "
                        'message must start with a thinking block"',
                        "send the assistant message back exactly as the model returned it, "
                        "reasoningContent first",
                    )
            else:
                self._results(i, view.answers, open_calls)
                open_calls = None
            previous = role
        return sorted(self.problems, key=lambda p: p.index)

    def _empty(self, index: int, kinds: tuple[str, ...]) -> None:
        if not kinds:
            self.add(
                index,
                EMPTY_TEXT,
                f"message {index} has no content: \"The content field in the Message object "
                f'at messages.{index} is empty."',
                "give it a content block, or drop it",
            )
        elif BLANK_PART in kinds:
            at = kinds.index(BLANK_PART)
            self.add(
                index,
                EMPTY_TEXT,
                f"\"The text field in the ContentBlock object at messages.{index}.content.{at} "
                'is blank."',
                "remove the empty text block or give it text",
            )

    def _unanswered(
        self, at: int, open_calls: tuple[int, tuple[str, ...]], answered: tuple[str, ...]
    ) -> None:
        issuer, calls = open_calls
        missing = [c for c in calls if c not in answered]
        if not missing:
            return
        rule = SPLIT_PARALLEL if len(missing) < len(calls) else UNANSWERED_CALL
        self.add(
            issuer,
            rule,
            f"\"Expected toolResult blocks at messages.{at}.content for the following Ids: "
            f"{', '.join(missing)}\"",
            f"answer every toolUse of message {issuer} with a toolResult in the user message "
            "right after it (only the last message may have calls still pending)",
        )

    def _results(
        self, index: int, answers: tuple[str, ...], open_calls: tuple[int, tuple[str, ...]] | None
    ) -> None:
        expected = set(open_calls[1]) if open_calls is not None else set()
        for call in answers:
            if call in expected:
                self.answered.add(call)
                continue
            if call in self.answered:
                rule, what = DUPLICATE_RESULT, f"toolUse {call!r} is answered more than once"
            elif call in self.issued:
                rule, what = LATE_RESULT, (
                    f"toolResult {call!r} does not answer the assistant message right before it "
                    f"(its toolUse is at message {self.issued[call]})"
                )
            else:
                rule, what = ORPHAN_RESULT, f"toolResult {call!r} answers no toolUse"
            self.add(
                index,
                rule,
                f"{what}: \"The number of toolResult blocks at messages.{index}.content "
                'exceeds the number of toolUse blocks of previous turn."',
                "keep one toolResult per toolUse of the previous assistant message, and drop "
                "the others",
            )
        if open_calls is not None:
            self._unanswered(index, open_calls, answers)


def _content_before_results(kinds: tuple[str, ...]) -> bool:
    """Whether any part precedes the last tool_result part without being one."""
    seen_other = False
    for kind in kinds:
        if kind == TOOL_RESULT_PART:
            if seen_other:
                return True
        else:
            seen_other = True
    return False


def _item_label(message: object, view: MessageRecord) -> str:
    kind = item_type(message)
    if kind is not None:
        return kind
    return "message" if view.role in (HUMAN, AI, SYSTEM) else f"{view.role} message"


def _check_responses(messages: list[Any]) -> list[Problem]:
    """The OpenAI Responses API rules: outputs and calls paired by ``call_id`` anywhere
    in the input, reasoning followed by its item, item ids unique."""
    views = read_messages(messages)
    problems: list[Problem] = []
    n = len(views)
    last = max((i for i, v in enumerate(views) if v.role in (HUMAN, AI)), default=-1)
    pending_from = n
    if last >= 0 and views[last].role == AI:
        pending_from = last
        for begin, end in response_units(views):
            if begin <= last < end:
                pending_from = begin
    issued: dict[str, int] = {}
    answered: set[str] = set()
    seen: dict[str, int] = {}
    for i, view in enumerate(views):
        if view.role not in _KNOWN_ROLES:  # for every provider, before its own rules
            problems.append(_unknown_role(i, view.role))
            continue
        if view.id is not None:
            if view.id in seen:
                problems.append(
                    Problem(
                        i,
                        DUPLICATE_ITEM,
                        f"item id {view.id!r} is also the id of item {seen[view.id]} "
                        f"(OpenAI: 'Duplicate item found with id {view.id}.')",
                        "keep one item per id",
                    )
                )
            else:
                seen[view.id] = i
        if view.role == TOOL and not view.answers:
            problems.append(
                Problem(i, ORPHAN_RESULT, f"{_item_label(messages[i], view)} names no call_id",
                        "set call_id to the call_id of the call it answers")
            )
        for call in view.answers:
            if call in issued:
                answered.add(call)
                continue
            problems.append(
                Problem(
                    i,
                    ORPHAN_RESULT,
                    f"{_item_label(messages[i], view)} answers call_id {call!r}, which no "
                    f"earlier item issued (OpenAI: 'No tool call found for function call "
                    f"output with call_id {call}.')",
                    "remove this output, or restore the call item it answers",
                )
            )
        for call in view.calls:
            issued.setdefault(call, i)
        if view.group == GROUP_REASONING and (i + 1 == n or views[i + 1].role != AI):
            label = repr(view.id) if view.id is not None else "(no id)"
            problems.append(
                Problem(
                    i,
                    REASONING_ALONE,
                    f"reasoning item {label} is not followed by the output item it belongs "
                    f"to (OpenAI: 'Item {label} of type 'reasoning' was provided without its "
                    "required following item.')",
                    "keep the reasoning item directly before the message or call items of "
                    "its response, or drop it with them",
                )
            )
    for call, i in issued.items():
        if call not in answered and i < pending_from:
            kind = _item_label(messages[i], views[i]).replace("_", " ")
            problems.append(
                Problem(
                    i,
                    UNANSWERED_CALL,
                    f"call_id {call!r} never gets an output item (OpenAI: 'No tool output "
                    f"found for {kind} {call}.')",
                    "add an output item with this call_id, or remove the call (only the "
                    "calls of the last response may be pending)",
                )
            )
    return sorted(problems, key=lambda p: p.index)


def validate_history(messages: Any, *, provider: str = "openai") -> list[Problem]:
    """List every rule of ``provider`` that ``messages`` breaks; ``[]`` means the API accepts it.

    Args:
        messages: a list of messages of any shape the package reads (LangChain messages,
            OpenAI dicts, Anthropic dicts with content blocks, Gemini contents, Bedrock
            Converse messages, OpenAI Responses items); ``None`` is an empty list.
        provider: one of :data:`PROVIDERS` (``"openai"`` is chat completions).

    Returns:
        The problems in message order, each naming the index, the rule and a fix.

    Raises:
        ValueError: ``provider`` is not one of :data:`PROVIDERS`.
        MessageFormatError: a message cannot be read (a ``TypeError`` naming its index
            and the field).

    Example:
        >>> history = [
        ...     {"role": "user", "content": "weather?"},
        ...     {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ... ]
        >>> [p.rule for p in validate_history(history)]
        ['orphan-result']
    """
    if provider not in PROVIDERS:
        names = ", ".join(repr(p) for p in PROVIDERS)
        raise ConfigError(f"provider must be one of {names}, got {provider!r}")
    if provider == "gemini":
        return _GeminiChecker(as_message_list(messages)).run()
    if provider == "bedrock":
        return _BedrockChecker(as_message_list(messages)).run()
    if provider == "openai-responses":
        return _check_responses(as_message_list(messages))
    return _Checker(as_message_list(messages), provider == "anthropic").run()


def check_history(messages: Any, *, provider: str = "openai") -> Any:
    """Return ``messages`` unchanged if ``provider`` accepts them, else raise listing every problem.

    Raises:
        InvalidHistoryError: a ``ValueError`` whose ``problems`` lists what
            :func:`validate_history` found.
        ValueError: ``provider`` is not one of :data:`PROVIDERS`.
    """
    problems = validate_history(messages, provider=provider)
    if problems:
        raise InvalidHistoryError(provider, problems)
    return messages
