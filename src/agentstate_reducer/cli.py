"""The command line: ``agentstate-reducer reduce|trim|count FILE`` (standard library only).

Reads a transcript in the shapes people keep (a JSON list of messages, an object
with ``"messages"``, JSONL, an OpenAI chat-completions, OpenAI Responses or Anthropic
Messages request, a Gemini ``generateContent`` or Bedrock Converse request,
LangChain-serialised messages), runs the reducer over it and writes the survivors back
in the shape it read.

Exit status: 0 done, 1 the input could not be read or the output not written,
2 bad options, 3 the output breaks its provider's rules (written all the same).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .config import ReducerConfig
from .errors import ConfigError, MessageFormatError, ReducerError
from .plan import CASCADE, CURRENT_TURN, NEVER_PRUNED, START_ON, Plan
from .read import (
    AI,
    FUNCTION,
    HUMAN,
    MAX_DEPTH,
    SYSTEM,
    TOOL,
    Request,
    item_type,
    looks_like_message,
    message_parts,
    native_provider,
    normalize_role,
    read_message,
    read_request,
    serialisation,
    write_request,
)
from .reducer import MessageReducer, repair_dangling_calls
from .tokens import TokenCounter, check_token_counter, resolve_token_counter
from .trim import trim_selection
from .validate import validate_history

__all__ = ("Transcript", "dump", "load", "main")

_EXPECTED = (
    'expected a JSON list of messages, an object with a "messages" list (or an OpenAI '
    'Responses request, with an "input" list), or JSONL (one message per line)'
)
#: The columns of ``count``: the heuristic, then each exact encoding.
_COUNTERS = ("approximate", "o200k_base", "cl100k_base")
#: ``--max-messages`` when not given: ReducerConfig's default.
_MAX_MESSAGES = 20


class _InputError(Exception):
    """The input cannot be read or the output not written (exit status 1)."""


class _UsageError(Exception):
    """The options are inconsistent (exit status 2)."""


#: Exit status when the output breaks the provider's rules.
_INVALID_OUTPUT = 3


@dataclass
class Transcript:
    """A conversation read from a file, and what is needed to write it back the same way."""

    #: Where it came from, for messages (``<stdin>`` for ``-``).
    source: str
    #: ``list``, ``jsonl``, ``object``, ``openai``, ``anthropic``, ``gemini``, ``bedrock``
    #: or ``responses``.
    shape: str
    #: A phrase naming the detected shape, for people.
    label: str
    #: The messages to plan over; a request's top-level system prompt comes first.
    messages: list[Any]
    #: The parsed document (object shapes), rebuilt with the surviving messages.
    document: Any = None
    #: The message standing for a request's top-level system prompt, if any.
    system: dict[str, Any] | None = None
    #: Indentation of the input document, reused on output (``None``: compact).
    indent: str | None = None
    #: Input line of each message (JSONL).
    lines: list[int] = field(default_factory=list)
    #: The request it was read from (object shapes), as the reader reads it.
    request: Request | None = None
    #: Whether the messages are OpenAI Responses items.
    responses: bool = False

    @property
    def provider(self) -> str:
        """Whose rules the conversation is checked against by default."""
        if self.responses:
            return "openai-responses"
        if self.shape in ("anthropic", "gemini", "bedrock"):
            return self.shape
        natives = {native_provider(m) for m in self.messages}
        if natives == {"gemini"}:
            return "gemini"
        if "bedrock" in natives:
            return "bedrock"
        return "openai"

    def label_of(self, index: int) -> str:
        """How index ``index`` of :attr:`messages` is numbered in the input file."""
        if self.system is None:
            return str(index)
        return "-" if index == 0 else str(index - 1)

    def where(self, index: int) -> str:
        """``message 3`` or ``message 3 (line 4)``, numbered as in the input."""
        text = f"message {self.label_of(index)}"
        if self.lines:
            text += f" (line {self.lines[index]})"
        return text


# -- reading -------------------------------------------------------------------


def _read_text(path: str) -> tuple[str, str]:
    """Return ``(source name, text)`` of ``path`` (``-``: standard input)."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
            source = "<stdin>"
        else:
            with open(path, "rb") as f:
                data = f.read()
            source = path
    except OSError as exc:
        raise _InputError(f"cannot read {path!r}: {exc.strerror or exc}") from exc
    try:
        return source, data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1]
        raise _InputError(
            f"{source}: the byte at offset {exc.start} is not UTF-8 ({bad!r}); "
            "expected a UTF-8 text file"
        ) from exc


