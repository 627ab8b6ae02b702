"""Context editing, pure: shrink old tool results and oversized payloads inside messages.

Messages + views + token counts + config -> edited copies. No I/O, no framework
imports; the shell (``reducer.py``, ``reducing/``) hands the originals to the ``on_prune`` hooks and
runs the pruning plan on what this returns. What it is told and what it tells (the
options, :class:`ContextEdit`, handles and markers) is in ``_edits``, re-exported here.

Laws (tested with hypothesis):

* Edits replace content only: every message keeps its role, id, calls and answers, so
  a history that passed ``validate_history`` still does.
* Idempotence: editing an edited history changes nothing. An edited part carries a
  marker (its placeholder text, or cleared arguments) and is left alone.
* Determinism: the same input gives the same copies. The handle is a digest of the
  original part, so the same part is edited the same way on every reduce.
* Clearing happens only when the trigger fires, so between two prunes the edited
  prefix stays byte-identical and a provider's prompt cache keeps working.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ._edits import (
    _CALLED,
    CLEARED,
    CLEARED_INPUT,
    OFFLOADED,
    ClearToolResults,
    ContextEdit,
    EditOutcome,
    Offload,
    _args_cleared,
    handle_of,
    is_edited,
    original_text,
)
from ._edits import EditConfig as EditConfig
from ._edits import EditOption as EditOption
from ._edits import check_edits as check_edits
from ._note import shown_args
from ._note import turn_note as turn_note
from ._structure import Structure, Turn
from .read import (
    CHAT,
    SYSTEM,
    TEXT_PART,
    TOOL,
    TOOL_ARGS_PART,
    TOOL_RESULT_PART,
    EditablePart,
    MessageRecord,
    editable_size,
    holding_block,
    message_id,
    part_text,
    with_parts,
)
from .tokens import approximate_text_tokens
from .tokens.cache import LazyCounts

__all__ = (
    "CLEARED",
    "CLEARED_INPUT",
    "OFFLOADED",
    "AppendRule",
    "ClearToolResults",
    "ContextEdit",
    "EditOutcome",
    "Offload",
    "edit_messages",
    "handle_of",
    "is_edited",
    "original_text",
    "turn_note",
)


#: A result of at most this many tokens, or of at most ``_WORTH_CLEARING_CHARS``
#: characters, is never cleared: a placeholder costs about 25 tokens, so the gain would
#: not be worth changing the prompt prefix. Rules on the part alone, so the same part is
#: treated the same way on every reduce; the character rule needs no count.
_WORTH_CLEARING = 64
_WORTH_CLEARING_CHARS = 256


def _label(part: EditablePart, tool: str | None) -> str:
    if part.kind == TOOL_RESULT_PART:
        return f"result of {tool}" if tool else "tool result"
    return "text"


def _placeholder(label: str, tokens: int, handle: str) -> str:
    return f"[cleared: {label}, {tokens} tokens, handle {handle}]"


def _preview(label: str, tokens: int, handle: str, text: str, option: Offload) -> str:
    per_token = len(text) / max(tokens, 1)
    head = int(option.head * per_token)
    tail = int(option.tail * per_token)
    header = f"[offloaded: {label}, {tokens} tokens, handle {handle}; start and end below]"
    if head + tail >= len(text):
        return f"{header}\n{text[: head + tail]}"
    hidden = len(text) - head - tail
    end = text[len(text) - tail :] if tail else ""
    return f"{header}\n{text[:head]}\n[... {hidden} characters not shown ...]\n{end}"


def _size(text: str) -> int:
    """UTF-8 bytes of ``text``."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class _Editor:
    """The state of one :func:`edit_messages` call."""

    def __init__(
        self,
        messages: Sequence[Any],
        structure: Structure,
        counts: Sequence[int] | None,
        count: Callable[[Any], int],
        text_tokens: Callable[[str], int] | None = None,
    ) -> None:
        self.source = messages
        #: The records and the current turn of the originals (edits change no role or link).
        self.structure = structure
        self.views = structure.views
        self.messages = list(messages)
        #: The given counts (token mode), read only where a rule needs one.
        self.base = counts
        #: Counts of the edited copies, and in count mode of the messages counted so far.
        self.own: dict[int, int] = {}
        self.count = count
        self.text_tokens = text_tokens
        self.edits: list[ContextEdit] = []
        #: Tokens of the whole edited history, once a pass has summed them all.
        self.total: int | None = None
        self._issuers: dict[str, int] | None = None
        self._names: dict[str, str | None] = {}

    def parts(self, i: int) -> tuple[EditablePart, ...]:
        """The editable parts of message ``i`` as edited so far (its record: the original's,
        whose roles and links no edit changes)."""
        view = self.views[i]
        return view.shape.editable(self.messages[i], view)

    def tool_name(self, part: EditablePart, i: int) -> str | None:
        """The tool whose result ``part`` (of message ``i``) is: named on the part, else on
        the call it answers, looked for just before ``i`` first (where it nearly always is)."""
        call_id = part.call_id
        if part.tool or call_id is None:
            return part.tool
        names = self._names
        if call_id in names:
            return names[call_id]
        views = self.views
        issuer = None
        for j in range(i - 1, max(-1, i - 65), -1):
            if call_id in views[j].calls:
                issuer = j
                break
        else:
            if self._issuers is None:
                self._issuers = {c: j for j, v in enumerate(views) for c in v.calls}
            issuer = self._issuers.get(call_id)
        names[call_id] = None
        if issuer is None:
            return None
        view = views[issuer]
        billed = view.tool_calls
        if len(billed) == 1 and len(view.calls) == 1 and view.shape is CHAT:
            # A chat message billing one call and issuing one: the same call, named.
            names[call_id] = billed[0][0] or None
        else:  # every call it issues, named at once (parallel calls)
            for call in view.shape.editable(self.source[issuer], view):
                ident = call.call_id
                if call.kind == TOOL_ARGS_PART and ident and call.tool and not names.get(ident):
                    names[ident] = call.tool
        return names[call_id]

    def tokens(self, i: int) -> int:
        """Tokens of message ``i`` (as edited so far), counted now if not known."""
        found = self.own.get(i)
        if found is None:
            if self.base is not None:
                return self.base[i]
            found = self.own[i] = self.count(self.messages[i])
        return found

    def over(self, limit: int) -> bool:
        """Whether the (edited) history holds more than ``limit`` tokens, summed from the
        end: a lazy count stops there."""
        if self.total is not None:
            return self.total > limit
        total = 0
        for i in range(len(self.messages) - 1, -1, -1):
            tokens = self.tokens(i)
            if tokens < 0:  # a counter that is not a count: partial sums prove nothing
                return sum(self.tokens(j) for j in range(len(self.messages))) > limit
            total += tokens
            if total > limit:
                return True
        return False

    def part_tokens(self, i: int, part: EditablePart, text: str) -> int:
        """The size in tokens of ``part`` of message ``i``, whose text is ``text``; it
        depends on the part alone, so a part is sized the same on every reduce.

        Token mode: the message's count when the part is its whole content, else the
        text counted by the reducer's counter when it is a built-in one. Otherwise (count
        mode, which counts no message for it, and custom counters): the heuristic.
        """
        if self.base is not None:
            if part.path == ("content",):
                return self.tokens(i)
            if self.text_tokens is not None:
                return self.text_tokens(text)
        return approximate_text_tokens(text)

    def edit(
        self, i: int, changes: list[_Change], *, measure: bool, only_if_smaller: bool = False
    ) -> int:
        """Write ``changes`` into message ``i``; return the tokens saved.

        Without ``measure`` (count mode, when nothing depends on the saving) the copy is
        not counted and 0 is returned. With ``only_if_smaller``, a measured copy that
        would not be smaller is dropped (the result stays as it is) and 0 is returned.
        """
        message = self.messages[i]
        edited = with_parts(message, {c.part.path: c.value for c in changes})
        saved = 0
        if measure:
            tokens = self.count(edited)
            saved = self.tokens(i) - tokens
            if only_if_smaller and saved <= 0:
                return 0
            self.own[i] = tokens
            if self.total is not None:
                self.total -= saved
        else:
            self.own.pop(i, None)
            self.total = None
        self.messages[i] = edited
        ident = message_id(message)
        for change in changes:
            part = change.part
            values: dict[tuple[str | int, ...], object] = {("id",): change.handle}
            if part.kind != TOOL_ARGS_PART and len(part.path) > 1:
                values[part.path[:1]] = [holding_block(message, part.path)]
            self.edits.append(
                ContextEdit(
                    i, change.kind, change.handle, change.tool, part.call_id, ident,
                    change.tokens, message, values, change.delivers,
                )
            )
        return saved

    def final_counts(self) -> Sequence[int] | None:
        base = self.base
        if base is None:
            return None
        if not self.own:
            return base
        if isinstance(base, (list, tuple)):
            own = self.own
            return [own.get(i, c) for i, c in enumerate(base)]
        return LazyCounts.over(base, dict(self.own))


