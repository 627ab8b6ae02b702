"""What tests comparing two readers share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def read_or_error(read: Callable[[Any], Any], message: Any) -> Any:
    """``read(message)``, or the class and words of what it raised: two readers must
    fail alike."""
    try:
        return read(message)
    except Exception as exc:
        return type(exc), str(exc)
