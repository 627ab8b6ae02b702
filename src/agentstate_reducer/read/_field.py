"""The error every shape reader raises for a bad field, and the checks they share.

A reader raises :class:`FieldError` naming the field as a path from the message
(``.parts[1].functionCall.id``); the reader's boundary (``read/chat.py``) adds the
message's index. Nothing here knows a shape.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from ..errors import MessageFormatError

__all__ = ("FieldError", "as_id", "kind", "per_class")


class FieldError(MessageFormatError):
    """A field of a message is wrong; the reader's boundary adds the message's index."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"field {field or '(the message)'}: {problem}")
        #: Where, as a path from the message (``.tool_calls[0].function``).
        self.field = field
        self.problem = problem

    def within(self, prefix: str) -> FieldError:
        """The same error, ``prefix`` (the path of what holds the field) put first."""
        outer = FieldError(prefix + self.field, self.problem)
        outer.__cause__ = self.__cause__
        return outer


def kind(value: object) -> str:
    """What ``value`` is, for an error: its type's name, never its content."""
    return "None" if value is None else type(value).__name__


def as_id(value: object, field: str = ".id") -> str | None:
    """An id as a string: strings as they are, ints and UUIDs as text; ``field`` names it
    in the error for any other value (a list or a dict is no id)."""
    if type(value) is str:
        return value or None
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    if (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, UUID):
        return str(value)
    raise FieldError(field, f"expected a string id, got {kind(value)}")


def per_class(test: Callable[[type], bool]) -> Callable[[object], bool]:
    """``test`` of a value's class, run once per class and remembered."""
    seen: dict[type, bool] = {}

    def check(value: object) -> bool:
        cls = type(value)
        found = seen.get(cls)
        if found is None:
            found = seen[cls] = test(cls)
        return found

    return check
