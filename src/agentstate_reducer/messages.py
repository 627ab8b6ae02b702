"""The reader's former path: every name is :mod:`agentstate_reducer.read`'s (kept so that
code importing ``agentstate_reducer.messages`` keeps working)."""

from __future__ import annotations

from .read import *  # noqa: F403
from .read import __all__ as _read_all

# Newer than this path: only agentstate_reducer.read names them (a name read adds goes
# here too; tests/unit/read/test_messages.py holds this path's names).
del reasoning_model, register, with_text_appended  # noqa: F821
del MERGED_NOTE_KEY, TURN_NOTE_PREFIX, is_turn_note_text  # noqa: F821
del turn_note_header, turn_note_in, without_turn_note  # noqa: F821
del with_results  # noqa: F821

__all__ = tuple(name for name in _read_all if name in globals())
del _read_all
