"""The providers' documented checks of signed reasoning, simulated apart from validate.py.

A scripted model signs what it produces the way the provider binds it (the model, the
text, on newer Claude models the prefix it was produced after); :func:`anthropic_refusal`
and :func:`openai_refusal` check a request as the documentation says the API does, and
return the error text the API would answer with (``None``: accepted).

Anthropic (Building with extended thinking; Preserved thinking):

* a ``thinking`` block's signature covers its text: an edited or cut text fails;
* a block of another model fails ("Invalid `signature` in `thinking` block"), except on
  models with preserved thinking, which drop a block they cannot read without an error
  (Claude Fable 5.1 reads blocks of Claude Opus 5 and Opus 5.5);
* on models with preserved thinking, the prefix (every message before the block) must be
  what it was when the block was produced ("The block is bound to a different
  conversation");
* thinking blocks open their message, and while a tool round is in progress with thinking
  on, its assistant message opens with its thinking block.

OpenAI (Reasoning models, encrypted reasoning items): encrypted reasoning content is
verified for the model that produced it ("The encrypted content ... could not be
verified", code ``invalid_encrypted_content``).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

#: Claude models with preserved thinking, and what each reads besides its own blocks.
PRESERVED = {
    "claude-fable-5-1": {"claude-opus-5", "claude-opus-5-5"},
    "claude-opus-5-5": set(),
    "claude-sonnet-5-5": set(),
    "claude-haiku-5-5": set(),
}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _content(message: BaseMessage) -> list[Any]:
    content = message.content
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def digest(messages: list[BaseMessage]) -> str:
    """What the prefix check compares: each message's type, content and tool call id."""
    body = [
        [m.type, json.dumps(m.content, sort_keys=True), getattr(m, "tool_call_id", None)]
        for m in messages
    ]
    return _sha(json.dumps(body))


def sign(model: str, text: str, prefix: list[BaseMessage]) -> str:
    """The signature a Claude model puts on a thinking block it produced after ``prefix``."""
    body = {"m": model, "t": _sha(text), "p": digest(prefix)}
    return base64.b64encode(json.dumps(body).encode()).decode()


def encrypt(model: str, text: str) -> str:
    """The encrypted content an OpenAI reasoning model returns with a reasoning item."""
    return base64.b64encode(json.dumps({"m": model, "t": _sha(text)}).encode()).decode()


def _thinking(message: BaseMessage) -> list[dict[str, Any]]:
    return [
        b
        for b in _content(message)
        if isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")
    ]


def anthropic_refusal(model: str, request: list[BaseMessage]) -> str | None:
    """The error Anthropic answers ``request`` to ``model`` with, or ``None``."""
    preserved = model in PRESERVED
    bad_prefix = False
    for i, message in enumerate(request):
        blocks = _thinking(message)
        if not blocks:
            continue
        if _content(message)[0] is not blocks[0]:
            return f"messages.{i}.content.0: thinking blocks must come first"
        for block in blocks:
            proof = json.loads(base64.b64decode(block["signature"]))
            if proof["t"] != _sha(block["thinking"]):
                return f"messages.{i}.content: Invalid `signature` in `thinking` block"
            readable = proof["m"] == model or proof["m"] in PRESERVED.get(model, set())
            if not readable:
                if preserved:
                    continue  # dropped by the API without an error
                return f"messages.{i}.content: Invalid `signature` in `thinking` block"
            if preserved and (bad_prefix or proof["p"] != digest(request[:i])):
                bad_prefix = True  # that block and every later one
                return (
                    f"messages.{i}.content: Invalid `signature` in `thinking` block. The "
                    "block is bound to a different conversation."
                )
    if any(_thinking(m) for m in request):
        callers = [i for i, m in enumerate(request) if isinstance(m, AIMessage) and m.tool_calls]
        if callers and all(m.type == "tool" for m in request[callers[-1] + 1 :]):
            first = _content(request[callers[-1]])[0]
            if not (isinstance(first, dict) and first.get("type") == "thinking"):
                return (
                    "When `thinking` is enabled, a final `assistant` message must start "
                    "with a thinking block"
                )
    return None


def openai_refusal(model: str, request: list[BaseMessage]) -> str | None:
    """The error the Responses API answers ``request`` to ``model`` with, or ``None``."""
    for message in request:
        for block in _content(message):
            if isinstance(block, dict) and block.get("type") == "reasoning":
                proof = json.loads(base64.b64decode(block["encrypted_content"]))
                if proof["m"] != model:
                    return (
                        f"The encrypted content for item {block['id']} could not be "
                        "verified. (invalid_encrypted_content)"
                    )
    return None


def signed_blocks(messages: list[BaseMessage]) -> dict[str, str]:
    """Every signed block, by its signature or encrypted content, as JSON text."""
    out: dict[str, str] = {}
    for message in messages:
        for block in _content(message):
            if isinstance(block, dict):
                proof = block.get("signature") or block.get("encrypted_content")
                if proof:
                    out[proof] = json.dumps(block, sort_keys=True)
    return out
