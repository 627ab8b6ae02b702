"""The general reader's walk over a message's fields and content (:class:`_Walk`): the
texts, calls, results, media and reasoning it finds, in order, and the calls a message
keeps in its fields (:func:`_field_calls`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._field import FieldError as _FieldError
from ._field import as_id as _as_id
from ._field import kind as _kind
from .fields import (
    _CALL_BLOCKS,
    _CLIENT_CALL_BLOCKS,
    _MEDIA_BLOCKS,
    _REASONING_BLOCKS,
    _TEXT_BLOCKS,
    _get,
    _json,
)


class _Walk:
    """What one walk over a message's fields and content finds, in order."""

    __slots__ = ("calls", "compacted", "media", "reasoning", "results", "string", "texts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        #: ``(id or None, name, arguments as stored, linked)``: ``linked`` for calls a
        #: tool result answers (not server-side ones).
        self.calls: list[tuple[str | None, str, object, bool]] = []
        self.results: list[str] = []
        self.media = 0
        self.reasoning: list[int] = []
        #: Whether the top-level content is one string (its text comes first).
        self.string = False
        #: Whether the top-level content holds an Anthropic ``compaction`` block.
        self.compacted = False

    def add_call(self, ident: object, name: object, args: object, linked: bool) -> None:
        self.calls.append((_as_id(ident), name if isinstance(name, str) else "", args, linked))

    def content(self, content: object, top: bool = False) -> None:
        if content is None:
            return
        if isinstance(content, str):
            if content:
                self.texts.append(content)
                self.string = top
            return
        if type(content) is dict or isinstance(content, Mapping):
            content = [content]
        if not isinstance(content, (list, tuple)):
            self.texts.append(str(content))
            return
        try:
            for i, block in enumerate(content):
                if isinstance(block, str):
                    if block:
                        self.texts.append(block)
                elif type(block) is dict or isinstance(block, Mapping):
                    self.block(block, i if top else -1)
        except _FieldError as exc:
            raise exc.within(f"[{i}]") from exc.__cause__

    def block(self, block: Mapping[str, Any], index: int) -> None:
        kind = block.get("type")
        if kind in _TEXT_BLOCKS:
            self.text(block.get("text"))
        elif kind in _MEDIA_BLOCKS:
            self.media += 1
        elif kind in _CALL_BLOCKS:
            args = block.get("input") if "input" in block else block.get("args")
            self.add_call(block.get("id"), block.get("name"), args, kind in _CLIENT_CALL_BLOCKS)
        elif kind == "tool_result":
            ident = _as_id(block.get("tool_use_id"), ".tool_use_id")
            if ident is not None:
                self.results.append(ident)
            try:
                self.content(block.get("content"))
            except _FieldError as exc:
                raise exc.within(".content") from exc.__cause__
        elif kind in _REASONING_BLOCKS:
            if index >= 0:
                self.reasoning.append(index)
            if kind == "thinking":
                self.text(block.get("thinking"))
            elif kind == "redacted_thinking":  # encrypted: its size stands for its tokens
                self.text(block.get("data"))
            elif kind == "reasoning":
                self.text(block.get("reasoning", block.get("text")))
                summary = block.get("summary")
                if isinstance(summary, (list, tuple)):
                    for item in summary:
                        if isinstance(item, Mapping):
                            self.text(item.get("text"))
        elif kind == "compaction" or (
            kind == "non_standard" and _compaction(block.get("value"))
        ):
            # Anthropic's summary of what precedes it: billed, and a boundary.
            self.compacted = self.compacted or index >= 0
            held = block if kind == "compaction" else block["value"]
            self.text(held.get("content"))
        elif kind == "refusal":
            self.text(block.get("refusal"))
        elif kind == "json":
            self.texts.append(_json(block.get("json")))
        else:
            # Unknown or untyped blocks bill only the text they carry, never their repr.
            self.text(block.get("text"))

    def text(self, value: object) -> None:
        if isinstance(value, str) and value:
            self.texts.append(value)


def _compaction(value: object) -> bool:
    """Whether a LangChain ``non_standard`` block's value is a ``compaction`` block."""
    return isinstance(value, Mapping) and value.get("type") == "compaction"


def _calls_field(fields: Any, key: str) -> tuple[object, str]:
    """The value of the calls field ``key`` and its path (in ``additional_kwargs`` when
    the field is empty)."""
    calls = _get(fields, key)
    if not calls and type(fields) is not dict and not isinstance(fields, Mapping):
        # LangChain objects built from raw provider output keep calls here.
        extra = _get(fields, "additional_kwargs")
        if isinstance(extra, Mapping) and extra.get(key):
            return extra.get(key), f".additional_kwargs.{key}"
    return calls, f".{key}"


def _call_like(value: object) -> bool:
    """A tool call or its ``function``: a mapping, or an object with call attributes (an
    SDK's model); a number, a string, a list or ``None`` is none."""
    if type(value) is dict or isinstance(value, Mapping):
        return True
    if value is None or isinstance(value, (str, bytes, int, float, list, tuple)):
        return False
    return any(hasattr(value, key) for key in ("id", "name", "function", "arguments", "args"))


def _field_calls(fields: Any, walk: _Walk) -> None:
    for key in ("tool_calls", "invalid_tool_calls"):
        calls, where = _calls_field(fields, key)
        if not calls:
            continue
        if not isinstance(calls, (list, tuple)):
            raise _FieldError(where, f"expected a list of tool calls, got {_kind(calls)}")
        for j, call in enumerate(calls):
            if not _call_like(call):
                raise _FieldError(f"{where}[{j}]", f"expected a tool call, got {_kind(call)}")
            try:
                function = _get(call, "function")
                if function is None:  # LangChain: {"id", "name", "args"}
                    walk.add_call(_get(call, "id"), _get(call, "name"), _get(call, "args"), True)
                    continue
                if not _call_like(function):
                    raise _FieldError(".function", f"expected a mapping, got {_kind(function)}")
                # OpenAI: {"id", "function": {"name", "arguments"}}
                try:
                    name, args = _get(function, "name"), _get(function, "arguments")
                except _FieldError as exc:
                    raise exc.within(".function") from exc.__cause__
                walk.add_call(_get(call, "id"), name, args, True)
            except _FieldError as exc:
                raise exc.within(f"{where}[{j}]") from exc.__cause__
    legacy, where = _calls_field(fields, "function_call")
    if legacy is not None:
        if not _call_like(legacy):
            raise _FieldError(where, f"expected a mapping, got {_kind(legacy)}")
        try:
            walk.add_call(None, _get(legacy, "name"), _get(legacy, "arguments") or "", False)
        except _FieldError as exc:
            raise exc.within(where) from exc.__cause__
