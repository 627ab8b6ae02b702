"""What context editing is told and what it tells: the options (:class:`ClearToolResults`,
:class:`Offload`) and the config it reads, the record of each edit (:class:`ContextEdit`,
:class:`EditOutcome`) and its kinds, and the handle and marker an edited part carries
(:func:`handle_of`, :func:`is_edited`, :func:`original_text`). The edit step itself is
:mod:`agentstate_reducer.edit`, which re-exports these."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from .errors import ConfigError
from .read import message_parts, package_note, with_parts

# Kinds of edit.
CLEARED = "cleared"
OFFLOADED = "offloaded"
CLEARED_INPUT = "cleared input"

#: A placeholder starts with this, whatever the shape carrying it.
_MARK = re.compile(r"\[(?:cleared|offloaded): [^\n\]]*?handle (ctx_[0-9a-f]{16})")
#: What a cleared placeholder of the ladder says of the call, after its handle.
_CALLED = re.compile(r"; called with (.*)\]\Z", re.S)
_HANDLE_HEX = 16


def _int(owner: str, name: str, value: object, *, least: int, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        expected = f"an int >= {least}" + (" or None" if allow_none else "")
        raise ConfigError(f"{owner}.{name} must be {expected}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class ClearToolResults:
    """Replace old tool results with a placeholder once the history is over a trigger.

    The placeholder names the tool, the result's size in tokens and a handle to get it
    back (:func:`~agentstate_reducer.langgraph.fetch_original`); the call and the result message
    stay, so every pair stays valid. The original reaches the ``on_prune`` hooks once.

    The trigger is ``trigger_tokens`` / ``trigger_messages`` when set (either one
    exceeded fires it), else the reducer's own threshold (``max_tokens`` in token
    mode, ``max_messages`` in count mode).
    """

    #: Fire when the history holds more tokens than this.
    trigger_tokens: int | None = None
    #: Fire when the history holds more messages than this.
    trigger_messages: int | None = None
    #: The latest tool results kept as they are.
    keep: int = 3
    #: Tools whose results are never cleared (nor counted in ``keep``).
    exclude_tools: frozenset[str] = frozenset()
    #: Clear nothing unless at least this many tokens would be saved.
    clear_at_least: int = 0
    #: Also clear the arguments of the calls whose results are cleared.
    clear_tool_inputs: bool = False

    def __post_init__(self) -> None:
        name = type(self).__name__
        _int(name, "trigger_tokens", self.trigger_tokens, least=1, allow_none=True)
        _int(name, "trigger_messages", self.trigger_messages, least=1, allow_none=True)
        _int(name, "keep", self.keep, least=0)
        _int(name, "clear_at_least", self.clear_at_least, least=0)
        tools: object = self.exclude_tools
        if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
            raise ConfigError(
                f"{name}.exclude_tools must be a collection of tool names, got {tools!r}"
            )
        names = frozenset(tools)
        bad = [t for t in names if not isinstance(t, str)]
        if bad:
            raise ConfigError(f"{name}.exclude_tools must hold strings, got {bad[0]!r}")
        object.__setattr__(self, "exclude_tools", names)
        if not isinstance(self.clear_tool_inputs, bool):
            raise ConfigError(
                f"{name}.clear_tool_inputs must be a bool, got {self.clear_tool_inputs!r}"
            )


@dataclass(frozen=True, kw_only=True)
class Offload:
    """Move a tool result (or a text part) over ``above`` tokens out of the history.

    It is replaced by a head-and-tail preview plus a handle, on first sight, even in the
    current turn; the original reaches the ``on_prune`` hooks (and so long-term memory)
    once, and :func:`~agentstate_reducer.langgraph.fetch_original` reads it back.
    """

    #: Offload a part larger than this many tokens.
    above: int = 20_000
    #: Tokens of the part's start kept in the preview.
    head: int = 200
    #: Tokens of the part's end kept in the preview.
    tail: int = 100
    #: Also offload text parts of human and ai messages, not only tool results.
    text: bool = True

    def __post_init__(self) -> None:
        name = type(self).__name__
        _int(name, "above", self.above, least=1)
        _int(name, "head", self.head, least=0)
        _int(name, "tail", self.tail, least=0)
        if 2 * (self.head + self.tail) > self.above:
            raise ConfigError(
                f"{name}.head + tail ({self.head + self.tail!r}) must be at most half of "
                f"above ({self.above!r}), so a preview is always much smaller than its part"
            )
        if not isinstance(self.text, bool):
            raise ConfigError(f"{name}.text must be a bool, got {self.text!r}")


#: One option object per edit kind, as ``ReducerConfig(context_edits=...)`` holds them.
EditOption = ClearToolResults | Offload


class EditConfig(Protocol):
    """What the edit step reads of a :class:`~agentstate_reducer.ReducerConfig`."""

    @property
    def context_edits(self) -> Sequence[EditOption]: ...
    @property
    def preserve_first(self) -> bool: ...
    @property
    def max_tokens(self) -> Any: ...
    @property
    def max_messages(self) -> int | None: ...
    @property
    def min_messages(self) -> int: ...
    @property
    def turn_ladder(self) -> bool: ...
    @property
    def effective_target_tokens(self) -> int | None: ...


def check_edits(value: object) -> tuple[EditOption, ...]:
    """Validate ``ReducerConfig.context_edits``: at most one option object of each kind."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ConfigError(
            f"context_edits must be a list of ClearToolResults / Offload, got {value!r}"
        )
    options = tuple(value)
    seen: set[type] = set()
    for i, option in enumerate(options):
        if not isinstance(option, (ClearToolResults, Offload)):
            raise ConfigError(
                f"context_edits[{i}] must be a ClearToolResults or an Offload, got {option!r}"
            )
        if type(option) in seen:
            raise ConfigError(
                f"context_edits[{i}] is a second {type(option).__name__}; give each kind once"
            )
        seen.add(type(option))
    return options


