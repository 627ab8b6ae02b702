"""The commands ``reduce``, ``trim`` and ``count``, each returning its exit status."""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..config import ReducerConfig
from ..errors import ConfigError
from ..read import (
    HUMAN,
    read_message,
)
from ..reducer import MessageReducer, repair_dangling_calls
from ..reducing.prepare import prepare
from ..reducing.result import _result
from ..tokens import TokenCounter, resolve_token_counter
from ..trim import trim_selection
from ..validate import validate_history
from .explain import (
    _clip,
    _explain,
    _explain_trim,
    _Laddered,
    _Planned,
    _plural,
    _preview,
)
from .progress import Status, is_terminal
from .transcript import (
    Transcript,
    _emit,
    load,
)

#: The columns of ``count``: the heuristic, then each exact encoding.
_COUNTERS = ("approximate", "o200k_base", "cl100k_base")
#: ``--max-messages`` when not given: ReducerConfig's default.
_MAX_MESSAGES = 20


class _UsageError(Exception):
    """The options are inconsistent (exit status 2)."""


#: Exit status when the output breaks the provider's rules.
_INVALID_OUTPUT = 3
#: Providers that reject a conversation opening with the assistant: both commands start
#: the kept messages on a human one unless told otherwise.
_STARTS_ON_HUMAN = ("anthropic", "gemini", "bedrock")


def _counter(name: str) -> TokenCounter:
    try:
        return resolve_token_counter(name)
    except (ImportError, ConfigError) as exc:
        raise _UsageError(f"--counter {name!r} is not available: {exc}") from exc


def _repaired(transcript: Transcript) -> _Planned:
    messages, added = repair_dangling_calls(transcript.messages)
    synthetic = {id(m) for m in added}
    origin: list[int] = []
    at = -1
    for message in messages:
        if id(message) not in synthetic:
            at += 1
        origin.append(at)
    return _Planned(messages, origin, synthetic)


def _cmd_reduce(args: argparse.Namespace) -> int:
    _counter(args.counter)  # fail early, with the install hint, when it is missing
    if args.max_tokens is not None and (
        args.max_messages is not None or args.min_messages is not None
    ):
        given = " and ".join(
            flag for flag, value in (("--max-messages", args.max_messages),
                                     ("--min-messages", args.min_messages)) if value is not None
        )
        print(f"{args.prog}: warning: --max-tokens and {given} both given: token mode wins, "
              f"{given} {'is' if ' and ' not in given else 'are'} ignored", file=sys.stderr)
    if args.turn_ladder and args.max_tokens is None:
        raise _UsageError("--turn-ladder needs --max-tokens: the ladder works in token mode")
    max_messages = _MAX_MESSAGES if args.max_messages is None else args.max_messages
    min_messages = max_messages // 2 if args.min_messages is None else args.min_messages
    try:
        config = ReducerConfig(
            min_messages=min_messages,
            max_messages=max_messages,
            max_tokens=args.max_tokens,
            target_tokens=args.target_tokens,
            token_counter=args.counter,
            preserve_first=args.preserve_first,
            cascade_tool_messages=args.cascade,
            start_on=None if args.start_on in (None, "none") else args.start_on,
            dedupe_on_prune=False,
            turn_ladder=args.turn_ladder,
        )
    except ConfigError as exc:
        raise _UsageError(_as_flags(str(exc))) from exc
    status: Status = args.status
    transcript = load(args.file, status)
    provider = args.provider or transcript.provider
    start_on_default = args.start_on is None and provider in _STARTS_ON_HUMAN
    if start_on_default:
        config = dataclasses.replace(config, start_on=HUMAN)
    if provider == "bedrock" and transcript.messages and transcript.system is None:
        # Converse wants strict alternation: a kept first question and the question the
        # kept tail starts with would be two user messages in a row.
        config = dataclasses.replace(config, preserve_first=False)
    reducer = MessageReducer(config=config)
    planned = (
        _repaired(transcript)
        if args.repair_dangling_calls
        else _Planned(transcript.messages, list(range(len(transcript.messages))))
    )
    status.say(f"planning {len(planned.messages):,} messages")
    laddered = None
    if config.turn_ladder:
        laddered = _ladder(reducer, planned)
        plan = laddered.plan
        surviving, origin = laddered.result.surviving, laddered.origin
    else:
        plan = reducer.plan(planned.messages)  # what reduce() does, without hooks to run
        gone = set(plan.pruned)
        kept = [i for i in range(len(planned.messages)) if i not in gone]
        surviving = [planned.messages[i] for i in kept]
        origin = [planned.origin[i] for i in kept]
    if args.explain:
        status.say(f"counting {len(planned.messages):,} messages")
        counts = reducer.count_tokens(planned.messages)
        lines = _explain(
            transcript, plan, counts, config, args.counter, start_on_default, args.all, planned,
            laddered,
        )
        status.clear()
        print("\n".join(lines))
    return _finish(args, transcript, surviving, origin)