class _Change(NamedTuple):
    part: EditablePart
    value: object
    kind: str
    tool: str | None
    tokens: int
    handle: str
    delivers: bool = True


def _fires(option: ClearToolResults, config: EditConfig, editor: _Editor) -> bool:
    n = len(editor.messages)
    if option.trigger_tokens is None and option.trigger_messages is None:
        if config.max_tokens is not None:
            # A resolved budget: ReducerConfig turns ("fraction", f) into tokens.
            return editor.over(int(config.max_tokens))
        return config.max_messages is not None and n > config.max_messages
    if option.trigger_messages is not None and n > option.trigger_messages:
        return True
    return option.trigger_tokens is not None and editor.over(option.trigger_tokens)


def _offload_one(editor: _Editor, option: Offload, i: int) -> None:
    view = editor.views[i]
    if view.role == SYSTEM or editable_size(editor.messages[i], view) <= option.above:
        return  # no part can hold more tokens than bytes: no need to count
    if editor.tokens(i) <= option.above:
        return
    changes = []
    for part in editor.parts(i):
        if part.kind == TOOL_ARGS_PART or (part.kind == TEXT_PART and not option.text):
            continue
        if is_edited(part.value):
            continue
        text = part_text(part.value)
        if _size(text) <= option.above:
            continue
        size = editor.part_tokens(i, part, text)
        if size <= option.above:
            continue
        tool = editor.tool_name(part, i) if part.kind == TOOL_RESULT_PART else None
        handle = handle_of(part.value)
        preview = _preview(_label(part, tool), size, handle, text, option)
        changes.append(_Change(part, preview, OFFLOADED, tool, size, handle))
    if changes:
        editor.edit(i, changes, measure=editor.base is not None)


