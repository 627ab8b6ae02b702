"""How a chat API bills a message: the framing every built-in counter shares.

A built-in counter (the heuristic, exact counts, the estimators) is this framing over a
text counter; :func:`read_counted` reads and counts a message in one read for them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any, cast

from ..read import (
    AI,
    CHAT,
    FUNCTION,
    HUMAN,
    NO_EXTRAS,
    SYSTEM,
    TOOL,
    Extras,
    MessageRecord,
    args_text,
    read_message,
    too_deep_among,
)
from ..read.chat import Billed, fast_biller
from .heuristic import _approximate_o200k
from .memo import TextMemo

__all__ = (
    "MEDIA_TOKENS",
    "TokenCounter",
    "approximate_token_count",
    "count_back",
    "count_message",
    "read_counted",
)


#: A per-message token counter.
TokenCounter = Callable[[Any], int]

#: Tokens billed per image, audio clip, video or file, whatever its byte length: what a
#: 1024x1024 image costs at OpenAI's high detail (85 + 4 tiles x 170).
MEDIA_TOKENS = 765
#: ``<|im_start|>``, the separator after the role, and ``<|im_end|>``.
_FRAME_TOKENS = 3
#: A known role name ("user", "assistant", "system", "tool", "function") is one token.
_KNOWN_ROLES = frozenset({HUMAN, AI, SYSTEM, TOOL, FUNCTION})
#: Separator between a message's ``name`` and its role.
_NAME_TOKENS = 1
#: Framing of one tool call around its name and JSON arguments.
_TOOL_CALL_TOKENS = 3


def count_message(message: Any, text_tokens: Callable[[str], int], index: int = 0) -> int:
    """Tokens one message costs when a chat API frames it, counting text with ``text_tokens``.

    Billed: the frame and role, ``name``, the text of every text block, each tool
    call's name and JSON arguments, ``tool_call_id`` and ``tool_result`` ids, and
    :data:`MEDIA_TOKENS` per image, audio clip, video or file.
    """
    record = read_message(message, index)
    try:
        return _count_record(record, text_tokens)
    except RecursionError:  # arguments or a value too deep for their JSON
        error = too_deep_among([message], index)
        if error is None:
            raise
        raise error from None


def _count_record(record: MessageRecord, text_tokens: Callable[[str], int]) -> int:
    """:func:`count_message` of a message already read."""
    role, _, _, answers, text, extras = record
    total = _FRAME_TOKENS + 1 if role in _KNOWN_ROLES else _FRAME_TOKENS + text_tokens(role)
    if text is not None:
        total += text_tokens(text)
    if answers and role == TOOL and extras[7] is CHAT:  # a chat tool message's tool_call_id
        total += text_tokens(answers[0])
    if extras is NO_EXTRAS:
        return total
    return total + _count_extras(extras, text_tokens)


def _count_extras(extras: Extras, text_tokens: Callable[[str], int]) -> int:
    """What :func:`_count_record` bills of a record's :class:`Extras`."""
    name, texts, calls, call_id, result_ids, media, _, _ = extras
    total = media * MEDIA_TOKENS
    for text in texts:
        total += text_tokens(text)
    if name is not None:
        total += _NAME_TOKENS + text_tokens(name)
    for call_name, args in calls:
        total += _TOOL_CALL_TOKENS + text_tokens(call_name) + text_tokens(args_text(args))
    if call_id is not None:
        total += text_tokens(call_id)
    for ident in result_ids:
        total += text_tokens(ident)
    return total


def read_counted(
    message: Any, counter: TokenCounter, index: int = 0
) -> tuple[MessageRecord, int] | None:
    """The record and count of ``message`` in one read, or ``None``.

    For a built-in counter (the heuristic, exact counts), whose count follows from the
    record: the result equals ``(read_message(message), counter(message))``. ``None``
    for any other counter: read and count the message apart.
    """
    text_tokens = _text_counter(counter)
    if text_tokens is None:
        return None
    record = read_message(message, index)
    try:
        return record, _count_record(record, text_tokens)
    except RecursionError:
        error = too_deep_among([message], index)
        if error is None:
            raise
        raise error from None