def _ladder(reducer: MessageReducer, planned: _Planned) -> _Laddered:
    """What ``reduce()`` does with the turn ladder on (read, edit, plan; no hook to run),
    with each survivor's index in the transcript."""
    prepared = prepare(reducer, planned.messages, planned.messages.copy(), None)
    messages, plan, memo, edits, added = prepared
    result = _result(reducer, messages, plan, memo, edits, added, None, False)[0]
    gone = set(plan.pruned)
    kept = [i for i in range(len(messages)) if i not in gone]
    if plan.note is not None:  # where _outcome puts the note, numbered as what it follows
        index, _, replaces = plan.note
        at = index - sum(i < index for i in plan.pruned)
        kept[at : at + replaces] = [index]
    origin = [planned.origin[i] for i in kept]
    if len(origin) != len(result.surviving):  # pragma: no cover - the two would disagree
        raise AssertionError("the ladder's survivors and their origins differ")
    counts = reducer.count_tokens(messages)
    note = reducer.count_tokens([plan.note[1]])[0] if plan.note is not None else 0
    return _Laddered(messages, plan, result, origin, edits, counts, note)


def _finish(
    args: argparse.Namespace, transcript: Transcript, kept: list[Any], origin: list[int]
) -> int:
    """Check the provider's rules, then write ``kept`` (unless only explaining).

    Returns the exit status: 0, or 3 when ``kept`` breaks the provider's rules.
    """
    provider = args.provider or transcript.provider
    status: Status = args.status
    status.say(f"checking the {provider} rules")
    before = _problems(transcript, transcript.messages, range(len(transcript.messages)), provider)
    after = _problems(transcript, kept, origin, provider)
    status.clear()
    if args.explain:
        print()
        for what, problems in (("input", before), ("output", after)):
            found = _plural(len(problems), "problem") if problems else "OK"
            print(f"{provider} rules, {what}: {found}")
            for problem, fix in problems:
                print(f"  {problem}\n    fix: {fix}")
    else:
        for problem, fix in after:
            print(f"{args.prog}: warning: the output breaks {provider} rules: {problem}; "
                  f"fix: {fix}", file=sys.stderr)
    if args.out is not None or not args.explain:
        if args.out is not None:
            status.say(f"writing {args.out}")
        _emit(transcript, kept, origin, args.out)
        status.clear()
    if args.explain and args.out is not None:
        print(f"wrote {args.out}")
    return _INVALID_OUTPUT if after else 0


def _problems(
    transcript: Transcript, messages: list[Any], origin: Sequence[int], provider: str
) -> list[tuple[str, str]]:
    """``(problem, fix)`` per provider rule ``messages`` break, numbered as in the input."""
    found = []
    for problem in validate_history(messages, provider=provider):
        where = (
            transcript.label_of(origin[problem.index])
            if len(origin) == len(messages)
            else f"{problem.index} of the output"
        )
        found.append((f"message {where}: {problem.detail} [{problem.rule}]", problem.fix))
    return found


# Pieces ``--allow-partial`` may cut text into; each list joins back to the text.
# ``line`` is trim_messages' own default.
_SPLITTERS: dict[str, Callable[[str], list[str]] | None] = {
    "line": None,
    "sentence": lambda text: re.findall(r"[^.!?]*(?:[.!?]+\s*|$)", text)[:-1] or [text],
    "word": lambda text: re.findall(r"\s*\S+|\s+$", text) or [text],
}


