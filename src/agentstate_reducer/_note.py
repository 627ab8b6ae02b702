"""The turn note: what stands for the oldest steps of a current turn that the turn ladder
dropped; its wording and size (the plan sizes it), and the note written once the plan
dropped them (:func:`turn_note`, the ladder's last rung)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._edits import _CALLED, _MARK, EditConfig, _args_cleared, handle_of
from ._structure import Structure, Turn, response_start
from .read import (
    HUMAN,
    INJECTED_KEY,
    MERGED_NOTE_KEY,
    TOOL_ARGS_PART,
    TOOL_RESULT_PART,
    TURN_NOTE_KIND,
    TURN_NOTE_PREFIX,
    EditablePart,
    MessageRecord,
    injected_kind,
    injected_mark,
    match_shape,
    message_content,
    message_id,
    native_provider,
    package_note,
    turn_note_header,
    turn_note_in,
    with_content,
    with_text_appended,
    without_turn_note,
    write_message,
)
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

#: A note's text starts with this (the reader knows its wording: ``read/notes.py``).
NOTE_PREFIX = TURN_NOTE_PREFIX
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


#: Tokens of a note's header and closing line, whatever the number of steps.
_FRAME = approximate_text_tokens(
    turn_note_header(10_000) + "\n- and 10000 earlier calls: x\n]"
) + 4


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
    return "\n".join([turn_note_header(steps), *lines]) + "]"


def _note_entries(
    messages: Sequence[Any], views: Sequence[MessageRecord], step: tuple[int, ...]
) -> list[Entry]:
    """What a note lists of one dropped step: each call, its arguments, its result's handle."""
    ai = step[0]
    view = views[ai]
    results: dict[str, object] = {}
    for i in step[1:]:
        for part in view_parts(messages[i], views[i]):
            if part.kind == TOOL_RESULT_PART and part.call_id is not None:
                results[part.call_id] = part.value
    out: list[Entry] = []
    for part in view_parts(messages[ai], view):
        if part.kind != TOOL_ARGS_PART:
            continue
        result = results.get(part.call_id or "")
        args = "" if _args_cleared(part.value) else shown_args(part.value)
        handle = ""
        if isinstance(result, str):
            found = _MARK.match(result)
            handle = found.group(1) if found else ""
            called = _CALLED.search(result) if found else None
            if called is not None and not args:
                args = called.group(1)
        out.append((part.tool or "tool", args or "{}", handle))
    return out


def view_parts(message: Any, view: MessageRecord) -> tuple[EditablePart, ...]:
    """The editable parts of ``message`` read with its record."""
    return view.shape.editable(message, view)


def turn_note(
    messages: Sequence[Any],
    views: Sequence[MessageRecord],
    turn: Turn,
    dropped: int,
    config: EditConfig,
) -> tuple[int, Any, bool] | None:
    """Rung (c) of the ladder: the one note standing for the ``dropped`` oldest steps the
    plan dropped from the current ``turn``, as ``(index, note, replaces)``: the note
    replaces ``messages[index]`` (the turn's earlier note, whose entries it carries on, or
    in a Converse history the user message it joins), or goes in before it (the turn's
    first step). ``None`` when the plan dropped no step."""
    if not dropped or not config.turn_ladder:
        return None
    # In place of the first step: after the question and what was typed before the agent
    # began (a question kept by preserve_first may open the turn while the one that asked
    # for these steps follows it), before the reasoning item of its response if any.
    head = response_start(views, turn.steps[0][0], turn.body)
    return _turn_note(messages, views, turn, head, dropped, config)


def note_structure(
    messages: Sequence[Any], structure: Structure, dropped: int, config: EditConfig
) -> tuple[int, Any, bool] | None:
    """:func:`turn_note` of the current turn of ``structure`` (the plan's: every plan of
    it carries that turn), whose records are those of ``messages``; where the first
    step's response begins is the structure's (:attr:`~._structure.Structure.heads`)."""
    if not dropped or not config.turn_ladder:
        return None
    return _turn_note(
        messages, structure.views, structure.turn, structure.heads[0], dropped, config
    )


