"""The request parameters that ask a provider to compact on its side (the shapes of its
create call); the compaction it answers with is read by the chat and Responses readers."""

from __future__ import annotations

from typing import Any

__all__ = ("ANTHROPIC_BETA", "ANTHROPIC_EDIT", "anthropic_compaction", "responses_compaction")

#: The beta Anthropic's threshold compaction needs (the ``anthropic-beta`` header).
ANTHROPIC_BETA = "compact-2026-01-12"
#: The ``context_management.edits`` entry type of Anthropic's threshold compaction.
ANTHROPIC_EDIT = "compact_20260112"


def responses_compaction(threshold: int) -> dict[str, Any]:
    """``client.responses.create`` parameters: compact once the input crosses ``threshold``."""
    return {"context_management": [{"type": "compaction", "compact_threshold": threshold}]}


def anthropic_compaction(threshold: int, instructions: str | None = None) -> dict[str, Any]:
    """``client.beta.messages.create`` parameters: compact once the input crosses
    ``threshold`` tokens; ``instructions`` replaces Anthropic's summarisation prompt."""
    edit: dict[str, Any] = {
        "type": ANTHROPIC_EDIT,
        "trigger": {"type": "input_tokens", "value": threshold},
    }
    if instructions is not None:
        edit["instructions"] = instructions
    return {"betas": [ANTHROPIC_BETA], "context_management": {"edits": [edit]}}