def _cmd_trim(args: argparse.Namespace) -> int:
    counter = _counter(args.counter)
    if args.include_system is None:
        # trim_messages refuses include_system with "first", which keeps the start anyway.
        args.include_system = args.strategy == "last"
    status: Status = args.status
    transcript = load(args.file, status)
    if args.start_on is None and (args.provider or transcript.provider) in _STARTS_ON_HUMAN:
        if args.strategy == "last":
            args.start_on = [HUMAN]
            args.start_on_default = True
    elif args.start_on is not None:
        args.start_on = [role for role in args.start_on if role != "none"] or None
    status.say(f"trimming {len(transcript.messages):,} messages")
    try:
        selection = trim_selection(
            transcript.messages,
            max_tokens=args.max_tokens,
            token_counter=args.counter,
            strategy=args.strategy,
            allow_partial=args.allow_partial,
            end_on=args.end_on,
            start_on=args.start_on,
            include_system=args.include_system,
            text_splitter=_SPLITTERS[args.split_on],
            keep_tool_pairs=args.keep_tool_pairs,
        )
    except ConfigError as exc:
        raise _UsageError(_as_flags(str(exc))) from exc
    kept = [m for _, m in selection.kept]
    partial = {i: m for i, m in selection.kept if i in selection.partial}
    results = ["trimmed"] * len(transcript.messages)
    for i, _ in selection.kept:
        results[i] = "partial" if i in partial else "kept"
    if args.explain:
        lines = _explain_trim(transcript, kept, counter, args, results, partial)
        args.status.clear()
        print("\n".join(lines))
    origin = [i for i, result in enumerate(results) if result != "trimmed"]
    return _finish(args, transcript, kept, origin)


def _cmd_count(args: argparse.Namespace) -> int:
    """Print a row per message as soon as it is counted (the table's widths are known
    before the first count: the counts' columns are as wide as their names)."""
    status: Status = args.status
    transcript = load(args.file, status)
    names: list[str] = []
    counters: list[TokenCounter] = []
    notes: list[str] = []
    for name in _COUNTERS:
        try:
            counters.append(_counter(name))
        except _UsageError as exc:
            notes.append(f"{name}: not available ({exc.__cause__})")
            continue
        names.append(name)
    messages = transcript.messages
    n = len(messages)
    roles = [read_message(message, i).role for i, message in enumerate(messages)]
    labels = [transcript.label_of(i) for i in range(n)]
    widths = [
        max([1, *map(len, labels)]),
        max([len("role"), len("total"), *map(len, roles)]),
        *map(len, names),
    ]
    right = set(range(2, 2 + len(names))) | {0}
    room = max(shutil.get_terminal_size((100, 24)).columns - sum(widths) - 2 * len(widths) - 1,
               20)

    def line(cells: Sequence[str], content: str) -> str:
        aligned = [c.rjust(w) if k in right else c.ljust(w)
                   for k, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join([*aligned, _clip(content, room)]).rstrip()

    # On a terminal the rows are the progress; else the status counts on standard error.
    counting = not is_terminal(sys.stdout)
    status.clear()
    print(f"input: {transcript.source}: {transcript.label}, {_plural(n, 'message')}")
    print()
    print(line(("#", "role", *names), "content"))
    totals = [0] * len(counters)
    for i, message in enumerate(messages):
        counts = [int(counter(message)) for counter in counters]
        totals = [t + c for t, c in zip(totals, counts, strict=True)]
        if counting:
            status.tick(i + 1, n, "counted")
        print(line((labels[i], roles[i], *map(str, counts)), _preview(message, i)))
    print(line(("", "total", *map(str, totals)), ""))
    if notes:
        print("\n" + "\n".join(notes))
    return 0


# The options' names in error messages of ReducerConfig and trim_messages, as flags.
_FLAGS = re.compile(
    r"\b(min_messages|max_messages|max_tokens|target_tokens|start_on|end_on|include_system|"
    r"allow_partial|keep_tool_pairs|token_counter|strategy)\b"
)


_FLAG_NAMES = {"token_counter": "--counter"}


def _as_flags(message: str) -> str:
    """``message`` with option names spelled as the flags that set them."""
    return _FLAGS.sub(
        lambda m: _FLAG_NAMES.get(m[1], "--" + m[1].replace("_", "-")), message
    )
