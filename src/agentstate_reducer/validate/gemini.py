"""The checks of Gemini ``generateContent`` histories."""

from __future__ import annotations

from typing import Any

from ..read import (
    AI,
    HUMAN,
    SYSTEM,
    TOOL_RESULT_PART,
    TOOL_USE_PART,
    call_signatures,
    content_kinds,
)
from .rules import (
    ALTERNATION,
    CALL_TURN_ORDER,
    DUPLICATE_RESULT,
    FIRST_NOT_USER,
    LATE_RESULT,
    MISSING_SIGNATURE,
    ORPHAN_RESULT,
    RESPONSE_COUNT,
    UNANSWERED_CALL,
    Problem,
    _ids,
    _PartChecks,
)


class _GeminiChecker(_PartChecks):
    """Gemini ``contents`` rules, in Gemini's wording: a function call turn is answered by
    the very next content, one function response part per function call part."""

    NO_PARTS = (
        'content {index} has no parts: "contents.parts must not be empty"',
        "give it a part, or drop it",
    )
    BLANK = (
        'text part parts[{at}] is empty: "Unable to submit request because it has an empty '
        'text parameter."',
        "remove the empty text part or give it text",
    )

    def __init__(self, messages: list[Any]) -> None:
        super().__init__(messages)
        #: ``(index, call ids, call parts)`` of the model turn awaiting its responses.
        self.open: tuple[int, tuple[str, ...], int] | None = None

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
        current = self.current()
        previous: str | None = None
        for i, view in self.known():
            role = view.role
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
            self.empty(i, kinds)
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
        return self.found()

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
