"""Summaries: the built-in summariser, the default summary block and its ids, fitting it
to the conversation's shape.

A summary block is marked as the package's own through message metadata
(:func:`~agentstate_reducer.messages.injected_kind`), never recognised by its wording,
so the next fold hands the previous summary back to the summariser together with only
the newly pruned messages.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import re
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ._drivers import _adrive, _Call, _drive
from .errors import ConfigError, ConfigTypeError, MessageFormatError
from .read import (
    AI,
    HUMAN,
    INJECTED_KEY,
    SUMMARY_ACK_KIND,
    SUMMARY_KIND,
    SYSTEM,
    TOOL,
    injected_kind,
    is_summary,
    match_shape,
    message_id,
    message_parts,
    read_message,
    reply_text,
    summary_covers,
    write_message,
)
from .tokens import approximate_text_tokens

__all__ = (
    "DEFAULT_SUMMARY_TOKENS",
    "SUMMARY_ACK",
    "SUMMARY_PROMPT",
    "SummaryCheck",
    "Summarizer",
    "check_summary",
    "default_summary_messages_factory",
    "match_shape",
    "render_messages",
    "summarize_with",
    "summary_key",
)

logger = logging.getLogger("agentstate_reducer")

#: Text of the ai message that follows the injected summary.
SUMMARY_ACK = "OK"
#: Default cap on a summary's length, in tokens.
DEFAULT_SUMMARY_TOKENS = 400

#: The built-in summariser's instructions; ``{max_tokens}`` is filled in.
SUMMARY_PROMPT = """\
You keep the running summary of a conversation between a user and an AI agent. Older \
messages are removed from the agent's context: your summary is all the agent will \
still know about them, so whatever you leave out is lost.

Write the new summary from the previous summary (if there is one) and the new \
messages. Keep everything in the previous summary that is still true, and add what the \
new messages contribute. Use these sections, in this order:

## Goals and constraints
What the user wants, and every requirement, preference, limit or deadline they set.
## Facts
Every concrete fact learned: numbers, amounts, dates, ids, names, references, codes, \
paths. Copy each one verbatim, exactly as written; never round, convert or paraphrase it.
## Decisions
What was decided or done, and the tool results it rests on.
## Open tasks
What is still to do, or asked and not yet answered.