def _json_error(source: str, exc: json.JSONDecodeError, line: int | None = None) -> _InputError:
    at = f"line {line if line is not None else exc.lineno}, column {exc.colno}"
    return _InputError(f"{source}: invalid JSON at {at}: {exc.msg}")


def _too_deep(where: str) -> str:
    return (
        f"{where}: JSON nested too deeply to read (past Python's recursion limit); keep "
        f"content and tool-call arguments within {MAX_DEPTH} levels"
    )


def _parse_jsonl(
    source: str, text: str, whole: json.JSONDecodeError
) -> tuple[list[Any], list[int]]:
    """Parse one JSON value per non-blank line; errors point at the offending line."""
    values: list[Any] = []
    lines: list[int] = []
    # Split on "\n" only: str.splitlines() would also split inside strings at U+2028 and kin.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except RecursionError:
            raise _InputError(_too_deep(f"{source} line {number}")) from None
        except json.JSONDecodeError as exc:
            if not values:
                # Not JSONL either: the error of the whole document is the useful one.
                raise _json_error(source, whole) from whole
            raise _json_error(source, exc, number) from exc
        lines.append(number)
    return values, lines


def _has_items(messages: list[Any]) -> bool:
    """Whether any message is an OpenAI Responses item (``function_call``, ``reasoning``...)."""
    return any(item_type(m) is not None for m in messages)


def _style(messages: list[Any]) -> str:
    """Name LangChain serialisations and Responses items; empty for plain dicts."""
    if _has_items(messages):
        return " (OpenAI Responses items)"
    style = serialisation(messages)
    return f" (LangChain {style})" if style else ""


def _indent_of(text: str) -> str | None:
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else None


#: The transcript shape and label of each kind of request the reader finds.
_REQUESTS = {
    "bedrock": ("bedrock", "Bedrock Converse request"),
    "anthropic": ("anthropic", "Anthropic Messages request"),
    "openai": ("openai", "OpenAI chat-completions request"),
    "": ("object", 'JSON object with a "messages" list'),
    "gemini": ("gemini", "Gemini generateContent request"),
    "openai-responses": ("responses", "OpenAI Responses request"),
}


def _from_request(
    source: str, document: dict[str, Any], indent: str | None
) -> Transcript | None:
    """The transcript of a request the reader reads (``None``: the object is not one)."""
    try:
        request = read_request(document)
    except MessageFormatError as exc:
        raise _InputError(f"{source}: {exc}; {_EXPECTED}") from exc
    if request is None:
        return None
    shape, label = _REQUESTS[request.kind]
    responses = request.kind == "openai-responses"
    if request.kind in ("openai", ""):
        label += _style(request.messages)
    if request.system is not None:
        where = "instructions" if responses else f"top-level {request.system_key}"
        label += f" ({where} planned as the first message)"
    return Transcript(
        source, shape, label, request.planned, document, request.system, indent,
        request=request, responses=responses,
    )


def load(path: str) -> Transcript:
    """Read ``path`` (``-``: standard input), detect its shape, and check every message."""
    source, text = _read_text(path)
    if not text.strip():
        raise _InputError(f"{source} is empty; {_EXPECTED}")
    try:
        document = json.loads(text)
    except RecursionError:
        raise _InputError(_too_deep(source)) from None
    except json.JSONDecodeError as exc:
        values, lines = _parse_jsonl(source, text, exc)
        transcript = Transcript(
            source, "jsonl", "JSONL" + _style(values), values, lines=lines,
            responses=_has_items(values),
        )
    else:
        indent = _indent_of(text)
        if isinstance(document, list):
            label = "JSON list of messages" + _style(document)
            transcript = Transcript(
                source, "list", label, document, indent=indent, responses=_has_items(document)
            )
        elif isinstance(document, dict) and (
            request := _from_request(source, document, indent)
        ) is not None:
            transcript = request
        elif looks_like_message(document):
            transcript = Transcript(source, "jsonl", "JSONL" + _style([document]), [document],
                                    lines=[1])
        else:
            got = (
                f"an object with keys {sorted(document)!r:.80}"
                if isinstance(document, dict)
                else f"a JSON {type(document).__name__}"  # never its text: it may be content
            )
            raise _InputError(f"{source}: got {got}; {_EXPECTED}")
    _check_roles(transcript)
    return transcript