def _offload(
    editor: _Editor, option: Offload, start: int, stop: int, limit: int | None
) -> None:
    """Offload from the end back, leaving alone what the plan will prune anyway (as
    :func:`_clear` does); the kept first message always."""
    above, messages, views = option.above, editor.messages, editor.views
    for i in range(start):
        _offload_one(editor, option, i)
    low = max(start, stop)
    if limit is None:  # count mode: only a message long enough is counted
        for i in range(len(messages) - 1, low - 1, -1):
            if editable_size(messages[i], views[i]) > above:
                _offload_one(editor, option, i)
        return
    tokens = editor.tokens
    used = sum(tokens(i) for i in range(start))
    for i in range(len(messages) - 1, low - 1, -1):
        count = tokens(i)
        if count > above:
            _offload_one(editor, option, i)
            count = tokens(i)
        used += count
        if used > limit:
            return
    if stop == 0:
        editor.total = used  # every message was read: the trigger needs no second pass


def _clear(
    editor: _Editor, option: ClearToolResults, start: int, stop: int, limit: int | None
) -> None:
    """Clear from the end back, leaving alone what the plan will prune anyway.

    Walking back, the edited suffix is summed; once it (with the kept first message)
    exceeds ``limit`` (``max_tokens``), everything older is pruned by the plan, so it is
    left as it is rather than copied for nothing.
    """
    kept = 0
    used = sum(editor.tokens(i) for i in range(start)) if limit is not None else 0
    inputs: set[str] = set()
    saved = 0
    before = len(editor.edits)
    restore: list[tuple[int, Any, int | None]] = []
    views, own = editor.views, editor.own
    # In count mode nothing needs the saving unless clear_at_least asks for it.
    measure = editor.base is not None or option.clear_at_least > 0
    counted = editor.base is not None
    for i in range(len(editor.messages) - 1, max(start, stop) - 1, -1):
        view = views[i]
        skip = view.role == SYSTEM or not (view.answers or inputs)
        if not skip and view.role == TOOL and not option.exclude_tools:
            # A tool message is one result: keep it, or skip it when too small, unread.
            if kept < option.keep:
                kept += 1
                skip = True
            else:
                # (In count mode the part's own size rules, below: nothing is counted.)
                skip = editable_size(editor.messages[i], view) <= _WORTH_CLEARING_CHARS or (
                    counted and editor.tokens(i) <= _WORTH_CLEARING
                )
        if skip:
            if limit is not None:
                used += editor.tokens(i)
                if used > limit:
                    break
            continue
        message = editor.messages[i]
        changes = []
        for part in reversed(editor.parts(i)):
            if part.kind == TOOL_ARGS_PART:
                if part.call_id in inputs and not _args_cleared(part.value):
                    tool = part.tool
                    cleared: object = "{}" if isinstance(part.value, str) else {}
                    handle = handle_of(part.value)
                    changes.append(_Change(part, cleared, CLEARED_INPUT, tool, 0, handle))
                continue
            if part.kind != TOOL_RESULT_PART:
                continue
            tool = editor.tool_name(part, i) if option.exclude_tools else None
            if tool is not None and tool in option.exclude_tools:
                continue
            if kept < option.keep:
                kept += 1
                continue
            if is_edited(part.value):
                continue
            text = part_text(part.value)
            if len(text) <= _WORTH_CLEARING_CHARS:
                continue
            size = editor.part_tokens(i, part, text)
            if size <= _WORTH_CLEARING:
                continue
            tool = editor.tool_name(part, i)
            handle = handle_of(part.value)
            placeholder = _placeholder(_label(part, tool), size, handle)
            changes.append(_Change(part, placeholder, CLEARED, tool, size, handle))
            if option.clear_tool_inputs and part.call_id is not None:
                inputs.add(part.call_id)
        if changes:
            restore.append((i, message, own.get(i)))
            saved += editor.edit(i, changes[::-1], measure=measure, only_if_smaller=True)
        if limit is not None:
            used += editor.tokens(i)
            if used > limit:
                break
    if saved < option.clear_at_least:
        for i, message, tokens in restore:
            editor.messages[i] = message
            if tokens is None:
                own.pop(i, None)
            else:
                own[i] = tokens
        del editor.edits[before:]


