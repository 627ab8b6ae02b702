"""What ``--explain`` prints: tables of every message, the plan's reasons, totals."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import ReducerConfig, ReducerResult
from ..edit import ContextEdit
from ..plan import CASCADE, START_ON, Plan
from ..plan.types import ladder_done, over_causes
from ..read import (
    injected_mark,
    message_parts,
    read_message,
)
from ..tokens import TokenCounter
from .transcript import (
    Transcript,
)


def _preview(message: Any, index: int) -> str:
    parts = message_parts(message, index)
    pieces = list(parts.texts) + [f"{name}({args})" for name, args in parts.tool_calls]
    return " ".join(" ".join(pieces).split())


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _table(headers: Sequence[str], rows: list[list[str]], right: set[int]) -> list[str]:
    """Align ``rows`` under ``headers``; the last column is clipped to the terminal width."""
    widths = [max([len(h)] + [len(r[c]) for r in rows]) for c, h in enumerate(headers[:-1])]
    columns = shutil.get_terminal_size((100, 24)).columns
    room = max(columns - sum(widths) - 2 * len(widths) - 1, 20)
    out = []
    for row in [list(headers), *rows]:
        cells = [
            row[c].rjust(w) if c in right else row[c].ljust(w) for c, w in enumerate(widths)
        ]
        out.append("  ".join([*cells, _clip(row[-1], room)]).rstrip())
    return out


#: ``--explain`` shows every row up to this many messages, else a head, a tail and a summary.
_EXPLAIN_ROWS = 40
_HEAD, _TAIL = 10, 20


def _elide(table: list[str], results: list[str], show_all: bool) -> list[str]:
    """``table`` (a header, then one line per message), cut to a head and a tail when long."""
    if show_all or len(results) <= _EXPLAIN_ROWS:
        return table
    header, lines = table[0], table[1:]
    hidden = results[_HEAD : len(results) - _TAIL]
    tally = ", ".join(
        f"{hidden.count(kind)} {kind}" for kind in dict.fromkeys(hidden)
    )
    return [
        header,
        *lines[:_HEAD],
        f"   … {_plural(len(hidden), 'more message')} ({tally}); --all shows every one",
        *lines[len(lines) - _TAIL :],
    ]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


#: How --explain numbers a synthetic result added by --repair-dangling-calls.
_ADDED = "+"


def _why(labels: Sequence[str], plan: Plan, index: int) -> str:
    reason, related = plan.reason(index)
    if reason == CASCADE and related is not None:
        return f"cascade from {labels[related]}"
    if reason == START_ON:
        return "start_on human"
    return reason


def _describe_config(
    config: ReducerConfig, counter_name: str, start_on_default: bool = False
) -> str:
    if config.max_tokens is not None:
        text = (
            f"token mode: prune above {config.max_tokens} tokens, down to "
            f"{config.effective_target_tokens}"
        )
    else:
        text = (
            f"count mode: prune above {config.max_messages} messages, keep the last "
            f"{config.min_messages}"
        )
    flags = [f"{counter_name} counter"]
    if not config.preserve_first:
        flags.append("first message not preserved")
    if not config.cascade_tool_messages:
        flags.append("no cascade")
    if config.start_on:
        flags.append(f"start_on {config.start_on}")
    line = f"{text} ({', '.join(flags)})"
    if start_on_default:
        line += (
            "\nstart_on human: the default for an Anthropic, Gemini or Bedrock request, whose "
            "conversation must open with a user message (--start-on none turns it off)"
        )
    return line


def _explain(
    transcript: Transcript,
    plan: Plan,
    counts: list[int],
    config: ReducerConfig,
    counter: str,
    start_on_default: bool = False,
    show_all: bool = False,
    planned: _Planned | None = None,
    laddered: _Laddered | None = None,
) -> list[str]:
    planned = planned or _Planned(transcript.messages, list(range(len(transcript.messages))))
    labels = planned.labels(transcript)
    gone = set(plan.pruned)
    kinds: dict[int, list[str]] = {}
    for edit in laddered.edits if laddered is not None else ():
        kinds.setdefault(edit.index, []).append(edit.kind)
    note_at, replaces = (plan.note[0], plan.note[2]) if plan.note is not None else (-1, False)
    rows = []
    after = 0
    for i, message in enumerate(planned.messages):
        if i == note_at and laddered is not None:
            rows.extend(_note_row(laddered, replaces))
            after += laddered.note_tokens
            if replaces:
                continue
        role = read_message(message, i).role
        result = "pruned" if i in gone else ("added" if labels[i] == _ADDED else "kept")
        why = "repair: no result recorded" if labels[i] == _ADDED else _why(labels, plan, i)
        tokens = str(counts[i])
        shown = message
        if i in kinds and laddered is not None:
            shown = laddered.messages[i]
            edited = laddered.counts[i]
            tokens = f"{edited}/{counts[i]}"
            if i not in gone:
                result = ", ".join(kinds[i])
                why = "turn ladder" if i >= plan.turn.body and config.turn_ladder else "edit"
        if i not in gone:
            after += laddered.counts[i] if laddered is not None else counts[i]
        rows.append([labels[i], role, tokens, result, why, _preview(shown, i)])
    n = len(transcript.messages)
    added = len(planned.messages) - n
    before = sum(c for c, label in zip(counts, labels, strict=True) if label != _ADDED)
    note = f"{len(gone)} pruned"
    if kinds:
        note += f", {sum(i not in gone for i in kinds)} edited"
    if added:
        note += f", {_plural(added, 'synthetic result')} added"
    kept = len(planned.messages) - len(gone)
    if laddered is not None:
        kept = len(laddered.result.surviving)
    table = _table(("#", "role", "tokens", "result", "why", "content"), rows, {0, 2})
    return [
        f"input: {transcript.source}: {transcript.label}, {_plural(n, 'message')}",
        _describe_config(config, counter, start_on_default),
        "",
        *_elide(table, [r[3] for r in rows], show_all),
        "",
        *_totals(n, before, kept, after, note),
        *_ladder_line(laddered),
        *_over(plan, config),
    ]


@dataclass
class _Laddered:
    """What ``reduce`` made with the turn ladder on: the edited messages (one per planned
    message), the plan over them, the result, and each survivor's index in the transcript."""

    messages: list[Any]
    plan: Plan
    result: ReducerResult[Any]
    origin: list[int]
    edits: tuple[ContextEdit, ...]
    counts: list[int] = field(default_factory=list)
    note_tokens: int = 0