def _check_roles(transcript: Transcript) -> None:
    for i, message in enumerate(transcript.messages):
        label = transcript.label_of(i)
        try:
            # Numbered as in the file, so the error's index and field point into it.
            view = read_message(message, int(label) if label.isdigit() else i)
        except MessageFormatError as exc:
            if isinstance(message, dict):  # a message with a bad field: the error names it
                line = f" (line {transcript.lines[i]})" if transcript.lines else ""
                raise _InputError(f"{transcript.source}{line}: {exc}") from exc
            raise _InputError(
                f"{transcript.source}: {transcript.where(i)} is a {type(message).__name__} "
                f"({message!r:.60}); expected a message object with a \"role\""
            ) from exc
        if not view.role:
            raise _InputError(
                f"{transcript.source}: {transcript.where(i)} has no role ({message!r:.80}); "
                'expected a "role" field (or a LangChain "type")'
            )


# -- writing -------------------------------------------------------------------


def dump(
    transcript: Transcript, surviving: list[Any], origin: Sequence[int] | None = None
) -> str:
    """Render ``surviving`` in the shape ``transcript`` was read in.

    ``origin`` is each survivor's index in :attr:`Transcript.messages`; without it the
    survivors are taken to be whole messages of the transcript. A top-level system prompt
    goes back on top when it survived (trim's partial copy of it too), else it is dropped.
    """

    def encode(value: Any, indent: str | None = None) -> str:
        return json.dumps(value, ensure_ascii=False, indent=indent)

    if transcript.shape == "jsonl":
        return "".join(encode(m) + "\n" for m in surviving)
    if transcript.shape == "list":
        return encode(surviving, transcript.indent) + "\n"
    request = transcript.request
    assert request is not None
    system = None
    if transcript.system is not None and surviving:
        kept = origin[0] == 0 if origin is not None else surviving[0] is transcript.system
        if kept:
            system, surviving = surviving[0], surviving[1:]
    document = write_request(request, surviving, system)
    return encode(document, transcript.indent) + "\n"