@dataclass(frozen=True, eq=False)
class ContextEdit:
    """One part of one message that a reduce replaced."""

    #: Index of the message in the list that was reduced (``existing + new``).
    index: int
    #: :data:`CLEARED`, :data:`OFFLOADED` or :data:`CLEARED_INPUT`.
    kind: str
    #: Digest of the original part: its key in long-term memory, named in the placeholder.
    handle: str
    #: The tool whose result or arguments these were (``None`` for a text part).
    tool: str | None
    #: The tool call the part belongs to, if any.
    call_id: str | None
    #: The id of the edited message, or ``None``.
    message_id: str | None
    #: The original part's size in tokens.
    tokens: int
    #: The message as it was, and what :attr:`original` changes in a copy of it.
    _source: Any = field(repr=False, compare=False)
    _values: Mapping[tuple[str | int, ...], object] = field(repr=False, compare=False)
    #: Whether :attr:`original` goes to the hooks: ``False`` for a preview the turn
    #: ladder cleared, whose original they got when it was offloaded.
    delivers: bool = True

    @cached_property
    def original(self) -> Any:
        """What the hooks receive: a copy of the message holding the original part, whose
        id is :attr:`handle`, with a note (``package_note``) saying it was edited.

        Built on first access (only when there are hooks to hand it to).
        """
        note = {
            "edit": self.kind,
            "handle": self.handle,
            "tool": self.tool,
            "call_id": self.call_id,
            "message_id": self.message_id,
            "tokens": self.tokens,
        }
        return with_parts(self._source, self._values, note=note)


@dataclass(frozen=True)
class EditOutcome:
    """What :func:`edit_messages` returns."""

    #: The messages, each edited one replaced by its copy (the others are the inputs).
    messages: list[Any]
    #: Token counts of ``messages`` (``None`` when none were given: count mode); lazy
    #: when the given counts were.
    counts: Sequence[int] | None
    #: The edits made, in message order.
    edits: tuple[ContextEdit, ...]


_to_json = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode


def handle_of(value: object) -> str:
    """The content-addressed handle of a part's value: ``ctx_`` and 16 hex digits.

    The digest of ``json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)``.
    """
    if type(value) is str and '"' not in value and "\\" not in value and value.isprintable():
        text = f'"{value}"'  # what the encoder writes, without its escaping pass
    else:
        text = _to_json(value)
    return "ctx_" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HANDLE_HEX]


def is_edited(value: object) -> bool:
    """True when a part's value is a placeholder or preview this module wrote."""
    return isinstance(value, str) and _MARK.match(value) is not None


def original_text(message: object) -> str | None:
    """The text of an edited original as the hooks received it (:attr:`ContextEdit.original`):
    its part's text, or for cleared call arguments their JSON; ``None`` for a message
    that is not an edited original."""
    note = package_note(message)
    if note is None or "edit" not in note:
        return None
    parts = message_parts(message)
    text = "\n".join(parts.texts)
    return text or "\n".join(arguments for _, arguments in parts.tool_calls)


def _args_cleared(value: object) -> bool:
    return value in (None, "", "{}") or value == {}
