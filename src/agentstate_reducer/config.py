"""Configuration and result types, validated on construction."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .edit import ContextEdit, EditOption, check_edits
from .errors import ConfigError
from .reasoning import KEEP, MODEL, check_policy
from .tokens import check_token_counter, model_family, model_name, resolve_budget

__all__ = (
    "DEFAULT_NAMESPACE_KEY",
    "MessageT",
    "PinLike",
    "ReducerConfig",
    "ReducerResult",
    "RememberFn",
    "SummarizeFn",
    "SummaryFactory",
    "TokenBudget",
    "TokenCounterLike",
    "agent_config",
)

#: Key that framework integrations read from a run's ``configurable`` to find the namespace.
DEFAULT_NAMESPACE_KEY = "memory_namespace"

#: The type of the messages a reduce was given, and of those its result holds.
MessageT = TypeVar("MessageT")

#: An ``on_prune`` hook: ``(pruned_messages, namespace) -> Any`` (may be async with ``areduce``).
RememberFn = Callable[[list[Any], Any], Any]
#: ``summarize_fn(pruned_messages) -> str`` (may be async with ``areduce``).
SummarizeFn = Callable[[list[Any]], Any]
#: ``summary_message_factory(summary_text, pruned_count) -> list of messages``.
SummaryFactory = Callable[[str, int], list[Any]]
#: ``pin``: ``callable(message) -> bool``, or a collection of message ids.
PinLike = Callable[[Any], bool] | Collection[str]
#: A per-message counter, ``"approximate"``, an encoding or model name (see
#: :func:`~agentstate_reducer.tokens.resolve_token_counter`), or an object with
#: ``get_num_tokens_from_messages`` (a LangChain chat model).
TokenCounterLike = Any
#: A token budget: an int, ``None``, or ``("fraction", f)`` of the model's context window,
#: which :class:`ReducerConfig` resolves to an int when it is built.
TokenBudget = Any

_START_ON = (None, "human")


def _check_count(name: str, value: object, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        expected = "an int or None" if allow_none else "an int"
        raise ConfigError(f"{name} must be {expected}, got {value!r}")
    if value < 0:
        raise ConfigError(f"{name} must be >= 0, got {value!r}")


@dataclass(frozen=True)
class ReducerConfig:
    """Every option of a :class:`~agentstate_reducer.MessageReducer`, validated on construction.

    Count mode prunes when there are more than ``max_messages`` messages; token mode
    (``max_tokens`` set, takes precedence) prunes when the total exceeds ``max_tokens``
    and keeps the longest recent tail that fits ``target_tokens``. Either budget may be
    ``("fraction", f)``: that share of the context window of ``model``, resolved to an
    int here. ``tools`` and ``system_prompt`` (what each request sends besides the
    history) are counted once and left room for; with ``calibrate_from_usage``, reported
    ``usage_metadata`` on ai messages corrects the counter's estimates.

    Raises:
        ConfigError: a field is invalid (a ``ValueError``); the message names it.
    """

    min_messages: int = 10
    max_messages: int | None = 20
    #: An int, or ``("fraction", f)`` of ``model``'s context window (an int once built).
    max_tokens: TokenBudget = None
    target_tokens: TokenBudget = None
    token_counter: TokenCounterLike | None = None
    preserve_first: bool = True
    cascade_tool_messages: bool = True
    summarize_fn: SummarizeFn | None = None
    inject_summary: bool = False
    summary_message_factory: SummaryFactory | None = None
    on_prune: list[RememberFn] = field(default_factory=list)
    namespace_key: str = DEFAULT_NAMESPACE_KEY
    dedupe_on_prune: bool = True
    dedupe_window: int = 10_000
    #: ``"human"``: the kept tail starts with a human message (see docs/pruning.md).
    start_on: str | None = None
    #: Messages never pruned: ``callable(message) -> bool`` or a collection of ids. In
    #: token mode their tokens are budgeted like the preserved first message's.
    pin: PinLike | None = None
    #: Context editing run before the plan: at most one
    #: :class:`~agentstate_reducer.ClearToolResults` and one :class:`~agentstate_reducer.Offload`.
    context_edits: Sequence[EditOption] = ()
    #: A model name of the registry (``"gpt-4o"``) or a LangChain chat model: the context
    #: window for ``("fraction", f)`` budgets, and the counter when ``token_counter`` is
    #: ``None``.
    model: Any = None
    #: The context window ``("fraction", f)`` budgets are a share of, in tokens: wins over
    #: a chat model's profile and the registry, and lets a name the registry does not
    #: know be used; ``"full"``: the model's whole window where the registry stops at a
    #: price step (GPT-5.4 and later: 922,000 instead of 272,000).
    context_window: int | str | None = None
    #: Tool schemas (dicts, or LangChain tools and functions) sent with every request.
    tools: Sequence[Any] = ()
    #: A system prompt sent with every request but not kept in the history.
    system_prompt: str | None = None
    #: Learn a correction factor from ``usage_metadata["input_tokens"]`` on ai messages.
    calibrate_from_usage: bool = True
    #: Give each dead tool call (no result, and the conversation moved on) a synthetic
    #: result in the conversation's own shape; pending calls are never touched.
    repair_dangling_calls: bool = False
    #: Token mode: a current turn over ``max_tokens`` shrinks inside itself, each rung
    #: only while it is still over: the older steps' results become placeholders
    #: (previews too), then their tool inputs are cleared, then the oldest steps go,
    #: one note standing for them (docs/context-editing.md). Never the turn's question,
    #: never its latest step. :func:`agent_config` turns it on.
    turn_ladder: bool = False
    #: What reasoning the survivors carry back to ``model`` (docs/pruning.md, Reasoning):
    #: ``"keep"`` every block as it is; ``"current-turn"`` drops the reasoning of
    #: earlier turns; ``"model"`` drops exactly the signed blocks ``model`` cannot verify
    #: (another model's, and on models that check the prefix those after a cut). A
    #: signed block is never edited: kept whole or dropped whole. :func:`agent_config`
    #: picks ``"model"``.
    reasoning: str = KEEP
    #: Token mode: a cut among the earlier turns goes deep enough to pay for the prompt
    #: cache it rewrites (the tokens saved over the requests until the next cut, at the
    #: cached price, exceed the kept tokens at the cache-write price), keeping between
    #: half of ``target_tokens`` and all of it, on a question that opens a turn; a cut
    #: stays where the latest one left the history while the survivors fit
    #: ``max_tokens`` (a history kept whole and reduced for every request). The current
    #: turn is cut as without it. :func:`agent_config` turns it on (docs/tokens.md).
    cache_aware: bool = False

    def __post_init__(self) -> None:
        self._check_model()
        for name in ("max_tokens", "target_tokens"):
            value = resolve_budget(
                getattr(self, name), self.model, name, window=self.context_window
            )
            object.__setattr__(self, name, value)
        if not isinstance(self.tools, Sequence) or isinstance(self.tools, (str, bytes)):
            raise ConfigError(f"tools must be a list of tool schemas or tools, got {self.tools!r}")
        object.__setattr__(self, "tools", tuple(self.tools))
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise ConfigError(f"system_prompt must be a string or None, got {self.system_prompt!r}")
        if not isinstance(self.calibrate_from_usage, bool):
            raise ConfigError(
                f"calibrate_from_usage must be True or False, got {self.calibrate_from_usage!r}"
            )
        _check_count("min_messages", self.min_messages, allow_none=False)
        _check_count("max_messages", self.max_messages, allow_none=True)
        _check_count("max_tokens", self.max_tokens, allow_none=True)
        _check_count("target_tokens", self.target_tokens, allow_none=True)
        if self.max_tokens is not None:
            if self.max_tokens <= 0:
                raise ConfigError(f"max_tokens must be > 0, got {self.max_tokens!r}")
            if self.target_tokens is not None:
                if self.target_tokens <= 0:
                    raise ConfigError(f"target_tokens must be > 0, got {self.target_tokens!r}")
                if self.target_tokens > self.max_tokens:
                    raise ConfigError(
                        f"target_tokens ({self.target_tokens!r}) must be <= max_tokens "
                        f"({self.max_tokens!r})"
                    )
        elif self.target_tokens is not None:
            raise ConfigError(
                f"target_tokens={self.target_tokens!r} needs max_tokens; set max_tokens to "
                "enable token mode"
            )
        elif self.max_messages is not None and self.min_messages > self.max_messages:
            raise ConfigError(
                f"min_messages ({self.min_messages!r}) must be <= max_messages "
                f"({self.max_messages!r})"
            )
        if isinstance(self.dedupe_window, bool) or not isinstance(self.dedupe_window, int):
            raise ConfigError(f"dedupe_window must be an int, got {self.dedupe_window!r}")
        if self.dedupe_window < 1:
            raise ConfigError(f"dedupe_window must be >= 1, got {self.dedupe_window!r}")
        if self.summarize_fn is not None and not callable(self.summarize_fn):
            raise ConfigError(f"summarize_fn must be callable, got {self.summarize_fn!r}")
        if self.inject_summary and self.summarize_fn is None:
            raise ConfigError("inject_summary=True needs summarize_fn to produce the summary")
        if self.summary_message_factory is not None and not callable(self.summary_message_factory):
            raise ConfigError(
                f"summary_message_factory must be callable, got {self.summary_message_factory!r}"
            )
        if not isinstance(self.on_prune, Sequence) or isinstance(self.on_prune, (str, bytes)):
            raise ConfigError(f"on_prune must be a list of callables, got {self.on_prune!r}")
        for i, hook in enumerate(self.on_prune):
            if not callable(hook):
                raise ConfigError(f"on_prune[{i}] must be callable, got {hook!r}")
        object.__setattr__(self, "on_prune", list(self.on_prune))
        check_token_counter(self.token_counter)
        if not isinstance(self.namespace_key, str) or not self.namespace_key:
            raise ConfigError(
                f"namespace_key must be a non-empty string, got {self.namespace_key!r}"
            )
        if self.pin is not None and not callable(self.pin):
            pin = self.pin
            if (
                isinstance(pin, (str, bytes, Mapping))
                or not isinstance(pin, Collection)
                or not all(isinstance(i, str) for i in pin)
            ):
                raise ConfigError(
                    f"pin must be a callable(message) -> bool or a collection of message id "
                    f"strings, got {pin!r}"
                )
            object.__setattr__(self, "pin", frozenset(pin))
        if self.start_on not in _START_ON:
            raise ConfigError(f"start_on must be None or 'human', got {self.start_on!r}")
        object.__setattr__(self, "context_edits", check_edits(self.context_edits))
        check_policy(self.reasoning)
        if not isinstance(self.cache_aware, bool):
            raise ConfigError(f"cache_aware must be True or False, got {self.cache_aware!r}")
        if not isinstance(self.turn_ladder, bool):
            raise ConfigError(f"turn_ladder must be True or False, got {self.turn_ladder!r}")
        if not isinstance(self.repair_dangling_calls, bool):
            raise ConfigError(
                f"repair_dangling_calls must be True or False, got {self.repair_dangling_calls!r}"
            )

    def _check_model(self) -> None:
        window = self.context_window
        if (
            window is not None
            and window != "full"
            and (isinstance(window, bool) or not isinstance(window, int) or window <= 0)
        ):
            raise ConfigError(
                f"context_window must be a positive int, 'full' or None, got {window!r}"
            )
        if isinstance(self.model, str) and not isinstance(window, int):
            try:
                model_family(self.model)
            except ConfigError as exc:
                raise ConfigError(
                    f"{exc}; or set context_window= to use a model the registry does not know"
                ) from None
        elif (
            self.model is not None
            and not isinstance(self.model, str)
            and not hasattr(self.model, "profile")
            and model_name(self.model) is None
        ):
            raise ConfigError(f"model must be a model name or a chat model, got {self.model!r:.80}")

    @property
    def counter(self) -> TokenCounterLike:
        """``token_counter``, else the name of ``model`` if the registry knows it, else None."""
        if self.token_counter is not None or self.model is None:
            return self.token_counter
        name = model_name(self.model)
        if name is not None:
            try:
                model_family(name)
            except ConfigError:
                return None  # a chat model the registry does not know: the default counter
            return name
        return None

    @property
    def token_mode(self) -> bool:
        """True when ``max_tokens`` is set (token mode takes precedence)."""
        return self.max_tokens is not None

    @property
    def effective_target_tokens(self) -> int | None:
        """``target_tokens``, defaulting to ``max_tokens``."""
        target: int | None = self.target_tokens
        return target if target is not None else self.max_tokens


@dataclass(frozen=True)
class ReducerResult(Generic[MessageT]):
    """What one ``reduce()`` returned, and the figures of the reduce.

    Generic in the message type: reducing a ``list[dict[str, Any]]`` gives a
    ``ReducerResult[dict[str, Any]]``, whose :attr:`surviving` is a list of dicts
    (the summary block and synthetic results are written in the messages' own shape).
    """

    #: Messages that remain, in order (with the summary block when injected, and the
    #: synthetic results of :attr:`repaired`).
    surviving: list[MessageT]
    #: Messages that were removed, in their original order; never deduplicated.
    pruned: list[MessageT]
    #: The text ``summarize_fn`` returned, or ``None``.
    summary: str | None = None
    #: True when ``summarize_fn`` raised or timed out on this reduce. With
    #: ``inject_summary`` nothing was pruned then, unless keeping it all would have
    #: passed the hard limit (see docs/summaries.md).
    summary_failed: bool = False
    #: The parts context editing replaced, in message order (``index`` is into
    #: ``existing + new``); the edited copies are in ``surviving`` (or ``pruned``).
    edited: tuple[ContextEdit, ...] = ()
    #: Messages in ``existing + new``.
    messages_before: int = 0
    #: Messages in :attr:`surviving`.
    messages_after: int = 0
    #: Tokens before the reduce (token mode, when the plan counted them all), else ``None``.
    tokens_before: int | None = None
    #: Tokens of the surviving messages, summary block aside (token mode), else ``None``.
    tokens_after: int | None = None
    #: How many messages were pruned for each reason (``"in window"``, ``"cascade"``...).
    pruned_by_reason: dict[str, int] = field(default_factory=dict)
    #: Whether the survivors exceed the target (``target_tokens``, or ``max_messages``)
    #: after a prune was triggered.
    over_target: bool = False
    #: Whether the survivors, as returned, exceed the budget: their tokens (an injected
    #: summary block and a turn note included) above ``max_tokens`` (less the request
    #: overhead, in calibrated units), or their number above ``max_messages``. Holds on
    #: every path: a full reduce, an append, a summary failed closed.
    over_budget: bool = False
    #: Why they do: ``"current turn"`` (never pruned while it has tool calls; with
    #: ``turn_ladder``, still over once the ladder did what it could),
    #: ``"never-pruned role"`` (what may never be pruned exceeds the target alone),
    #: ``"start_on"`` (the cut moved back to a human message), ``"summary block"``,
    #: ``"summary failed"`` (what it would have summarised was kept),
    #: ``"original not stored yet"`` (an edit undone until its original is stored).
    over_because: tuple[str, ...] = ()
    #: Synthetic tool results added for dead calls (``repair_dangling_calls``), as
    #: they appear in :attr:`surviving`.
    repaired: list[MessageT] = field(default_factory=list)
    #: Identifiers, numbers and tool names of the summarised messages (and of the
    #: previous summary) that :attr:`summary` leaves out (see docs/summaries.md).
    summary_missing: tuple[str, ...] = ()
    #: Identifiers and names in :attr:`summary` that none of those messages holds.
    summary_invented: tuple[str, ...] = ()
    #: Tool results of the current turn cleared to a placeholder by this reduce (the
    #: ladder's rung (a), or ``ClearToolResults``; previews included), among the
    #: survivors: a result cleared in a step then dropped counts as that step.
    turn_results_cleared: int = 0
    #: Tool inputs of the current turn's older steps cleared by this reduce (rung (b)),
    #: among the survivors.
    turn_inputs_cleared: int = 0
    #: Oldest steps of the current turn dropped by this reduce (rung (c); with
    #: ``turn_ladder`` one note stands for them, counting every step dropped so far).
    turn_steps_dropped: int = 0
    #: Surviving messages whose signed reasoning the ``reasoning`` policy dropped (whole).
    reasoning_dropped: int = 0


def agent_config(*, provider: str | None = None, **options: Any) -> ReducerConfig:
    """The configuration for agents: requests stay valid for OpenAI, Anthropic and Gemini.

    ``start_on="human"`` (Anthropic and Gemini want a user message first),
    ``repair_dangling_calls=True`` (a call abandoned by a new user message gets a
    synthetic result), ``turn_ladder=True`` (in token mode a turn over the budget
    clears its older steps' results and inputs, then drops its oldest steps for one
    note, rather than losing steps the agent would run again), ``reasoning="model"``
    (a signed reasoning block goes back only to a model that can verify it) and
    ``cache_aware=True`` (in token mode a cut among the earlier turns pays for the prompt
    cache it rewrites and stays put while the survivors fit), on top of the defaults;
    any option may be given or overridden.
    ``provider="bedrock"`` also turns ``preserve_first`` off: Converse wants user and
    assistant messages to alternate strictly, so a kept first question followed by the
    question the kept tail starts with would be two user messages in a row (Bedrock keeps
    the system prompt in the request's ``system``, not among the messages).

    Example:
        >>> agent_config(min_messages=4, max_messages=8).start_on
        'human'
        >>> agent_config(provider="bedrock").preserve_first
        False
    """
    settings: dict[str, Any] = {
        "start_on": "human",
        "repair_dangling_calls": True,
        "turn_ladder": True,
        "reasoning": MODEL,
        "cache_aware": True,
    }
    if provider == "bedrock":
        settings["preserve_first"] = False
    elif provider not in (None, "openai", "anthropic", "gemini", "openai-responses"):
        raise ConfigError(
            f"agent_config: provider must be 'openai', 'anthropic', 'gemini', "
            f"'openai-responses' or 'bedrock', got {provider!r}"
        )
    settings.update(options)
    return ReducerConfig(**settings)
