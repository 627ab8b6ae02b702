"""The turn note's wording, and the note recognised by it where a framework dropped its
marker: a user message that is a turn note, or one a note was merged into.

The marker (:data:`~agentstate_reducer.read.markers.TURN_NOTE_KIND`) is how the package
knows its note, but not every framework keeps it: the OpenAI Responses API takes no extra
key, so a store that keeps only its fields drops it, and PydanticAI merges the note's
request into the question's, keeping neither's metadata. The wording is strict enough
that no user message passes for a note: the whole text is the header :func:`turn_note_header`
writes, then one ``- ...`` line per entry, closed by ``]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

from . import pydantic_ai as _pydantic_ai
from .chat import read_message
from .fields import HUMAN, _payload, message_content
from .markers import INJECTED_KEY
from .record import MessageRecord
from .write import with_content, with_parts

__all__ = (
    "MERGED_NOTE_KEY",
    "TURN_NOTE_PREFIX",
    "is_turn_note_text",
    "turn_note_header",
    "turn_note_in",
    "without_turn_note",
)

_M = TypeVar("_M")

#: A turn note's text starts with this.
TURN_NOTE_PREFIX = "[turn note: "
_HEAD = (
    " of this turn left the context to save space; "
    "they were done, and each result can be read back by its handle."
)
#: Where a turn note merged into a user message (Converse takes no two user messages in a
#: row) records what a later note carries on: a key of the package's note on the message.
MERGED_NOTE_KEY = "turn_note"
_NOTE_TEXT = re.compile(
    re.escape(TURN_NOTE_PREFIX)
    + r"(?:1 earlier step|(?:[2-9]|[1-9][0-9]+) earlier steps)"
    + re.escape(_HEAD)
    + r"(?:\n- [^\n]+)+"
)
#: The keys of a content block that holds text only (chat, Anthropic, Responses, Converse).
_TEXT_BLOCK_KEYS = frozenset({"type", "text"})
_TEXT_BLOCK_TYPES = frozenset({None, "text", "input_text"})


def turn_note_header(steps: int) -> str:
    """The first line of the note standing for ``steps`` dropped steps."""
    noun = "step" if steps == 1 else "steps"
    return f"{TURN_NOTE_PREFIX}{steps} earlier {noun}{_HEAD}"


def is_turn_note_text(text: object) -> bool:
    """True when ``text`` is, whole, a turn note as the package words it."""
    return (
        isinstance(text, str)
        and text.startswith(TURN_NOTE_PREFIX)
        and text.endswith("]")
        and _NOTE_TEXT.fullmatch(text) is not None
    )


def turn_note_in(text: object) -> str | None:
    """The turn note ``text`` is, or the one merged into it as its last paragraph (a
    question's string with a note appended), else ``None``."""
    if not isinstance(text, str) or TURN_NOTE_PREFIX not in text:
        return None
    if is_turn_note_text(text):
        return text
    at = text.rfind("\n\n" + TURN_NOTE_PREFIX)
    return text[at + 2 :] if at >= 0 and is_turn_note_text(text[at + 2 :]) else None


def _note_block(block: object) -> bool:
    if isinstance(block, str):
        return is_turn_note_text(block)
    return (
        isinstance(block, Mapping)
        and block.keys() <= _TEXT_BLOCK_KEYS
        and block.get("type") in _TEXT_BLOCK_TYPES
        and is_turn_note_text(block.get("text"))
    )


def without_turn_note(message: _M, record: MessageRecord | None = None) -> _M | None:
    """``message`` as the conversation had it, read by the note's wording (its marker
    aside): ``None`` for a user message that is a turn note, a copy without the note
    where one was merged into it (a PydanticAI request's part, a Converse text block, a
    paragraph appended to a string), else ``message`` itself. ``record``: its record,
    when read already."""
    if record is None:
        record = read_message(message)
    if record.role != HUMAN:
        return message
    text = record.text
    if text is not None and len(record.extras.texts) == 0:  # plain content: one string
        if TURN_NOTE_PREFIX not in text:
            return message
    elif not any(TURN_NOTE_PREFIX in t for t in record.texts):
        return message
    texts = record.texts
    if _pydantic_ai.is_message(message):
        parts = getattr(message, "parts", ())
        kept = [
            p for p in parts
            if not (getattr(p, "part_kind", None) == "user-prompt"
                    and is_turn_note_text(getattr(p, "content", None)))
        ]
        return with_parts(message, {("parts",): kept}) if kept else None
    content = message_content(message)
    if isinstance(content, str):
        note = turn_note_in(content)
        if note is None:
            return message
        if note is content:
            return None
        return _unmarked(with_content(message, content[: -len(note) - 2]))
    if isinstance(content, (list, tuple)):
        blocks = [b for b in content if not _note_block(b)]
        if not blocks and not record.answers and not record.media:
            return None
        if len(blocks) == len(content):
            return message
        return _unmarked(with_content(message, blocks))
    if len(texts) == 1 and is_turn_note_text(texts[0]) and not (record.answers or record.media):
        return None  # another shape (a Gemini content, ...): the note alone
    return message


def _unmarked(copied: _M) -> _M:
    """``copied`` without the record a merged turn note kept on it."""
    if not isinstance(copied, Mapping):
        return copied
    fields: Any = _payload(copied)[0]
    mark = fields.get(INJECTED_KEY)
    if isinstance(mark, Mapping) and MERGED_NOTE_KEY in mark:
        rest = {k: v for k, v in mark.items() if k != MERGED_NOTE_KEY}
        if rest:
            fields[INJECTED_KEY] = rest
        else:
            del fields[INJECTED_KEY]
    return copied