def edit_messages(
    messages: Sequence[Any],
    views: Sequence[MessageRecord],
    counts: Sequence[int] | None,
    config: EditConfig,
    count: Callable[[Any], int],
    text_tokens: Callable[[str], int] | None = None,
) -> EditOutcome:
    """Apply ``config.context_edits`` to ``messages``; the inputs are never mutated.

    Only what a rule needs is read: a message whose text is too short for any edit is
    neither counted nor parsed, and what the plan will prune anyway is left alone.

    Args:
        messages: the history, in order.
        views: one view per message (edits never change them).
        counts: one token count per message (token mode; a lazy sequence is read only
            where needed), or ``None`` (count mode): then messages are counted with
            ``count`` only where a rule needs their size.
        config: the reducer configuration (its ``context_edits`` and thresholds).
        count: counts one message (an edited copy) with the reducer's counter.
        text_tokens: counts a text as that counter does, when it is a built-in one (the
            size of a part that is not a message's whole content); ``None`` otherwise.

    Returns:
        An :class:`EditOutcome`: ``messages`` with edited copies in place, their
        counts, and one :class:`ContextEdit` per replaced part.
    """
    start = 1 if config.preserve_first and len(views) else 0
    return edit_structure(messages, Structure(views, start), counts, config, count, text_tokens)