Write only the summary, with no preamble. Do not invent anything. At most {max_tokens} \
tokens."""

_SHORTEN = (
    "The summary below is {tokens} tokens long; the limit is {max_tokens}. Rewrite it "
    "within the limit: keep the sections, every goal, constraint and open task, and every "
    "number, id and name verbatim; drop wording, not facts.\n\n{summary}"
)

_LABELS = {HUMAN: "user", AI: "assistant", TOOL: "tool result"}

_AMEND = (
    "Your summary below leaves out facts of the messages, or names what they never "
    "mention. Rewrite it: keep the sections and every fact it holds, add each missing "
    "one verbatim, and drop each name the messages do not hold.\n"
    "Missing: {missing}\nNot in the messages: {invented}\n\n"
    "<summary>\n{summary}\n</summary>\n\n{prompt}"
)

# -- verification --------------------------------------------------------------------

#: A word holding both letters and digits (an order id, a code, a version, a path part).
_MIXED = re.compile(r"(?<![\w])(?=[\w./:#-]*\d)(?=[\w./:#-]*[A-Za-z])\w[\w./:#-]*\w")
#: A number of two digits or more, or with parts (a decimal, a date, a time, a version).
_NUMBER = re.compile(r"(?<![\w.,/:#-])(?:\d+(?:[.,/:-]\d+)+|\d{2,})(?![\w-])")
#: A name made like a function's: snake_case, or followed by an opening parenthesis.
_NAME = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b|\b[A-Za-z_]\w*(?=\()")
#: At most this many of each are reported.
_REPORTED = 50


@dataclass(frozen=True)
class SummaryCheck:
    """What a summary leaves out of the messages it stands for, and what it invents."""

    #: Identifiers, numbers and tool names of the messages that the summary lacks.
    missing: tuple[str, ...] = ()
    #: Identifiers and function-like names of the summary that no message holds.
    invented: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.missing or self.invented)


def _anchors(text: str) -> list[str]:
    return [*_MIXED.findall(text), *_NUMBER.findall(text), *_NAME.findall(text)]


def check_summary(pruned: Sequence[Any], summary: str) -> SummaryCheck:
    """Which facts of ``pruned`` (its conversation messages and the previous summary's
    text) ``summary`` drops: identifiers, numbers of two digits or more, tool names;
    and which identifiers and names it holds that ``pruned`` does not. Pure.

    Example:
        >>> msgs = [{"role": "user", "content": "refund order A-1029 of 250 EUR"}]
        >>> check_summary(msgs, "The user wants a refund of 250 EUR via refund_tool.")
        SummaryCheck(missing=('A-1029',), invented=('refund_tool',))
    """
    wanted: dict[str, None] = {}
    source: list[str] = []
    for i, message in enumerate(pruned):
        kind = injected_kind(message)
        if kind == SUMMARY_ACK_KIND:
            continue
        try:
            parts = message_parts(message, i)
            texts, calls = list(parts.texts), parts.tool_calls
        except MessageFormatError:  # arguments too deep to write as JSON: their names only
            record = read_message(message, i)
            texts, calls = list(record.texts), ()
        if kind == SUMMARY_KIND and texts:
            # The previous block's header is ours, not a fact.
            texts[0] = texts[0].split("\n", 1)[1] if "\n" in texts[0] else ""
        for text in texts:
            source.append(text)
            wanted.update(dict.fromkeys(_anchors(text)))
        for name, args in calls:
            source.extend((name, args))
            wanted[name] = None
            wanted.update(dict.fromkeys(_MIXED.findall(args)))
    missing = tuple(a for a in wanted if a not in summary)[:_REPORTED]
    everything = "\n".join(source)
    invented = tuple(
        dict.fromkeys(
            a for a in (*_MIXED.findall(summary), *_NAME.findall(summary)) if a not in everything
        )
    )[:_REPORTED]
    return SummaryCheck(missing, invented)


# -- the summary block ---------------------------------------------------------------


def summary_key(pruned: Sequence[Any]) -> str:
    """A digest of the pruned messages' ids (role and text for a message without one).

    The same pruned messages give the same key, so the same reduce run twice (a retried
    graph step, a checkpoint written again) injects the same summary ids.
    """
    digest = hashlib.sha256()
    for message in pruned:
        ident = message_id(message)
        if ident is None:
            record = read_message(message)  # role and texts only: never the arguments' JSON
            ident = "\x00".join(("", record.role, *record.texts))
        digest.update(ident.encode("utf-8", "surrogatepass"))
        digest.update(b"\x1f")
    return digest.hexdigest()[:24]


def default_summary_messages_factory(
    summary: str, count: int, *, key: str | None = None
) -> list[Any]:
    """Build the default summary block: a user message carrying the summary, then ``"OK"``.

    Both are marked as the package's own in their metadata (:data:`~agentstate_reducer.
    messages.INJECTED_KEY`), so a later fold hands this summary back to the summariser
    with the new messages, and :func:`~agentstate_reducer.messages.is_summary` finds it.
    Ids derive from ``key`` (the reducer passes a digest of the pruned ids), else from
    the text. Returns OpenAI-style dicts; ``MessageReducer`` converts them to LangChain
    messages when the conversation is made of those.
    """
    if key is None:
        key = hashlib.sha256(f"{count}\x1f{summary}".encode("utf-8", "surrogatepass")).hexdigest()
        key = key[:24]
    noun = "message" if count == 1 else "messages"
    summary_mark = {INJECTED_KEY: {"kind": SUMMARY_KIND, "covers": count}}
    ack_mark = {INJECTED_KEY: {"kind": SUMMARY_ACK_KIND}}
    return [
        write_message(
            HUMAN, f"Summary of the {count} earlier {noun}:\n{summary}",
            id=f"summary-{key}", **summary_mark,
        ),
        write_message(AI, SUMMARY_ACK, id=f"summary-ack-{key}", **ack_mark),
    ]


# -- the built-in summariser ---------------------------------------------------------


def render_messages(messages: Sequence[Any]) -> str:
    """Messages as plain text for a summary prompt: one ``[role] text`` entry each,
    tool calls as ``name(arguments)``; never ``str()`` of a structure."""
    lines: list[str] = []
    for i, message in enumerate(messages):
        parts = message_parts(message, i)
        label = _LABELS.get(parts.role, parts.role or "message")
        text = "\n".join(t for t in parts.texts if t.strip())
        if text:
            lines.append(f"[{label}] {text}")
        for name, args in parts.tool_calls:
            lines.append(f"[{label} called {name}({args})]")
        if not text and not parts.tool_calls:
            lines.append(f"[{label}] (no text)")
    return "\n".join(lines)


def _closed_awaitable(value: object) -> bool:
    """Whether ``value`` is an awaitable, which a sync caller cannot await: if so, it is
    closed (a coroutine left unawaited would warn)."""
    if not inspect.isawaitable(value):
        return False
    close = getattr(value, "close", None)
    if close is not None:
        close()
    return True


class Summarizer:
    """A ``summarize_fn`` that folds the previous summary and the newly pruned messages
    into one summary with a fixed structure. Build one with :func:`summarize_with`.

    Called with what a reduce pruned, it finds the previous summary among them by its
    metadata (:func:`~agentstate_reducer.messages.is_summary`), drops the
    acknowledgement, and asks the model for a new summary of the previous one plus the
    other messages only, so a fold costs what was pruned, not the whole history. It
    never summarises a summary on its own, never returns empty text (it raises, so the
    reducer keeps the messages), and keeps its answer within :attr:`max_tokens`.
    """

    def __init__(
        self,
        model: Any,
        *,
        max_tokens: int = DEFAULT_SUMMARY_TOKENS,
        instructions: str = SUMMARY_PROMPT,
        timeout: float | None = None,
        count_tokens: Callable[[str], int] = approximate_text_tokens,
        verify: bool = False,
    ) -> None:
        if not isinstance(verify, bool):
            raise ConfigError(f"verify must be True or False, got {verify!r}")
        if not (callable(getattr(model, "invoke", None)) or callable(model)):
            raise ConfigError(
                f"model must be a chat model with invoke() or a callable(str) -> str, "
                f"got {model!r}"
            )
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
        ):
            raise ConfigError(f"timeout must be a number of seconds > 0 or None, got {timeout!r}")
        if not isinstance(instructions, str) or not instructions.strip():
            raise ConfigError(f"instructions must be a non-empty string, got {instructions!r}")
        #: The chat model (``invoke``/``ainvoke``) or ``callable(str) -> str``.
        self.model = model
        #: The cap on a summary's length, in tokens; the reducer reserves this much.
        self.max_tokens = max_tokens
        #: Seconds one model call may take before the fold counts as failed.
        self.timeout = timeout
        #: The instructions (system prompt).
        self.instructions = instructions.replace("{max_tokens}", str(max_tokens))
        self._count_tokens = count_tokens
        #: Check each summary against the messages; retry once naming what it drops.
        self.verify = verify
        # The last fold, by prompt: LangGraph may run a channel reducer twice on the same
        # update, and the same input must neither cost a second call nor differ.
        self._last: tuple[str, str] | None = None

    def __repr__(self) -> str:
        return f"summarize_with({self.model!r}, max_tokens={self.max_tokens!r})"

    @property
    def async_only(self) -> bool:
        """True when the model can only be awaited (no ``invoke``, an async callable)."""
        if callable(getattr(self.model, "invoke", None)):
            return False
        call = getattr(type(self.model), "__call__", None)  # noqa: B004
        return inspect.iscoroutinefunction(self.model) or inspect.iscoroutinefunction(call)

    # -- the pure part ---------------------------------------------------------------

    def prompt(self, pruned: Sequence[Any]) -> str:
        """The user part of the fold's prompt: the previous summary, then the new messages.

        Raises:
            ValueError: ``pruned`` holds no message but summaries (nothing to fold).
        """
        previous = [m for m in pruned if is_summary(m)]
        new = [m for m in pruned if injected_kind(m) is None]
        if not new:
            raise ConfigError("nothing to summarise: the pruned messages are all summaries")
        sections = []
        if previous:
            text = "\n\n".join("\n".join(message_parts(m).texts) for m in previous)
            sections.append(f"<previous_summary>\n{text}\n</previous_summary>")
        else:
            sections.append("<previous_summary>\n(none yet)\n</previous_summary>")
        sections.append(f"<new_messages>\n{render_messages(new)}\n</new_messages>")
        return "\n\n".join(sections)

    def _request(self, text: str) -> Any:
        if callable(getattr(self.model, "invoke", None)):
            return [write_message(SYSTEM, self.instructions), write_message(HUMAN, text)]
        return f"{self.instructions}\n\n{text}"

    def _checked(self, reply: object) -> tuple[str, int]:
        text = (reply_text(reply) or "").strip()
        if not text:
            raise ConfigError(f"the summary model returned no text ({reply!r:.80})")
        return text, self._count_tokens(text)

    def _cut(self, text: str, tokens: int) -> str:
        logger.warning(
            "agentstate-reducer: the summary is still %d tokens after a rewrite (cap %d); "
            "cut to the cap at a line break",
            tokens,
            self.max_tokens,
        )
        kept: list[str] = []
        for line in text.splitlines():
            if self._count_tokens("\n".join([*kept, line])) > self.max_tokens:
                break
            kept.append(line)
        return "\n".join(kept) or text[: self.max_tokens]

    # -- sync ------------------------------------------------------------------------

    def _call(self, text: str) -> Any:
        invoke = getattr(self.model, "invoke", None)
        request = self._request(text)
        run: Callable[[], Any] = (
            (lambda: invoke(request)) if callable(invoke) else (lambda: self.model(request))
        )
        reply = run() if self.timeout is None else _run_with_timeout(run, self.timeout)
        if _closed_awaitable(reply):
            raise ConfigTypeError(
                f"the summary model {self.model!r} is async; call 'await reducer.areduce(...)'"
            )
        return reply

    def __call__(self, pruned: list[Any]) -> str:
        """Summarise ``pruned`` (the previous summary plus new messages) with the model.

        The same messages twice in a row give the same text, from one model call."""
        return _drive(self._fold(pruned))

    def _fold(self, pruned: list[Any]) -> Generator[_Call, Any, str]:
        """The one fold both drivers run: yields each question to the model
        (:meth:`_call`, or :meth:`_acall`), is sent its reply."""
        prompt = self.prompt(pruned)
        last = self._last
        if last is not None and last[0] == prompt:
            return last[1]
        text = yield from self._answer(prompt)
        if self.verify:
            check = check_summary(pruned, text)
            if check:
                amend = _AMEND.format(
                    missing=", ".join(check.missing) or "(none)",
                    invented=", ".join(check.invented) or "(none)",
                    summary=text,
                    prompt=prompt,
                )
                text = yield from self._answer(amend)
                check = check_summary(pruned, text)
                if check:
                    # Counts only: the facts are the conversation's.
                    raise ConfigError(
                        f"the summary still drops {len(check.missing)} fact(s) and names "
                        f"{len(check.invented)} the messages do not hold, after a retry"
                    )
        self._last = (prompt, text)
        return text

    def _answer(self, prompt: str) -> Generator[_Call, Any, str]:
        """The model's answer to ``prompt``, within :attr:`max_tokens`."""
        text, tokens = self._checked((yield self._asking(prompt)))
        if tokens > self.max_tokens:
            text, tokens = self._checked((yield self._asking(self._shorten(text, tokens))))
            if tokens > self.max_tokens:
                text = self._cut(text, tokens)
        return text

    def _asking(self, prompt: str) -> _Call:
        return _Call(self._call, self._acall, prompt)

    def _shorten(self, text: str, tokens: int) -> str:
        return _SHORTEN.format(tokens=tokens, max_tokens=self.max_tokens, summary=text)

    # -- async -----------------------------------------------------------------------

    async def _acall(self, text: str) -> Any:
        request = self._request(text)
        ainvoke = getattr(self.model, "ainvoke", None)
        invoke = getattr(self.model, "invoke", None)
        pending: Any
        if callable(ainvoke):
            pending = ainvoke(request)
        elif callable(invoke):
            pending = asyncio.to_thread(invoke, request)
        elif self.async_only:
            pending = self.model(request)
        else:  # a blocking callable: off the event loop
            pending = asyncio.to_thread(self.model, request)
        if self.timeout is None:
            return await pending
        try:
            return await asyncio.wait_for(pending, self.timeout)
        except asyncio.TimeoutError as exc:
            raise TimeoutError(
                f"the summary model took longer than timeout={self.timeout!r} s"
            ) from exc

    async def acall(self, pruned: list[Any]) -> str:
        """Async :meth:`__call__`: ``ainvoke`` when the model has it (``areduce`` uses this)."""
        return await _adrive(self._fold(pruned))


def _run_with_timeout(run: Callable[[], Any], timeout: float) -> Any:
    """``run()`` on a daemon thread; ``TimeoutError`` when it takes longer than ``timeout``.

    A model call cannot be interrupted, so a late one finishes on its own thread and
    its answer is dropped; the reduce goes on without waiting for it.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["reply"] = run()
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="agentstate-reducer-summary", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"the summary model took longer than timeout={timeout!r} s")
    if "error" in box:
        raise box["error"]
    return box["reply"]


def summarize_with(
    model: Any,
    *,
    max_tokens: int = DEFAULT_SUMMARY_TOKENS,
    instructions: str = SUMMARY_PROMPT,
    timeout: float | None = None,
    count_tokens: Callable[[str], int] = approximate_text_tokens,
    verify: bool = False,
) -> Summarizer:
    """Build the built-in summariser, for ``ReducerConfig(summarize_fn=...)``.

    Args:
        model: a LangChain chat model, or anything with ``invoke`` (and optionally
            ``ainvoke``), called with a system and a user message; or a
            ``callable(str) -> str`` (sync or async) called with the whole prompt.
            Nothing is imported from any framework.
        max_tokens: the cap on the summary's length. The prompt states it; a longer
            answer is rewritten once, then cut at a line break. In token mode the
            reducer keeps this much room for the summary block.
        instructions: the system prompt; ``{max_tokens}`` is filled in. The default,
            :data:`SUMMARY_PROMPT`, keeps goals and constraints, facts with their
            numbers, ids and names verbatim, decisions and open tasks.
        timeout: seconds a model call may take; longer counts as a failed fold (the
            reducer keeps the messages and retries on the next prune).
        count_tokens: ``callable(text) -> int`` measuring the summary against the cap.
        verify: check each summary with :func:`check_summary`; when it drops an
            identifier, a number or a tool name of the messages, or names what they do
            not hold, ask once more naming them, then fail the fold (the reducer keeps
            the messages) if the answer still does.

    Returns:
        A :class:`Summarizer`: ``reduce()`` calls it, ``areduce()`` awaits its
        :meth:`~Summarizer.acall`.

    Example:
        >>> from agentstate_reducer import MessageReducer, ReducerConfig, summarize_with
        >>> reducer = MessageReducer(config=ReducerConfig(
        ...     max_tokens=8000, target_tokens=6000, inject_summary=True,
        ...     summarize_fn=summarize_with(lambda prompt: "## Facts\\n- ...")))
    """
    return Summarizer(
        model,
        max_tokens=max_tokens,
        instructions=instructions,
        timeout=timeout,
        count_tokens=count_tokens,
        verify=verify,
    )


def covered(pruned: Sequence[Any]) -> int:
    """How many conversation messages a summary of ``pruned`` covers: the new ones plus
    those the previous summaries among them covered."""
    total = 0
    for message in pruned:
        kind = injected_kind(message)
        if kind is None:
            total += 1
        elif kind == SUMMARY_KIND:
            total += summary_covers(message)
    return total