def _turn_note(
    messages: Sequence[Any],
    views: Sequence[MessageRecord],
    turn: Turn,
    head: int,
    dropped: int,
    config: EditConfig,
) -> tuple[int, Any, bool]:
    """:func:`turn_note`, ``head`` the first index of the first step's response (not
    before the turn's body)."""
    entries: list[Entry] = []
    steps = dropped
    first = turn.steps[0][0]
    at, replaces, ident = head, False, None
    # Converse takes no two user messages in a row: the note joins the user message
    # before the first step instead of going in after it.
    before = at - 1
    host = before if before >= 0 and _merges(messages, views, first, before) else None
    earlier = None if host is None else _merged_note(messages[host], views[host])
    if earlier is not None:
        entries.extend(tuple(e) for e in earlier.get("entries", ()))
        steps += int(earlier.get("steps", 0))
        ident = earlier.get("id")
    else:
        for i in range(turn.body, len(messages)):
            mark: Mapping[str, Any] | None
            kind = injected_kind(messages[i])
            if kind == TURN_NOTE_KIND:
                mark = injected_mark(messages[i]) or {}
            elif kind is None and without_turn_note(messages[i], views[i]) is None:
                mark = _read_back(views[i])  # a note that lost its marker: by its wording
            else:
                mark = None
            if mark is None:
                continue
            entries.extend(tuple(e) for e in mark.get("entries", ()))
            steps += int(mark.get("steps", 0))
            at, replaces = i, True
            ident = message_id(messages[i]) or mark.get("id")
            break
    for step in turn.steps[:dropped]:
        entries.extend(_note_entries(messages, views, step))
    if ident is None:
        ident = f"turn-note-{handle_of([views[first].id, *views[first].calls])[4:]}"
    target = config.effective_target_tokens
    assert target is not None
    text = note_text(steps, entries, note_cap(target))
    listed = [list(e) for e in entries]
    if host is not None:
        message = messages[host]
        base = message if earlier is None else _unmerged(message, earlier)
        kept = message_content(base)
        data = {
            _MERGED: {
                "steps": steps, "entries": listed, "id": ident,
                "keep": len(kept) if isinstance(kept, (list, str)) else 0,
            }
        }
        return host, with_text_appended(base, text, key=INJECTED_KEY, data=data), True
    mark = {"kind": TURN_NOTE_KIND, "steps": steps, "entries": listed, "id": ident}
    # Written in the history's own shape: that of the turn's first step (its calls are in
    # the provider's form), else of the question.
    note = match_shape([write_message(HUMAN, text, id=ident, **{INJECTED_KEY: mark})],
                       messages[first])
    return at, note[0], replaces


#: Where a turn note merged into a user message keeps what a later note carries on (a
#: key of the package's marker that is no injected kind: the message stays conversation).
_MERGED = MERGED_NOTE_KEY


def _merges(
    messages: Sequence[Any], views: Sequence[MessageRecord], first: int, before: int
) -> bool:
    """Whether the turn note joins ``messages[before]``: the history is Converse (its first
    step is) and that message is a user message of plain content."""
    if native_provider(messages[first]) != "bedrock":
        return False
    view = views[before]
    return (
        view.role == HUMAN
        and not view.answers
        and isinstance(messages[before], Mapping)
        and injected_kind(messages[before]) is None
    )


def _merged_note(message: Any, view: MessageRecord) -> Mapping[str, Any] | None:
    """What a turn note merged into ``message`` recorded (read back from its wording when
    that record is gone), or ``None``."""
    if not isinstance(message, Mapping):
        return None
    found = package_note(message)
    data = None if found is None else found.get(_MERGED)
    if isinstance(data, Mapping):
        return data
    return _read_back(view) if without_turn_note(message, view) is not message else None


_STEPS = re.compile(re.escape(TURN_NOTE_PREFIX) + r"([0-9]+) earlier step")
_EARLIER = re.compile(r"- and ([0-9]+) earlier calls: (.*)")
_COUNTED = re.compile(r"(.+) x([0-9]+)")
_LINE = re.compile(r"- (\S+) (.+?)(?: -> (ctx_[0-9a-f]+))?")


def _read_back(view: MessageRecord) -> dict[str, Any] | None:
    """What a turn note that lost its marker says: its steps, and its entries as its lines
    show them (an older call counted per tool comes back as ``(tool, "{}", "")``, which a
    later note counts the same way). The latest note of the message, if it holds two
    (a whole text, or the paragraph merged into a question's string)."""
    text = next((note for t in reversed(view.texts) if (note := turn_note_in(t))), None)
    if text is None:
        return None  # its record holds no note (a block of no type the reader skips)
    head, *lines = text[:-1].split("\n")
    found = _STEPS.match(head)
    entries: list[Entry] = []
    for line in lines:
        earlier = _EARLIER.fullmatch(line)
        if earlier is not None:
            counted = [_COUNTED.fullmatch(c) for c in earlier.group(2).split(", ")]
            if all(counted) and sum(int(c.group(2)) for c in counted if c) == int(
                earlier.group(1)
            ):
                for c in counted:
                    assert c is not None
                    entries.extend([(c.group(1), "{}", "")] * int(c.group(2)))
            else:
                entries.extend([("tool", "{}", "")] * int(earlier.group(1)))
            continue
        shown = _LINE.fullmatch(line)
        if shown is not None:
            entries.append((shown.group(1), shown.group(2), shown.group(3) or ""))
    return {"steps": int(found.group(1)) if found else 0, "entries": entries}


def _unmerged(message: Any, data: Mapping[str, Any]) -> Any:
    """``message`` as it was before a turn note joined it."""
    if "keep" not in data:  # read back from its wording: the note's block taken out
        return without_turn_note(message) or message
    content = message_content(message)
    keep = int(data.get("keep", 0))
    original = content[:keep] if isinstance(content, (list, str)) else content
    copied: Any = with_content(message, original)
    fields: Any = copied
    fields.pop(INJECTED_KEY, None)
    return copied
