"""The checks of chat histories: OpenAI-compatible chat and Anthropic Messages."""

from __future__ import annotations

from typing import Any

from ..read import (
    AI,
    BLANK_PART,
    HUMAN,
    REASONING_PART,
    SYSTEM,
    TOOL,
    TOOL_RESULT_PART,
    content_kinds,
    reasoning_parts,
)
from .rules import (
    ALTERNATION,
    DUPLICATE_RESULT,
    EMPTY_TEXT,
    FIRST_NOT_USER,
    LATE_RESULT,
    MISSING_REASONING,
    ORPHAN_RESULT,
    RESULTS_FIRST,
    SPLIT_PARALLEL,
    THINKING_FIRST,
    THINKING_LAST,
    THINKING_TURN,
    UNANSWERED_CALL,
    UNSIGNED_THINKING,
    Problem,
    _Checks,
    _ids,
)


class _Checker(_Checks):
    """One pass over the views; collects problems in message order."""

    def __init__(self, messages: list[Any], anthropic: bool) -> None:
        super().__init__(messages)
        self.anthropic = anthropic
        #: calls of the open assistant turn still awaiting a result: id -> issuer index.
        self.awaiting: dict[str, int] = {}
        #: whether the open assistant turn got any result at all.
        self.got_result = False
        #: role of the previous message that takes part in turns (None before the first).
        self.previous: str | None = None

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
        for i, view in self.known():
            role = view.role
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
        return self.found()

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
