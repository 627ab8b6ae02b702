"""Hypothesis strategies for provider-valid chat histories, in every shape the package reads.

A history is drawn as a shape-free script of events, then rendered:

* ``"openai"``: OpenAI chat dicts (``tool_calls`` on the assistant, ``role: "tool"`` results);
* ``"langchain"``: LangChain ``SystemMessage``/``HumanMessage``/``AIMessage``/``ToolMessage``;
* ``"anthropic"``: Anthropic dicts with content blocks (``tool_use`` in the assistant's
  content, ``tool_result`` blocks in user messages, several per message or split over
  consecutive user messages, optionally followed by text);
* ``"langchain_blocks"``: LangChain messages carrying the Anthropic blocks;
* ``"pydantic_ai"`` (not in :data:`SHAPES`): PydanticAI ``ModelRequest``/``ModelResponse``,
  adjacent parts of one side in one message as the SDK merges them (system prompt and
  question, tool returns and trailing text), thinking first in a response that calls.

Every drawn history passes ``validate_history`` for both providers (for OpenAI only, with
``openai_only=True``): it starts (after an optional system prompt) with a user message,
answers every parallel call all together right after the call, may end with an
assistant message whose calls are still pending, and never has empty text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

__all__ = (
    "SHAPES",
    "Calls",
    "Results",
    "Say",
    "Script",
    "histories",
    "render",
    "scripts",
)

SHAPES = ("openai", "langchain", "anthropic", "langchain_blocks")

_words = st.text(alphabet="abcdefgh ", min_size=1, max_size=12).filter(lambda s: s.strip() != "")


@dataclass(frozen=True)
class Say:
    """A system, human or ai message of plain text."""

    role: str
    text: str


@dataclass(frozen=True)
class Calls:
    """An assistant message issuing parallel tool calls (``text`` may be empty)."""

    text: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class Results:
    """The results of one ``Calls``, in ``order``, split into consecutive messages.

    ``chunks`` gives how many results each message carries (block shapes only; one
    message per result otherwise); ``trailing`` is user text after the last result
    (block shapes: in the same message; other shapes: a separate user message).
    """

    answers: tuple[tuple[str, str], ...]
    chunks: tuple[int, ...]
    trailing: str | None


Event = Say | Calls | Results


@dataclass
class Script:
    """The shape-free events of one history."""

    events: list[Event] = field(default_factory=list)


@st.composite
def _split(draw: st.DrawFn, total: int) -> tuple[int, ...]:
    sizes: list[int] = []
    left = total
    while left:
        size = draw(st.integers(1, left))
        sizes.append(size)
        left -= size
    return tuple(sizes)


@st.composite
def scripts(
    draw: st.DrawFn,
    *,
    max_exchanges: int = 6,
    pending: bool = True,
    mid_system: bool = True,
    openai_only: bool = False,
) -> Script:
    """Draw a valid conversation: exchanges of user turns, tool rounds and replies.

    With ``openai_only`` an exchange may have no user message, so the history may
    start with the assistant (valid for OpenAI, not for Anthropic).
    """
    events: list[Event] = []
    counter = 0
    if draw(st.booleans()):
        events.append(Say("system", draw(_words)))
    exchanges = draw(st.integers(1, max_exchanges))
    for k in range(exchanges):
        for _ in range(draw(st.integers(0 if openai_only else 1, 2))):
            events.append(Say("human", draw(_words)))
        rounds = draw(st.integers(0, 3))
        for r in range(rounds):
            if draw(st.integers(0, 4)) == 0:
                events.append(Say("ai", draw(_words)))  # says something, then calls
            ids = []
            for _ in range(draw(st.integers(1, 3))):
                counter += 1
                ids.append(f"call_{counter}")
            events.append(Calls(draw(st.one_of(st.just(""), _words)), tuple(ids)))
            if pending and k == exchanges - 1 and r == rounds - 1 and draw(st.booleans()):
                return Script(events)  # the tools have not run yet
            order = draw(st.permutations(ids))
            answers = tuple((i, draw(_words)) for i in order)
            trailing = draw(st.one_of(st.none(), _words)) if draw(st.booleans()) else None
            events.append(Results(answers, draw(_split(len(ids))), trailing))
        if draw(st.booleans()) or rounds == 0:
            events.append(Say("ai", draw(_words)))
        if mid_system and draw(st.integers(0, 5)) == 0:
            events.append(Say("system", draw(_words)))
    return Script(events)


def _openai(script: Script) -> list[Any]:
    out: list[Any] = []
    for event in script.events:
        if isinstance(event, Say):
            role = {"human": "user", "ai": "assistant"}.get(event.role, event.role)
            out.append({"role": role, "content": event.text})
        elif isinstance(event, Calls):
            calls = [
                {"id": i, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
                for i in event.ids
            ]
            out.append({"role": "assistant", "content": event.text or None, "tool_calls": calls})
        else:
            for call, text in event.answers:
                out.append({"role": "tool", "tool_call_id": call, "content": text})
            if event.trailing is not None:
                out.append({"role": "user", "content": event.trailing})
    return out


def _langchain(script: Script, blocks: bool) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for n, event in enumerate(script.events):
        ident = f"m{n}"
        if isinstance(event, Say):
            cls = {"system": SystemMessage, "human": HumanMessage, "ai": AIMessage}[event.role]
            out.append(cls(content=event.text, id=ident))
        elif isinstance(event, Calls):
            tool_calls = [{"id": i, "name": "lookup", "args": {}} for i in event.ids]
            if blocks:
                content: list[Any] = [{"type": "text", "text": event.text}] if event.text else []
                content += _uses(event.ids)
                out.append(AIMessage(content=content, tool_calls=tool_calls, id=ident))
            else:
                out.append(AIMessage(content=event.text, tool_calls=tool_calls, id=ident))
        elif blocks:
            for j, chunk in enumerate(_result_blocks(event)):
                out.append(HumanMessage(content=chunk, id=f"{ident}-{j}"))
        else:
            for j, (call, text) in enumerate(event.answers):
                out.append(ToolMessage(content=text, tool_call_id=call, id=f"{ident}-{j}"))
            if event.trailing is not None:
                out.append(HumanMessage(content=event.trailing, id=f"{ident}-t"))
    return out


def _uses(ids: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": i, "name": "lookup", "input": {}} for i in ids]


def _result_blocks(event: Results) -> list[list[dict[str, Any]]]:
    chunks: list[list[dict[str, Any]]] = []
    at = 0
    for size in event.chunks:
        chunks.append(
            [
                {"type": "tool_result", "tool_use_id": call, "content": text}
                for call, text in event.answers[at : at + size]
            ]
        )
        at += size
    if event.trailing is not None:
        chunks[-1].append({"type": "text", "text": event.trailing})
    return chunks


def _anthropic(script: Script) -> list[Any]:
    out: list[Any] = []
    for event in script.events:
        if isinstance(event, Say):
            role = {"human": "user", "ai": "assistant"}.get(event.role, event.role)
            out.append({"role": role, "content": [{"type": "text", "text": event.text}]})
        elif isinstance(event, Calls):
            content: list[Any] = [{"type": "text", "text": event.text}] if event.text else []
            content += _uses(event.ids)
            out.append({"role": "assistant", "content": content})
        else:
            out.extend({"role": "user", "content": chunk} for chunk in _result_blocks(event))
    return out


def _pydantic_ai(script: Script) -> list[Any]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[Any] = []
    side: list[Any] = []
    request = True

    def flush() -> None:
        if side:
            out.append(ModelRequest(parts=list(side)) if request else ModelResponse(list(side)))
            side.clear()

    for event in script.events:
        wants = not (isinstance(event, Calls) or (isinstance(event, Say) and event.role == "ai"))
        if wants != request:
            flush()
            request = wants
        if isinstance(event, Say):
            part = {"system": SystemPromptPart, "human": UserPromptPart, "ai": TextPart}
            side.append(part[event.role](event.text))
        elif isinstance(event, Calls):
            # Thinking opens the response, as providers return it (Anthropic requires it).
            side.insert(0, ThinkingPart(f"calling {len(event.ids)}"))
            if event.text:
                side.append(TextPart(event.text))
            side.extend(ToolCallPart("lookup", {}, tool_call_id=i) for i in event.ids)
        else:
            side.extend(ToolReturnPart("lookup", text, tool_call_id=i) for i, text in event.answers)
            if event.trailing is not None:
                side.append(UserPromptPart(event.trailing))
    flush()
    return out


def render(script: Script, shape: str) -> list[Any]:
    """Render a script as messages of ``shape`` (one of :data:`SHAPES`)."""
    if shape == "openai":
        return _openai(script)
    if shape == "langchain":
        return _langchain(script, blocks=False)
    if shape == "langchain_blocks":
        return _langchain(script, blocks=True)
    if shape == "anthropic":
        return _anthropic(script)
    if shape == "pydantic_ai":
        return _pydantic_ai(script)
    raise ValueError(f"shape must be one of {SHAPES!r}, got {shape!r}")


def histories(shape: str | None = None, **kwargs: Any) -> st.SearchStrategy[list[Any]]:
    """Valid histories of ``shape`` (drawn from :data:`SHAPES` when ``None``)."""
    shapes = st.just(shape) if shape is not None else st.sampled_from(SHAPES)
    return st.tuples(scripts(**kwargs), shapes).map(lambda pair: render(*pair))
