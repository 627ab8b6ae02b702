"""Messages the package injected (summaries and their acknowledgements) and the note on
an edited copy, marked under one key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import agent_framework as _agent_framework
from . import pydantic_ai as _pydantic_ai
from .fields import _get, _payload

__all__ = (
    "INJECTED_KEY",
    "PACKAGE_NOTE",
    "SUMMARY_ACK_KIND",
    "SUMMARY_KIND",
    "TURN_NOTE_KIND",
    "injected_kind",
    "injected_mark",
    "is_injected",
    "is_summary",
    "package_note",
    "summary_covers",
)


#: The key marking a message the package injected: a key of a dict message, or of a
#: LangChain message's ``additional_kwargs`` (which chat model integrations never send).
#: Its value is ``{"kind": SUMMARY_KIND, "covers": n}`` or ``{"kind": SUMMARY_ACK_KIND}``.
INJECTED_KEY = "agentstate_reducer"
#: ``kind`` of an injected summary message.
SUMMARY_KIND = "summary"
#: ``kind`` of the acknowledgement that follows an injected summary.
SUMMARY_ACK_KIND = "summary-ack"
#: ``kind`` of the note standing for the steps the turn ladder dropped from a turn.
TURN_NOTE_KIND = "turn-note"
_INJECTED_KINDS = frozenset({SUMMARY_KIND, SUMMARY_ACK_KIND, TURN_NOTE_KIND})


def _marker(message: object) -> Mapping[str, Any] | None:
    if isinstance(message, Mapping):
        fields = _payload(message)[0]
        mark = fields.get(INJECTED_KEY)
        extra = fields.get("additional_kwargs") if mark is None else None
    elif _pydantic_ai.is_message(message):
        mark, extra = _pydantic_ai.marker(message, INJECTED_KEY), None
    elif _agent_framework.is_message(message):
        mark, extra = _agent_framework.marker(message, INJECTED_KEY), None
    else:
        mark = None
        extra = getattr(message, "additional_kwargs", None)
    if isinstance(extra, Mapping):
        mark = extra.get(INJECTED_KEY)
    if isinstance(mark, Mapping) and mark.get("kind") in _INJECTED_KINDS:
        return mark
    return None


def injected_kind(message: object) -> str | None:
    """:data:`SUMMARY_KIND` or :data:`SUMMARY_ACK_KIND` for a message the package injected,
    else ``None`` (conversation). Read from metadata only, never from the wording."""
    mark = _marker(message)
    return None if mark is None else str(mark["kind"])


def injected_mark(message: object) -> Mapping[str, Any] | None:
    """The marker of a message the package injected (its ``kind`` and what it records),
    else ``None``."""
    return _marker(message)


def is_summary(message: object) -> bool:
    """True for a summary message the package injected (recognised by its metadata)."""
    return injected_kind(message) == SUMMARY_KIND


def is_injected(message: object) -> bool:
    """True for a summary or its acknowledgement, injected by the package."""
    return _marker(message) is not None


def summary_covers(message: object) -> int:
    """How many conversation messages an injected summary stands for (0 if not one)."""
    mark = _marker(message)
    covers = mark.get("covers") if mark is not None else None
    if isinstance(covers, bool) or not isinstance(covers, int) or covers < 0:
        return 0
    return covers


#: Where the package's own note on a copy it made lives (a dict key, or an
#: ``additional_kwargs`` key on a message object): the key injected messages carry too.
#: An edit's note holds ``"edit"``, never the ``"kind"`` of an injected message.
PACKAGE_NOTE = INJECTED_KEY


def package_note(message: object) -> Mapping[str, Any] | None:
    """The note :func:`with_parts` recorded on a copy, or ``None``."""
    if _pydantic_ai.is_message(message):
        found = _pydantic_ai.marker(message, PACKAGE_NOTE)
        return found if isinstance(found, Mapping) else None
    if _agent_framework.is_message(message):
        found = _agent_framework.marker(message, PACKAGE_NOTE)
        return found if isinstance(found, Mapping) else None
    fields: Any = _payload(message)[0] if isinstance(message, Mapping) else message
    found = _get(fields, PACKAGE_NOTE)
    if found is None and not isinstance(fields, Mapping):
        extra = getattr(fields, "additional_kwargs", None)
        if isinstance(extra, Mapping):
            found = extra.get(PACKAGE_NOTE)
    return found if isinstance(found, Mapping) else None
