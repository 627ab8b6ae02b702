"""Provider-side compaction, orchestrated: the request parameters that ask the provider to
compact, with its threshold below the local trigger, the reducer kept armed as the fallback.

OpenAI's Responses API compacts when a request's rendered tokens cross
``context_management=[{"type": "compaction", "compact_threshold": N}]`` and returns an
encrypted ``compaction`` output item; Anthropic's Messages API (beta
``compact-2026-01-12``) compacts when the input crosses the ``compact_20260112`` edit's
``trigger`` (at least 50,000 input tokens) and answers with a ``compaction`` block at the
head of the assistant's reply. Either one, appended to the history as the provider
returned it, is read as a boundary: what precedes the latest one is not sent again
(reason ``compacted``), the item or block is never pruned nor edited, and it is counted.

The provider's threshold sits below the reducer's ``max_tokens`` (by ``margin`` of it), so
the provider compacts first; when it does not (an older model, a route that drops the
parameter, an estimate off by more than the margin), the local reducer still bounds the
request at ``max_tokens``. Pure: no I/O, no framework import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import ConfigError
from .read.compaction import (
    ANTHROPIC_BETA,
    ANTHROPIC_EDIT,
    anthropic_compaction,
    responses_compaction,
)

if TYPE_CHECKING:
    from .config import ReducerConfig

__all__ = (
    "ANTHROPIC",
    "ANTHROPIC_BETA",
    "ANTHROPIC_EDIT",
    "ANTHROPIC_MIN_TRIGGER",
    "DEFAULT_MARGIN",
    "OPENAI_RESPONSES",
    "PROVIDERS",
    "compacted_at",
    "compaction_threshold",
    "provider_compaction",
)

#: The Responses API (``client.responses.create``); Chat Completions has no compaction.
OPENAI_RESPONSES = "openai-responses"
#: The Messages API (``client.beta.messages.create``).
ANTHROPIC = "anthropic"
#: The providers :func:`provider_compaction` builds parameters for.
PROVIDERS = (OPENAI_RESPONSES, ANTHROPIC)
#: The smallest ``trigger.value`` Anthropic accepts, in input tokens.
ANTHROPIC_MIN_TRIGGER = 50_000
#: How far below ``max_tokens`` the provider's threshold sits, as a share of it: room
#: for the local estimate to differ from the provider's count.
DEFAULT_MARGIN = 0.1


def compaction_threshold(
    config: ReducerConfig,
    provider: str = OPENAI_RESPONSES,
    *,
    threshold: int | None = None,
    margin: float = DEFAULT_MARGIN,
) -> int:
    """The provider's compaction threshold for ``config``: ``threshold`` when given, else
    ``max_tokens`` less ``margin`` of it; always below ``max_tokens``, the local trigger.

    Raises:
        ConfigError: ``config`` is not in token mode, ``provider`` is unknown, the
            threshold is not below ``max_tokens`` or under the provider's minimum.
    """
    _check_provider(provider)
    local = getattr(config, "max_tokens", None)
    if not isinstance(local, int) or isinstance(local, bool):
        raise ConfigError(
            "provider compaction needs the reducer in token mode: set max_tokens (the local "
            "trigger the provider's threshold sits below)"
        )
    if threshold is None:
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 < margin < 1:
            raise ConfigError(f"margin must be a number between 0 and 1, got {margin!r}")
        threshold = int(local * (1 - margin))
    elif isinstance(threshold, bool) or not isinstance(threshold, int) or threshold <= 0:
        raise ConfigError(f"threshold must be a positive int, got {threshold!r}")
    if threshold >= local:
        raise ConfigError(
            f"threshold ({threshold}) must be below max_tokens ({local}): the provider "
            "compacts first, the local reducer is the fallback"
        )
    if provider == ANTHROPIC and threshold < ANTHROPIC_MIN_TRIGGER:
        raise ConfigError(
            f"threshold ({threshold}) is under Anthropic's minimum trigger "
            f"({ANTHROPIC_MIN_TRIGGER} input tokens); raise max_tokens or threshold"
        )
    return threshold


def provider_compaction(
    config: ReducerConfig,
    provider: str = OPENAI_RESPONSES,
    *,
    threshold: int | None = None,
    margin: float = DEFAULT_MARGIN,
    instructions: str | None = None,
) -> dict[str, Any]:
    """The request parameters that ask ``provider`` to compact, below ``config``'s trigger.

    ``"openai-responses"``: ``{"context_management": [{"type": "compaction",
    "compact_threshold": N}]}`` for ``client.responses.create``. ``"anthropic"``:
    ``{"betas": ["compact-2026-01-12"], "context_management": {"edits": [{"type":
    "compact_20260112", "trigger": {"type": "input_tokens", "value": N}}]}}`` for
    ``client.beta.messages.create`` (``instructions``, Anthropic only, replaces its
    summarisation prompt). ``N`` is :func:`compaction_threshold`. A new dict each call.

    Example:
        >>> from agentstate_reducer import ReducerConfig
        >>> provider_compaction(ReducerConfig(max_tokens=100_000))
        {'context_management': [{'type': 'compaction', 'compact_threshold': 90000}]}

    Raises:
        ConfigError: as :func:`compaction_threshold`; ``instructions`` is not a string or
            is given for OpenAI (its compaction takes none).
    """
    value = compaction_threshold(config, provider, threshold=threshold, margin=margin)
    if instructions is not None and not isinstance(instructions, str):
        raise ConfigError(f"instructions must be a string or None, got {instructions!r}")
    if provider == OPENAI_RESPONSES:
        if instructions is not None:
            raise ConfigError(
                "instructions: OpenAI's compaction takes none (its item is opaque); "
                "only Anthropic's does"
            )
        return responses_compaction(value)
    return anthropic_compaction(value, instructions)


def compacted_at(messages: Sequence[Any]) -> int | None:
    """Index of the latest provider compaction in ``messages`` (a Responses ``compaction``
    item, an assistant message holding an Anthropic ``compaction`` block), as the reader
    sees it; ``None`` when the provider has not compacted."""
    from ._structure import _latest_boundary
    from .read import read_messages

    return _latest_boundary(read_messages(list(messages)))


def _check_provider(provider: object) -> None:
    if provider not in PROVIDERS:
        raise ConfigError(
            f"provider must be 'openai-responses' or 'anthropic' (the APIs that compact on "
            f"their side), got {provider!r}"
        )
