"""The checks of Bedrock Converse histories."""

from __future__ import annotations

from ..read import (
    AI,
    HUMAN,
    REASONING_PART,
    SYSTEM,
    content_kinds,
)
from .rules import (
    ALTERNATION,
    DUPLICATE_RESULT,
    FIRST_NOT_USER,
    LATE_RESULT,
    ORPHAN_RESULT,
    REASONING_FIRST,
    SPLIT_PARALLEL,
    UNANSWERED_CALL,
    Problem,
    _PartChecks,
)


class _BedrockChecker(_PartChecks):
    """Bedrock Converse rules, in Bedrock's wording: user and assistant messages alternate,
    and each assistant ``toolUse`` is answered by a ``toolResult`` in the next message."""

    NO_PARTS = (
        'message {index} has no content: "The content field in the Message object at '
        'messages.{index} is empty."',
        "give it a content block, or drop it",
    )
    BLANK = (
        '"The text field in the ContentBlock object at messages.{index}.content.{at} is '
        'blank."',
        "remove the empty text block or give it text",
    )

    def run(self) -> list[Problem]:
        kinds = [content_kinds(m, i) for i, m in enumerate(self.messages)]
        thinking = any(
            v.role == AI and REASONING_PART in k for v, k in zip(self.views, kinds, strict=True)
        )
        current = self.current()
        last_ai = max((i for i, v in enumerate(self.views) if v.role == AI), default=-1)
        previous: str | None = None
        open_calls: tuple[int, tuple[str, ...]] | None = None
        for i, view in self.known():
            role = view.role
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
            self.empty(i, kinds[i])
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
        return self.found()

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