def _note_row(laddered: _Laddered, replaces: bool) -> list[list[str]]:
    """The turn note's row: added (or rewritten, where it replaces a message)."""
    plan = laddered.plan
    assert plan.note is not None
    index, message, _ = plan.note
    steps = (injected_mark(message) or {}).get("steps", laddered.result.turn_steps_dropped)
    role = read_message(message, index).role
    return [[
        _ADDED, role, str(laddered.note_tokens), "rewritten" if replaces else "added",
        f"turn note: {_plural(int(steps), 'step')} dropped", _preview(message, index),
    ]]


def _ladder_line(laddered: _Laddered | None) -> list[str]:
    """What the turn ladder did to the current turn, from the result's figures."""
    if laddered is None:
        return []
    result = laddered.result
    done = ladder_done(
        result.turn_results_cleared, result.turn_inputs_cleared, result.turn_steps_dropped
    )
    return [
        f"turn ladder: {done.removeprefix('the turn ladder ')}" if done
        else "turn ladder: nothing to do (the current turn fits max_tokens)"
    ]


@dataclass
class _Planned:
    """What ``reduce`` plans over: the transcript's messages, with any synthetic results."""

    messages: list[Any]
    #: Per message, its index in the transcript (a synthetic result: its call's), or -1.
    origin: list[int]
    added: set[int] = field(default_factory=set)

    def labels(self, transcript: Transcript) -> list[str]:
        return [
            _ADDED if id(m) in self.added else transcript.label_of(o)
            for m, o in zip(self.messages, self.origin, strict=True)
        ]


def _over(plan: Plan, config: ReducerConfig) -> list[str]:
    """A line saying the survivors exceed the target, and why; none when they do not."""
    if not plan.over_target:
        return []
    if config.max_tokens is not None:
        what = (
            f"{plan.kept_tokens} tokens kept, over the "
            f"{'budget' if plan.over_budget else 'target'} of "
            f"{config.max_tokens if plan.over_budget else config.effective_target_tokens}"
        )
    else:
        what = f"{plan.kept} messages kept, over the budget of {config.max_messages}"
    because = over_causes(plan.over_because)
    if plan.dropped_steps:
        because += f" ({_plural(plan.dropped_steps, 'oldest step')} of it pruned)"
    return [f"over: {what}: {because}"]


def _totals(n: int, before: int, kept: int, after: int, note: str) -> list[str]:
    """The two closing lines of a table: messages and tokens before and after."""
    if before > after:
        note += f", {100 * (before - after) // before}% fewer tokens"
    w1, w2 = len(str(n)), len(str(before))
    return [
        f"before: {n:>{w1}} {'message' if n == 1 else 'messages'}, {before:>{w2}} tokens",
        f"after:  {kept:>{w1}} {'message' if kept == 1 else 'messages'}, {after:>{w2}} tokens "
        f"({note})",
    ]


def _describe_trim(args: argparse.Namespace) -> str:
    flags = [f"{args.counter} counter"]
    if args.include_system:
        flags.append("include_system")
    if args.allow_partial:
        flags.append(f"allow_partial, split on {args.split_on}")
    if args.start_on:
        flags.append(f"start_on {'/'.join(args.start_on)}")
        if getattr(args, "start_on_default", False):
            flags[-1] += (
                " (the default for an Anthropic, Gemini or Bedrock request; --start-on none "
                "turns it off)"
            )
    if args.end_on:
        flags.append(f"end_on {'/'.join(args.end_on)}")
    if not args.keep_tool_pairs:
        flags.append("tool pairs may be split")
    return (
        f"trim: keep the {args.strategy} messages within {args.max_tokens} tokens "
        f"({', '.join(flags)})"
    )


def _explain_trim(
    transcript: Transcript,
    kept: list[Any],
    counter: TokenCounter,
    args: argparse.Namespace,
    status: list[str],
    partial: dict[int, Any],
) -> list[str]:
    counts = [int(counter(m)) for m in transcript.messages]
    rows = []
    for i, message in enumerate(transcript.messages):
        tokens = str(counts[i])
        if i in partial:
            tokens = f"{int(counter(partial[i]))}/{counts[i]}"
        shown = partial.get(i, message)
        rows.append([
            transcript.label_of(i), read_message(message, i).role, tokens, status[i],
            _preview(shown, i),
        ])
    n = len(transcript.messages)
    before = sum(counts)
    after = sum(int(counter(m)) for m in kept)
    table = _table(("#", "role", "tokens", "result", "content"), rows, {0, 2})
    return [
        f"input: {transcript.source}: {transcript.label}, {_plural(n, 'message')}",
        _describe_trim(args),
        "",
        *_elide(table, status, args.all),
        "",
        *_totals(
            n, before, len(kept), after,
            f"{status.count('trimmed')} trimmed, {len(partial)} partial",
        ),
    ]