def edit_structure(
    messages: Sequence[Any],
    structure: Structure,
    counts: Sequence[int] | None,
    config: EditConfig,
    count: Callable[[Any], int],
    text_tokens: Callable[[str], int] | None = None,
) -> EditOutcome:
    """:func:`edit_messages` of ``messages`` read into ``structure`` (its records and the
    current turn, found once for the edit step and the plan; read with
    ``config.preserve_first``)."""
    clear = next((o for o in config.context_edits if isinstance(o, ClearToolResults)), None)
    offload = next((o for o in config.context_edits if isinstance(o, Offload)), None)
    n = len(messages)
    editor = _Editor(messages, structure, counts, count, text_tokens)
    ladder = config.turn_ladder and counts is not None and config.max_tokens is not None
    if not n or (clear is None and offload is None and not ladder):
        return EditOutcome(editor.messages, counts, ())
    start = 1 if config.preserve_first else 0
    limit = None if counts is None or config.max_tokens is None else int(config.max_tokens)
    stop = _count_mode_stop(structure, config) if counts is None else 0
    if offload is not None:
        _offload(editor, offload, start, stop, limit)
    if clear is not None and _fires(clear, config, editor):
        _clear(editor, clear, start, stop, limit)
    if config.turn_ladder and limit is not None:
        _ladder(editor, config, start, limit)
    edits = tuple(sorted(editor.edits, key=lambda e: e.index))
    return EditOutcome(editor.messages, editor.final_counts(), edits)


# -- the turn ladder: a current turn over max_tokens shrinks inside itself --------------

#: What a preview's header says: the original's size and handle.
_PREVIEW = re.compile(r"\[offloaded: [^\n\]]*?, (\d+) tokens, handle (ctx_[0-9a-f]{16})")


def _called(tool: str | None, args: str, tokens: int, handle: str) -> str:
    """A ladder placeholder: the tool, the result's size and handle, then the call's
    arguments (after the handle, so :func:`is_edited` reads it whatever they hold)."""
    head = _placeholder(f"result of {tool}" if tool else "tool result", tokens, handle)[:-1]
    return f"{head}; called with {args}]" if args else f"{head}]"


def _turn_size(editor: _Editor, turn: Turn, start: int) -> int:
    """Tokens of what the turn rule keeps: the kept first messages, the opener, the body."""
    tokens = editor.tokens
    size = sum(tokens(i) for i in range(start))
    if turn.opener is not None and turn.opener >= start:
        size += tokens(turn.opener)
    return size + sum(tokens(i) for i in range(turn.body, len(editor.messages)))


def _ladder(editor: _Editor, config: EditConfig, start: int, limit: int) -> None:
    """Rungs (a) and (b) of the ladder, oldest step first, while the turn is over: clear
    the older steps' results (previews too), then their inputs. The plan then drops the
    oldest steps if the turn is still over (rung c, :func:`turn_note`)."""
    if not editor.over(limit):
        return
    turn = editor.structure.turn
    older = turn.steps[:-1]
    if not older:
        return
    total = _turn_size(editor, turn, start)
    if total <= limit:
        return
    target = config.effective_target_tokens
    assert target is not None
    # Keyed by the issuing step as well: ids may repeat across steps (Gemini's
    # ``"<name>#<k>"`` of contents without ids), and a result answers its own step's call.
    calls: dict[tuple[int, str], tuple[str | None, str]] = {}
    for step in older:
        for part in editor.parts(step[0]):
            if part.kind == TOOL_ARGS_PART and part.call_id is not None:
                shown = "" if _args_cleared(part.value) else shown_args(part.value)
                calls[step[0], part.call_id] = (part.tool, shown)
    placed: set[tuple[int, str]] = set()  # calls whose result placeholder names the arguments
    for step in older:
        if total <= target:
            break
        for i in step[1:]:
            total -= _clear_results(editor, i, step[0], calls, placed)
    for step in older:
        if total <= target:
            break
        total -= _clear_inputs(editor, step[0], placed)


