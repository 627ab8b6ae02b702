"""Input and output: a transcript read from a file, and written back in its shape."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import MessageFormatError
from ..read import (
    MAX_DEPTH,
    Request,
    item_type,
    looks_like_message,
    native_provider,
    read_message,
    read_request,
    serialisation,
    write_request,
)
from .progress import Status

_EXPECTED = (
    'expected a JSON list of messages, an object with a "messages" list (or an OpenAI '
    'Responses request, with an "input" list), or JSONL (one message per line)'
)


class _InputError(Exception):
    """The input cannot be read or the output not written (exit status 1)."""


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


def _read_text(path: str, status: Status | None = None) -> tuple[str, str]:
    """Return ``(source name, text)`` of ``path`` (``-``: standard input)."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
            source = "<stdin>"
        else:
            with open(path, "rb") as f:
                if status is not None and status.consider(size=os.fstat(f.fileno()).st_size):
                    status.say(f"reading {path} ({os.fstat(f.fileno()).st_size / 1e6:.1f} MB)")
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


def load(path: str, status: Status | None = None) -> Transcript:
    """Read ``path`` (``-``: standard input), detect its shape, and check every message.

    ``status`` shows the reading of a large input on a terminal.
    """
    source, text = _read_text(path, status)
    if status is not None and status.consider(size=len(text)):
        status.say(f"parsing {source}")
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
    if status is not None and status.consider(messages=len(transcript.messages)):
        status.say(f"checking {len(transcript.messages):,} messages")
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
