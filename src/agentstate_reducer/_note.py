"""The turn note's wording and size: what stands for the oldest steps of a current turn
that the turn ladder dropped (the plan sizes it, the edit step writes it)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .tokens import approximate_text_tokens

__all__ = (
    "ARGS_CHARS",
    "HANDLE_SIZE",
    "NOTE_PREFIX",
    "Entry",
    "shown_args",
    "entry_line",
    "entry_tokens",
    "note_cap",
    "note_text",
    "note_tokens",
)

#: A note's text starts with this.
NOTE_PREFIX = "[turn note: "
#: Arguments are shown up to this many characters (the rest can be read back).
ARGS_CHARS = 100
#: A handle as a placeholder names it, for sizing an entry whose handle is not known yet.
HANDLE_SIZE = "ctx_" + "0" * 16
#: One call of a dropped step: ``(tool, arguments as shown, handle of its result or "")``.
Entry = tuple[str, str, str]

_to_json = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode


def shown_args(args: object) -> str:
    """Arguments as a placeholder or a note shows them: compact JSON, one line, cut to
    :data:`ARGS_CHARS` characters."""
    text = args if isinstance(args, str) else _to_json(args)
    text = " ".join(text.split())
    return text if len(text) <= ARGS_CHARS else text[: ARGS_CHARS - 3] + "..."


def entry_line(entry: Entry) -> str:
    """``tool args -> handle`` (the arrow and handle only when there is one)."""
    tool, args, handle = entry
    return f"- {tool} {args}" + (f" -> {handle}" if handle else "")


def entry_tokens(entry: Entry) -> int:
    """Tokens of an entry's line (the heuristic; a missing handle sized as one)."""
    tool, args, handle = entry
    return approximate_text_tokens(entry_line((tool, args, handle or HANDLE_SIZE))) + 1


def _header(steps: int) -> str:
    noun = "step" if steps == 1 else "steps"
    return (
        f"{NOTE_PREFIX}{steps} earlier {noun} of this turn left the context to save space; "
        "they were done, and each result can be read back by its handle."
    )


#: Tokens of a note's header and closing line, whatever the number of steps.
_FRAME = approximate_text_tokens(_header(10_000) + "\n- and 10000 earlier calls: x\n]") + 4


def note_cap(target: int) -> int:
    """Tokens a note's entries may take under a target of ``target`` tokens."""
    return max(64, target // 4)


def note_tokens(entries: Sequence[int], cap: int) -> int:
    """Tokens of a note listing entries of these sizes, newest last, within ``cap``."""
    if not entries:
        return 0
    return _FRAME + min(sum(entries), cap)


def note_text(steps: int, entries: Sequence[Entry], cap: int) -> str:
    """The note for ``steps`` dropped steps whose calls are ``entries`` (oldest first):
    as many of the newest as fit ``cap`` tokens, the older ones counted per tool."""
    lines: list[str] = []
    used = 0
    shown = 0
    for entry in reversed(entries):
        size = entry_tokens(entry)
        if used + size > cap:
            break
        used += size
        shown += 1
        lines.append(entry_line(entry))
    lines.reverse()
    rest = entries[: len(entries) - shown]
    if rest:
        tools: dict[str, int] = {}
        for tool, _, _ in rest:
            tools[tool] = tools.get(tool, 0) + 1
        counted = ", ".join(f"{tool} x{n}" for tool, n in tools.items())
        lines.insert(0, f"- and {len(rest)} earlier calls: {counted}")
    return "\n".join([_header(steps), *lines]) + "]"