def _clear_results(
    editor: _Editor,
    i: int,
    issuer: int,
    calls: Mapping[tuple[int, str], tuple[str | None, str]],
    placed: set[tuple[int, str]],
) -> int:
    changes = []
    for part in editor.parts(i):
        if part.kind != TOOL_RESULT_PART:
            continue
        tool, args = calls.get((issuer, part.call_id or ""), (None, ""))
        tool = tool or editor.tool_name(part, i)
        value = part.value
        if isinstance(value, str) and value.startswith("[cleared: "):
            if _CALLED.search(value) and part.call_id is not None:
                placed.add((issuer, part.call_id))
            continue
        preview = _PREVIEW.match(value) if isinstance(value, str) else None
        if preview is not None:
            size, handle = int(preview.group(1)), preview.group(2)
            text = _called(tool, args, size, handle)
            changes.append(_Change(part, text, CLEARED, tool, size, handle, delivers=False))
        else:
            text = part_text(value)
            if len(text) <= _WORTH_CLEARING_CHARS:
                continue
            size = editor.part_tokens(i, part, text)
            handle = handle_of(value)
            changes.append(_Change(part, _called(tool, args, size, handle), CLEARED, tool, size,
                                   handle))
        if part.call_id is not None and args:
            placed.add((issuer, part.call_id))
    if not changes:
        return 0
    return editor.edit(i, changes, measure=True, only_if_smaller=True)


def _clear_inputs(editor: _Editor, i: int, placed: set[tuple[int, str]]) -> int:
    changes = []
    for part in editor.parts(i):
        if part.kind != TOOL_ARGS_PART or (i, part.call_id) not in placed:
            continue
        if _args_cleared(part.value) or len(part_text(part.value)) <= _WORTH_CLEARING_CHARS:
            continue
        cleared: object = "{}" if isinstance(part.value, str) else {}
        handle = handle_of(part.value)
        changes.append(_Change(part, cleared, CLEARED_INPUT, part.tool, 0, handle))
    if not changes:
        return 0
    return editor.edit(i, changes, measure=True, only_if_smaller=True)


class AppendRule:
    """Whether editing ``history + new`` surely changes nothing, for a ``history`` that
    editing leaves as it is and that the plan leaves whole: the clear trigger does not
    fire and no new message could be offloaded. ``False`` means only
    :func:`edit_messages` can tell. Built once per reducer (it runs on every append)."""

    def __init__(self, config: EditConfig) -> None:
        clear = next((o for o in config.context_edits if isinstance(o, ClearToolResults)), None)
        offload = next((o for o in config.context_edits if isinstance(o, Offload)), None)
        # The reducer's own threshold as trigger: the plan's append rule checks it.
        self._trigger_tokens = None if clear is None else clear.trigger_tokens
        self._trigger_messages = None if clear is None else clear.trigger_messages
        self._above = None if offload is None else offload.above

    def __call__(
        self,
        size: int,
        tokens: int | None,
        new: Sequence[Any] = (),
        new_counts: Sequence[int] | None = None,
        count: Callable[[Any], int] | None = None,
        new_views: Sequence[MessageRecord] | None = None,
    ) -> bool:
        """``size`` messages and ``tokens`` (token mode) of the whole, ``new`` at its end
        (``new_views``: their records, when read already)."""
        if self._trigger_messages is not None and size > self._trigger_messages:
            return False
        limit = self._trigger_tokens
        if limit is not None and (tokens is None or tokens > limit):
            return False
        above = self._above
        if above is None:
            return True
        for k, message in enumerate(new):
            if editable_size(message, None if new_views is None else new_views[k]) <= above:
                continue
            if new_counts is not None:
                found = new_counts[k]
            elif count is not None:
                found = count(message)
            else:
                return False
            if found > above:
                return False
        return True


def _count_mode_stop(structure: Structure, config: EditConfig) -> int:
    """In count mode, the first index a prune may keep (0 when it will not prune).

    The window keeps the last ``min_messages`` and the current turn; what lies before
    both is pruned, so it is neither counted nor edited.
    """
    n = len(structure.views)
    if config.max_messages is None or n <= config.max_messages:
        return 0
    opener = structure.turn.opener
    return 0 if opener is None else min(max(0, n - config.min_messages), opener)