def _write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: never half-written."""
    # The name itself is replaced, never what a symlink there points at: a planted link
    # must not redirect the write.
    target = os.path.abspath(path)
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=os.path.dirname(target)
        )
    except OSError as exc:
        raise _InputError(f"cannot write --out {path!r}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            status = os.lstat(target)
            if stat.S_ISLNK(status.st_mode):
                raise FileNotFoundError(target)  # a link's mode says nothing: the default
            mode = stat.S_IMODE(status.st_mode)
        except FileNotFoundError:
            mode = 0o600  # a transcript is private, as the outbox's file is
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _InputError(f"cannot write --out {path!r}: {exc.strerror or exc}") from exc
        raise


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _emit(
    transcript: Transcript, surviving: list[Any], origin: Sequence[int], out: str | None
) -> None:
    text = dump(transcript, surviving, origin)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, only ever inside a JSON string
        data = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", text).encode("utf-8")
    if out is None:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        _write_atomic(out, data)


# -- tables --------------------------------------------------------------------


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


# -- counters ------------------------------------------------------------------


def _counter(name: str) -> TokenCounter:
    try:
        return resolve_token_counter(name)
    except (ImportError, ConfigError) as exc:
        raise _UsageError(f"--counter {name!r} is not available: {exc}") from exc


# -- commands ------------------------------------------------------------------


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
) -> list[str]:
    planned = planned or _Planned(transcript.messages, list(range(len(transcript.messages))))
    labels = planned.labels(transcript)
    gone = set(plan.pruned)
    rows = []
    for i, message in enumerate(planned.messages):
        role = read_message(message, i).role
        result = "pruned" if i in gone else ("added" if labels[i] == _ADDED else "kept")
        why = "repair: no result recorded" if labels[i] == _ADDED else _why(labels, plan, i)
        rows.append([labels[i], role, str(counts[i]), result, why, _preview(message, i)])
    n = len(transcript.messages)
    added = len(planned.messages) - n
    before = sum(c for c, label in zip(counts, labels, strict=True) if label != _ADDED)
    after = sum(counts) - sum(counts[i] for i in gone)
    note = f"{len(gone)} pruned"
    if added:
        note += f", {_plural(added, 'synthetic result')} added"
    table = _table(("#", "role", "tokens", "result", "why", "content"), rows, {0, 2})
    return [
        f"input: {transcript.source}: {transcript.label}, {_plural(n, 'message')}",
        _describe_config(config, counter, start_on_default),
        "",
        *_elide(table, [r[3] for r in rows], show_all),
        "",
        *_totals(n, before, len(planned.messages) - len(gone), after, note),
        *_over(plan, config),
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
    causes = {
        CURRENT_TURN: "the current turn is never pruned while it has tool calls",
        NEVER_PRUNED: "messages that are never pruned exceed it",
        START_ON: "start_on human kept the question of the turn the cut fell in",
    }
    because = "; ".join(causes[c] for c in plan.over_because)
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
        )
    except ConfigError as exc:
        raise _UsageError(_as_flags(str(exc))) from exc
    transcript = load(args.file)
    # Anthropic rejects a conversation opening with the assistant: start on a human
    # message unless told otherwise.
    provider = args.provider or transcript.provider
    start_on_default = args.start_on is None and provider in ("anthropic", "gemini", "bedrock")
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
    plan = reducer.plan(planned.messages)  # what reduce() does, without hooks to run
    gone = set(plan.pruned)
    kept = [i for i in range(len(planned.messages)) if i not in gone]
    surviving = [planned.messages[i] for i in kept]
    origin = [planned.origin[i] for i in kept]
    if args.explain:
        counts = reducer.count_tokens(planned.messages)
        lines = _explain(
            transcript, plan, counts, config, args.counter, start_on_default, args.all, planned
        )
        print("\n".join(lines))
    return _finish(args, transcript, surviving, origin)


def _finish(
    args: argparse.Namespace, transcript: Transcript, kept: list[Any], origin: list[int]
) -> int:
    """Check the provider's rules, then write ``kept`` (unless only explaining).

    Returns the exit status: 0, or 3 when ``kept`` breaks the provider's rules.
    """
    provider = args.provider or transcript.provider
    before = _problems(transcript, transcript.messages, range(len(transcript.messages)), provider)
    after = _problems(transcript, kept, origin, provider)
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
        _emit(transcript, kept, origin, args.out)
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


def _cmd_trim(args: argparse.Namespace) -> int:
    counter = _counter(args.counter)
    if args.include_system is None:
        # trim_messages refuses include_system with "first", which keeps the start anyway.
        args.include_system = args.strategy == "last"
    transcript = load(args.file)
    if args.start_on is None and (args.provider or transcript.provider) in (
        "anthropic", "gemini", "bedrock",
    ):
        if args.strategy == "last":
            args.start_on = [HUMAN]
            args.start_on_default = True
    elif args.start_on is not None:
        args.start_on = [role for role in args.start_on if role != "none"] or None
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
    status = ["trimmed"] * len(transcript.messages)
    for i, _ in selection.kept:
        status[i] = "partial" if i in partial else "kept"
    if args.explain:
        print("\n".join(_explain_trim(transcript, kept, counter, args, status, partial)))
    origin = [i for i, result in enumerate(status) if result != "trimmed"]
    return _finish(args, transcript, kept, origin)


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


def _cmd_count(args: argparse.Namespace) -> int:
    transcript = load(args.file)
    names: list[str] = []
    columns: list[list[int]] = []
    notes: list[str] = []
    for name in _COUNTERS:
        try:
            counter = _counter(name)
        except _UsageError as exc:
            notes.append(f"{name}: not available ({exc.__cause__})")
            continue
        names.append(name)
        columns.append([int(counter(m)) for m in transcript.messages])
    rows = []
    for i, message in enumerate(transcript.messages):
        rows.append([
            transcript.label_of(i), read_message(message, i).role,
            *(str(col[i]) for col in columns), _preview(message, i),
        ])
    rows.append(["", "total", *(str(sum(col)) for col in columns), ""])
    n = len(transcript.messages)
    right = set(range(2, 2 + len(names))) | {0}
    lines = [
        f"input: {transcript.source}: {transcript.label}, {_plural(n, 'message')}",
        "",
        *_table(("#", "role", *names, "content"), rows, right),
        *(["", *notes] if notes else []),
    ]
    print("\n".join(lines))
    return 0


# -- arguments -----------------------------------------------------------------


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _human_role(text: str) -> str:
    role = _role(text)
    if role not in (HUMAN, "none"):
        raise argparse.ArgumentTypeError(
            f"reduce can only start the kept tail on a human turn (human, or an alias such as "
            f"user) or none, got {text!r}"
        )
    return role


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


def _role(text: str) -> str:
    if text == "none":
        return text
    role = normalize_role(text)
    if role not in (HUMAN, AI, SYSTEM, TOOL, FUNCTION):
        raise argparse.ArgumentTypeError(
            f"expected a role (human, ai, system, tool, function, or an alias such as user or "
            f"assistant), got {text!r}"
        )
    return role


def _parser(prog: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog or "agentstate-reducer",
        description=(
            "Bound an agent's message history without breaking tool-call pairs. Reads a JSON "
            'list of messages, {"messages": [...]}, JSONL, an OpenAI, Anthropic, Gemini or Bedrock '
            "Converse request, or LangChain-serialised messages, and writes the result in the "
            "same shape."
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    reduce = commands.add_parser(
        "reduce",
        help="prune a transcript as MessageReducer would",
        description=(
            "Prune a transcript as MessageReducer would and write the surviving messages "
            "(stdout, or --out FILE) in the shape they were read in."
        ),
    )
    reduce.add_argument("file", metavar="FILE", help="the transcript; '-' reads standard input")
    count = reduce.add_argument_group("count mode (the default)")
    count.add_argument("--max-messages", type=_non_negative, metavar="N",
                       help=f"prune when there are more than N messages (default: "
                            f"{_MAX_MESSAGES})")
    count.add_argument("--min-messages", type=_non_negative, metavar="N",
                       help="messages to keep after a prune (default: half of --max-messages, "
                            f"rounded down: {_MAX_MESSAGES // 2} for the default "
                            f"{_MAX_MESSAGES}, as in ReducerConfig)")
    tokens = reduce.add_argument_group("token mode (when --max-tokens is given)")
    tokens.add_argument("--max-tokens", type=_non_negative, metavar="N",
                        help="prune when the total exceeds N tokens")
    tokens.add_argument("--target-tokens", type=_non_negative, metavar="N",
                        help="prune down to N tokens (default: --max-tokens)")
    _add_counter(tokens)
    rules = reduce.add_argument_group("rules")
    rules.add_argument("--no-preserve-first", dest="preserve_first", action="store_false",
                       help="allow the first message (usually the system prompt) to be pruned")
    rules.add_argument("--no-cascade", dest="cascade", action="store_false",
                       help="do not prune the tool results of a pruned tool call")
    rules.add_argument("--repair-dangling-calls", action="store_true",
                       help="give each dead tool call (no result, and the conversation moved "
                            "on) a synthetic result; pending calls are never touched")
    rules.add_argument("--start-on", type=_human_role, metavar="ROLE",
                       help="human (or an alias such as user): the kept tail starts on a human "
                            "message (the default for an Anthropic, Gemini or Bedrock request); "
                            "none: wherever the window ends")
    _add_output(reduce, "a table of every message, kept or pruned and why, instead of the "
                        "messages (with --out, the file is written too)")
    reduce.set_defaults(run=_cmd_reduce)

    trim = commands.add_parser(
        "trim",
        help="cut a transcript to a token budget as trim_messages would",
        description=(
            "Cut a transcript to a token budget as trim_messages would (LangChain's "
            "trim_messages, without splitting tool calls from their results) and write the "
            "kept messages in the shape they were read in."
        ),
    )
    trim.add_argument("file", metavar="FILE", help="the transcript; '-' reads standard input")
    budget = trim.add_argument_group("budget")
    budget.add_argument("--max-tokens", type=_non_negative, required=True, metavar="N",
                        help="the token budget")
    _add_counter(budget)
    how = trim.add_argument_group("what to keep")
    how.add_argument("--strategy", choices=("last", "first"), default="last",
                     help="keep the end (default) or the start of the conversation")
    system = how.add_mutually_exclusive_group()
    system.add_argument("--include-system", dest="include_system", action="store_true",
                        default=None,
                        help="always keep a leading system message (the default with "
                             "--strategy last: a request keeps its system prompt)")
    system.add_argument("--no-include-system", dest="include_system", action="store_false",
                        help="let the budget cut a leading system message like any other")
    how.add_argument("--start-on", action="append", type=_role, metavar="ROLE",
                     help="with --strategy last, drop leading messages until one of this role "
                          "(human, ai, tool, system; may be repeated; default: human for an "
                          "Anthropic, Gemini or Bedrock request, none: no such rule)")
    how.add_argument("--end-on", action="append", type=_role, metavar="ROLE",
                     help="drop trailing messages until one of this role (may be repeated)")
    how.add_argument("--allow-partial", action="store_true",
                     help="keep part of the message at the edge (whole content blocks, else "
                          "pieces of its text)")
    how.add_argument("--split-on", choices=sorted(_SPLITTERS), default="line",
                     help="with --allow-partial, the pieces text is cut into (default: line)")
    how.add_argument("--no-keep-tool-pairs", dest="keep_tool_pairs", action="store_false",
                     help="allow the cut to separate tool calls from their results, as "
                          "LangChain's trim_messages does")
    _add_output(trim, "a table of every message, kept, partial or trimmed, instead of the "
                      "messages (with --out, the file is written too)")
    trim.set_defaults(run=_cmd_trim)

    count_cmd = commands.add_parser(
        "count",
        help="print per-message and total tokens with each counter",
        description="Print per-message and total tokens with each available counter.",
    )
    count_cmd.add_argument("file", metavar="FILE", help="the transcript; '-' reads standard input")
    count_cmd.set_defaults(run=_cmd_count)
    return parser


def _counter_name(value: str) -> str:
    """An argparse type: a name ``token_counter`` accepts (checked, not loaded)."""
    try:
        check_token_counter(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _add_counter(group: Any) -> None:
    group.add_argument("--counter", type=_counter_name, default="approximate", metavar="NAME",
                       help="token counter: approximate (the default, a character heuristic), "
                            "an encoding (o200k_base, cl100k_base; tiktoken is o200k_base; "
                            "exact, need the [tokens] extra) or a model name (gpt-4o, "
                            "gpt-4.1, gpt-5, o3, gpt-4, claude-sonnet-4-5, gemini-2.5-pro, ...)")


def _add_output(parser: argparse.ArgumentParser, explain_help: str) -> None:
    output = parser.add_argument_group("output")
    output.add_argument("--out", metavar="FILE",
                        help="write here (atomically: a temporary file, then a rename) "
                             "instead of standard output")
    output.add_argument("--explain", action="store_true", help=explain_help)
    output.add_argument("--all", action="store_true",
                        help=f"with --explain, a row for every message (default: above "
                             f"{_EXPLAIN_ROWS} messages, the first {_HEAD}, the last {_TAIL} "
                             "and a count of the others)")
    output.add_argument("--provider",
                        choices=("openai", "anthropic", "gemini", "bedrock", "openai-responses"),
                        help="whose API rules to check the input and output against "
                             "(default: the request's own provider, else openai)")


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Run the command line; return the exit status."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="backslashreplace")
    parser = _parser(prog)
    args = parser.parse_args(argv)
    name = args.prog = parser.prog
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except _UsageError as exc:
        parser.exit(2, f"{name}: error: {exc}\n")
    except _InputError as exc:
        parser.exit(1, f"{name}: error: {exc}\n")
    except MessageFormatError as exc:  # met past the first read (a value too deep to count)
        parser.exit(1, f"{name}: error: {exc}\n")
    except (ReducerError, ValueError, RecursionError) as exc:
        # One line, never a traceback, never the transcript's text.
        why = (
            f"a number has more than {sys.get_int_max_str_digits()} digits"
            if isinstance(exc, ValueError) and "integer string conversion" in str(exc)
            else f"cannot process the transcript ({type(exc).__name__})"
        )
        parser.exit(1, f"{name}: error: {why}\n")
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as other filters do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