def count_back(
    messages: Sequence[Any], stop: int, first: int, used: float, budget: float,
    counter: TokenCounter, linking: list[int] | None = None, grouped: list[int] | None = None,
) -> tuple[int, float, list[MessageRecord]] | None:
    """The longest run ``messages[lo:stop]`` (``lo >= first``) whose counts keep ``used``
    within ``budget``, each message read and counted once, from ``stop - 1`` down.

    Returns ``(lo, used + the run's counts, views)``: ``views[k]`` is the record of
    ``messages[stop - 1 - k]``, one more than the run when a message did not fit; for a
    message the reader gives without its record (see
    :func:`~agentstate_reducer.read.chat.fast_biller`), a view of its role and links
    alone, which links and groups as its record does. Equal to :func:`read_counted` of each
    message in turn, adding while ``used + count <= budget``; ``None`` for a counter that
    is not built in. Errors name the index, as :func:`read_counted`'s do. ``linking``,
    when given, gets the index of each message read that issues or answers calls
    appended, from ``stop - 1`` down; ``grouped``, that of each whose record groups
    (:data:`~agentstate_reducer.read.record_group` is not ``GROUP_NONE``).
    """
    text_tokens = _text_counter(counter)
    if text_tokens is None:
        return None
    # A hit in the memo is the count the memo's call would give: looked up here, without
    # a call (most texts of a history counted again are hits, found by identity).
    look = (text_tokens.known if isinstance(text_tokens, TextMemo) else {}).get
    records: list[MessageRecord] = []
    keep = records.append
    mark = ([] if linking is None else linking).append
    mark_group = ([] if grouped is None else grouped).append
    roles = _KNOWN_ROLES
    readers = _Readers()
    n = len(messages)
    lo = stop
    message = None
    try:
        for message in islice(reversed(messages), n - stop, n - first):
            try:
                got = readers[type(message)](message)
            except Exception:  # read again by read_message, which names the field
                got = None
            if type(got) is tuple:  # a plain text message, or one issuing a call: its view
                if len(got) == 2:  # and its text
                    view, text = got
                    cost = 0
                else:  # its text and its one call's name and arguments, billed as a record's
                    view, text, tool, args = cast("tuple[MessageRecord, str | None, str, Any]", got)
                    args = args_text(args)
                    cost = _TOOL_CALL_TOKENS + (look(tool) or text_tokens(tool))
                    cost += look(args) or text_tokens(args)
                    mark(lo - 1)
                keep(view)
                role = view[0]
                cost += _FRAME_TOKENS + 1 if role in roles else _FRAME_TOKENS + text_tokens(role)
                if text is not None:
                    cost += look(text) or text_tokens(text)
                if used + cost > budget:
                    break
                used += cost
                lo -= 1
                continue
            record = read_message(message, lo - 1) if got is None else cast(MessageRecord, got)
            keep(record)
            role, _, issues, answers, text, extras = record
            if issues or answers:
                mark(lo - 1)
            cost = _FRAME_TOKENS + 1 if role in roles else _FRAME_TOKENS + text_tokens(role)
            if text is not None:
                cost += look(text) or text_tokens(text)
            if answers and role == TOOL and extras[7] is CHAT:
                ident = answers[0]
                cost += look(ident) or text_tokens(ident)
            if extras is not NO_EXTRAS:
                name, texts, calls, call_id, result_ids, media, _, shape = extras
                if shape.group:
                    mark_group(lo - 1)
                if len(calls) == 1 and not (texts or result_ids or media) and call_id is None:
                    # The commonest extras, one call and maybe a name: _count_extras inline.
                    if name is not None:
                        cost += _NAME_TOKENS + text_tokens(name)
                    tool, args = calls[0]
                    args = args_text(args)
                    cost += (look(tool) or text_tokens(tool)) + (look(args) or text_tokens(args))
                    cost += _TOOL_CALL_TOKENS
                else:
                    cost += _count_extras(extras, text_tokens)
            if used + cost > budget:
                break
            used += cost
            lo -= 1
    except RecursionError:  # arguments or a value too deep for their JSON
        error = too_deep_among([message], lo - 1)
        if error is None:
            raise
        raise error from None
    return lo, used, records


class _Readers(dict[type, Callable[[Any], Billed]]):
    """The reader's fast path for counting of each class met, found on first sight."""

    def __missing__(self, cls: type) -> Callable[[Any], Billed]:
        read = self[cls] = fast_biller(cls)
        return read


def approximate_token_count(message: Any) -> int:
    """Estimate the ``o200k_base`` tokens of one message without a tokenizer (same framing)."""
    return count_message(message, _approximate_o200k)


class _TextCounter:
    """A built-in message counter: the framing of :func:`count_message` over a text counter."""

    name = ""

    def text_tokens(self, text: str) -> int:
        raise NotImplementedError

    def __call__(self, message: Any) -> int:
        return count_message(message, self.text_tokens)


def _text_counter(counter: TokenCounter) -> Callable[[str], int] | None:
    """The text counter of a built-in message counter, whose counts follow from parts."""
    if counter is approximate_token_count:
        return _approximate_o200k
    if isinstance(counter, _TextCounter):
        return counter.text_tokens
    return None
