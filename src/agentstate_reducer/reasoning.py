"""Which reasoning a request may carry back to its model: the replay policy. Pure.

A signed reasoning block (an Anthropic ``thinking`` / ``redacted_thinking`` block, a
Converse ``reasoningContent`` block, an OpenAI ``reasoning`` item or block with its
encrypted content) is checked by the provider against the model that produced it and,
on newer Claude models, against everything sent before it. No policy edits one: each
is kept whole or dropped whole (:func:`~agentstate_reducer.read.without_reasoning`).

* ``"keep"``: every block is sent back as it is (the default of :class:`ReducerConfig`).
* ``"current-turn"``: the reasoning of earlier turns is dropped, as every provider
  allows (Anthropic omits earlier turns' thinking itself on older models, OpenAI ignores
  earlier turns' reasoning items); the current turn's is kept untouched, so its tool
  round keeps the blocks it needs (:func:`~agentstate_reducer.recovery.strip_reasoning`).
* ``"model"``: a block goes only to a model that can verify it. Its producer is the
  model the message names (:func:`~agentstate_reducer.read.reasoning_model`); the
  request's model is ``ReducerConfig.model``. A block of another model is dropped
  (:func:`can_verify`: the same model, whatever the platform prefix or snapshot date, or
  one the provider documents as readable). When the request's model checks the prefix
  (:func:`checks_prefix`), a block is kept only if what precedes it is what its producer
  was sent: every block after the first place the request differs from the reduce's
  input (a cut, an edit, a dropped block) goes, and so does a block whose producer
  could not verify a block kept before it (that model was sent the history without
  it). A block whose producer is not known is kept.
  If the in-progress tool round loses its reasoning, the request carries none
  (Anthropic: a final assistant message of a tool round opens with its thinking when
  thinking is on; with no thinking block sent, it is off for that request).

Gemini's thought signatures and DeepSeek's unsigned ``reasoning_content`` are left to
``"current-turn"`` and to recovery: neither names a model in the message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ._structure import current_turn
from .errors import ConfigError
from .read import AI, read_messages, reasoning_model, reasoning_parts, without_reasoning
from .tokens import model_name

__all__ = (
    "BOUND_REASONING",
    "CHECKED_REASONING",
    "CURRENT_TURN",
    "KEEP",
    "MODEL",
    "POLICIES",
    "READS",
    "can_verify",
    "check_policy",
    "checks_prefix",
    "model_key",
    "replay_reasoning",
    "strip_reasoning",
)

#: Send every reasoning block back as it is.
KEEP = "keep"
#: Drop the reasoning of earlier turns; keep the current turn's whole.
CURRENT_TURN = "current-turn"
#: Drop exactly the blocks the request's model cannot verify.
MODEL = "model"
POLICIES = (KEEP, CURRENT_TURN, MODEL)

#: Reasoning kinds bound to the model that produced them
#: (:attr:`~agentstate_reducer.read.ReasoningPart.kind`).
BOUND_REASONING = frozenset({"thinking", "redacted_thinking", "reasoning", "reasoningContent"})
#: The reasoning a provider checks: every kind but DeepSeek's unsigned
#: ``reasoning_content``, which DeepSeek wants back on each assistant message that calls
#: tools once any carries it.
CHECKED_REASONING = BOUND_REASONING | {"thought"}

#: Models that read blocks of other models besides their own (Anthropic, Preserved
#: thinking: "Claude Fable 5.1 reads blocks from Claude Opus 5 and, on the Claude API,
#: from Claude Opus 5.5; neither ... reads blocks from Claude Fable 5.1").
READS: dict[str, frozenset[str]] = {
    "claude-fable-5-1": frozenset({"claude-opus-5", "claude-opus-5-5"}),
}

_PROVIDER = re.compile(r"^(?:[a-z0-9_-]+/)+")  # "anthropic/", "openai/", a router's path
_BEDROCK = re.compile(r"^(?:[a-z]{2,4}\.)?anthropic\.")  # "us.anthropic.", "anthropic."
_SUFFIX = re.compile(r"(?:@[\w.-]+|-v\d+(?::\d+)?|-latest)$")  # Vertex, Bedrock, aliases
_DATE = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")  # a snapshot date
_CLAUDE = re.compile(r"^claude-(opus|sonnet|haiku|fable)-(\d+)(?:-(\d{1,2}))?$")
#: Per tier, the first version that checks the prefix (Anthropic, Preserved thinking:
#: "Starting with Claude Fable 5.1"; Opus 5.5 "thinking blocks are tied to the model and
#: the conversation", as are Sonnet 5.5 and Haiku 5.5).
_PREFIX_FROM = {"fable": (5, 1), "opus": (5, 5), "sonnet": (5, 5), "haiku": (5, 5)}


def model_key(name: str) -> str:
    """The model ``name`` stands for: lower case, without a provider path, Bedrock or
    Vertex decoration, alias suffix or snapshot date; a Claude version in dashes.

    Example:
        >>> model_key("us.anthropic.claude-opus-4-6-20260205-v1:0")
        'claude-opus-4-6'
    """
    key = _PROVIDER.sub("", name.strip().lower())
    key = _BEDROCK.sub("", key)
    while True:
        trimmed = _DATE.sub("", _SUFFIX.sub("", key))
        if trimmed == key:
            break
        key = trimmed
    if key.startswith("claude-"):
        key = key.replace(".", "-")
    return key


def can_verify(model: str, producer: str) -> bool:
    """Whether ``model`` accepts the signed reasoning ``producer`` produced: the same
    model (:func:`model_key`), or one :data:`READS` lists for it."""
    target, source = model_key(model), model_key(producer)
    return target == source or source in READS.get(target, frozenset())


def checks_prefix(model: str) -> bool:
    """Whether ``model`` checks that nothing before a thinking block changed since the
    block was produced (Claude Fable 5.1 and later, Opus, Sonnet and Haiku 5.5 and later)."""
    found = _CLAUDE.match(model_key(model))
    if found is None:
        return False
    tier, major, minor = found.group(1), int(found.group(2)), int(found.group(3) or 0)
    return (major, minor) >= _PREFIX_FROM[tier]


def strip_reasoning(messages: Sequence[Any]) -> tuple[list[Any], int]:
    """``messages`` without the checked reasoning of earlier turns: ``(messages, how many
    changed)``.

    Each reasoning part of :data:`CHECKED_REASONING` before the current turn
    (:func:`~agentstate_reducer.plan.current_turn`: the last plain human message and what
    follows) is dropped whole, and a message of reasoning alone with it; the current
    turn, its signed blocks included, is kept object for object, and so is every
    message without reasoning.

    Raises:
        MessageFormatError: a message cannot be read; the error names its index.
    """
    begin = current_turn(read_messages(list(messages))).begin
    head: list[Any] = []
    changed = 0
    for i, message in enumerate(messages[:begin]):
        copy = without_reasoning(message, i, kinds=CHECKED_REASONING)
        changed += copy is not message
        if copy is not None:
            head.append(copy)
    return head + list(messages[begin:]), changed


def check_policy(value: object) -> str:
    """``value`` if it is a policy of :data:`POLICIES`, else ConfigError naming the field."""
    if value not in POLICIES:
        raise ConfigError(f"reasoning must be 'keep', 'current-turn' or 'model', got {value!r}")
    return str(value)


def replay_reasoning(
    messages: Sequence[Any],
    *,
    policy: str = MODEL,
    model: Any = None,
    changed_from: int | None = None,
) -> tuple[list[Any], int]:
    """``messages`` as ``policy`` sends them to ``model``: ``(messages, how many changed)``.

    ``model`` is a name or a chat model (its ``model_name``); ``changed_from`` is the
    first index where ``messages`` differ from what the model was last sent (a cut, an
    edit), for models that check the prefix. Messages not changed are the same objects;
    a changed one is a copy without its bound reasoning (``None`` items are left out:
    a Responses ``reasoning`` item, a message of reasoning alone).

    Raises:
        ConfigError: ``policy`` is not one of :data:`POLICIES`.
        MessageFormatError: a message cannot be read; the error names its index.
    """
    check_policy(policy)
    if policy == KEEP:
        return list(messages), 0
    if policy == CURRENT_TURN:
        return strip_reasoning(messages)
    name = model_name(model) if model is not None else None
    if name is None:
        return list(messages), 0
    prefix = checks_prefix(name)
    first = changed_from if prefix else None
    drop: set[int] = set()
    bound: list[int] = []
    kept: list[str] = []  # the producers of the blocks kept so far
    for i, message in enumerate(messages):
        if not any(p.kind in BOUND_REASONING for p in reasoning_parts(message, i)):
            continue
        bound.append(i)
        producer = reasoning_model(message)
        if (
            (producer is not None and not can_verify(name, producer))
            or (first is not None and i >= first)
            # its producer was sent no block it could not verify: it did not see these
            or (prefix and producer is not None and any(not can_verify(producer, q) for q in kept))
        ):
            drop.add(i)
            if prefix and first is None:
                first = i + 1  # what follows a dropped block has another prefix now
        elif producer is not None:
            kept.append(producer)
    if not drop:
        return list(messages), 0
    records = read_messages(list(messages))
    callers = [i for i, r in enumerate(records) if r.role == AI and r.calls]
    if callers and callers[-1] in drop and all(r.role != AI for r in records[callers[-1] + 1 :]):
        drop.update(bound)  # the tool round in progress lost its reasoning: send none
    out: list[Any] = []
    for i, message in enumerate(messages):
        copy = without_reasoning(message, i, kinds=BOUND_REASONING) if i in drop else message
        if copy is not None:
            out.append(copy)
    return out, len(drop)
