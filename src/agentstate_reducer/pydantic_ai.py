"""PydanticAI agents: bound the message history before each model request.

Needs the extra: ``pip install "agentstate-reducer[pydantic-ai]"``.

* :class:`ReducingCapability` goes in ``Agent(capabilities=[...])``: before each model
  request it awaits :meth:`MessageReducer.areduce` on the run's history, so the model
  and the stored history both get the bounded list; in token mode it counts the tool
  definitions and instructions of the request once against the budget.
* :func:`history_processor` (sync) and :func:`ahistory_processor` (async) give the same
  reduction as a plain function for ``ProcessHistory(...)``.

Either way the pruned messages reach the reducer's ``on_prune`` hooks (and so an
outbox) once each, under ``namespace`` (default: ``("memories", conversation_id)``).
Whole turns and steps are kept together: a ``ModelResponse`` with its tool calls, its
thinking and text, and the requests holding their returns.
"""

from __future__ import annotations

import json
import operator
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

try:
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import RetryModelRequest
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
    )
    from pydantic_ai.models import ModelRequestContext
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "agentstate_reducer.pydantic_ai needs PydanticAI; install it with "
        'pip install "agentstate-reducer[pydantic-ai]"'
    ) from exc

from ._recover import Recovery
from .compaction import ANTHROPIC, OPENAI_RESPONSES, provider_compaction
from .config import ReducerResult
from .errors import ConfigTypeError
from .read import TURN_NOTE_KIND, injected_kind, match_shape, request_instructions
from .reducer import MessageReducer, reducer_or_recipe, warn_once_over_budget

__all__ = ("ReducingCapability", "ahistory_processor", "history_processor", "run_namespace")

#: First label of the default namespace, as the LangGraph integration names it.
MEMORIES = "memories"

_MESSAGES = (ModelRequest, ModelResponse)
#: A message whose classes the reader builds a summary block from.
_SAMPLE = ModelRequest(parts=[])

#: ``namespace=``: a fixed namespace, or ``callable(ctx) -> namespace`` per run.
NamespaceLike = Any


def run_namespace(ctx: RunContext[Any]) -> Any:
    """The default namespace of a run: ``("memories", ctx.conversation_id)``, or ``None``."""
    conversation = getattr(ctx, "conversation_id", None)
    return None if conversation is None else (MEMORIES, str(conversation))


def _resolve(namespace: NamespaceLike, ctx: RunContext[Any]) -> Any:
    if namespace is None:
        return run_namespace(ctx)
    return namespace(ctx) if callable(namespace) else namespace


def _in_shape(result: ReducerResult[Any]) -> list[ModelMessage]:
    """The survivors, an injected summary block turned into PydanticAI messages.

    The default block already is (the reader writes it in the history's shape); a
    ``summary_message_factory``'s dicts are put in it here. The block's marker goes in
    the messages' ``metadata``, which is never sent to a model, so a later reduce
    recognises the summary as the package's own.
    """
    surviving = result.surviving
    if all(isinstance(m, _MESSAGES) for m in surviving):
        return list(surviving)
    return [m if isinstance(m, _MESSAGES) else match_shape([m], _SAMPLE)[0] for m in surviving]


def _outcome(
    messages: list[ModelMessage],
    split: list[ModelMessage],
    result: ReducerResult[Any],
    reducer: MessageReducer,
) -> list[ModelMessage]:
    """What the history becomes: ``messages`` themselves when the reduce changed nothing.

    :func:`_split_first` only matters once something is pruned; with nothing pruned or
    edited the history goes on as PydanticAI built it, first request unsplit, so a
    processor or capability after this one sees the same messages. A summary request in
    what it becomes is remembered for ``reducer``'s next :func:`_split_first`.
    """
    surviving = result.surviving
    if len(surviving) == len(split) and all(map(operator.is_, surviving, split)):
        return messages
    reduced = _in_shape(result)
    _remember(reducer, reduced)
    return reduced


#: Per reducer, the summary requests it returned: the fingerprint of each one's first part
#: -> the request, marked; the latest :data:`_OWN_SIZE`.
_OWN: weakref.WeakKeyDictionary[MessageReducer, OrderedDict[tuple[type, str], ModelRequest]] = (
    weakref.WeakKeyDictionary()
)
_OWN_SIZE = 1_000


def _plain(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime) else repr(value)


_to_json = json.JSONEncoder(sort_keys=True, default=_plain).encode


def _fingerprint(part: Any) -> tuple[type, str]:
    """A part's class and every field (content, timestamp): equal for a copy, as after a
    JSON round trip, and for nothing the user wrote at another moment."""
    fields = getattr(part, "__dict__", None)
    if not isinstance(fields, dict):
        return type(part), repr(part)
    return type(part), _to_json(fields)


def _remember(reducer: MessageReducer, messages: list[ModelMessage]) -> None:
    """Remember the summary requests among ``messages`` for :func:`_split_first`."""
    if not reducer.config.inject_summary:
        return
    for message in messages:
        if (
            isinstance(message, ModelRequest)
            and message.metadata
            and message.parts
            and injected_kind(message) not in (None, TURN_NOTE_KIND)
        ):
            own = _OWN.setdefault(reducer, OrderedDict())
            key = _fingerprint(message.parts[0])
            own[key] = message
            own.move_to_end(key)
            while len(own) > _OWN_SIZE:
                own.popitem(last=False)


def _own_requests(
    reducer: MessageReducer, parts: list[Any], at: int
) -> tuple[list[ModelMessage], int]:
    """The summary requests ``reducer`` returned whose parts run on from ``parts[at]``,
    and where the run ends."""
    own = _OWN.get(reducer)
    found: list[ModelMessage] = []
    while own and at < len(parts):
        request = own.get(_fingerprint(parts[at]))
        if request is None:
            break
        end = at + len(request.parts)
        if list(map(_fingerprint, parts[at:end])) != list(map(_fingerprint, request.parts)):
            break
        found.append(request)
        at = end
    return found, at


def _split_first(messages: list[ModelMessage], reducer: MessageReducer) -> list[ModelMessage]:
    """Put the leading system prompts of the first request in a request of their own, and
    each summary request ``reducer`` returned that was merged in after them, marked again.

    PydanticAI merges adjacent requests: once a window prunes everything between the
    first request and a new question, the question joins the first request, which the
    reducer keeps, and the first request would gather every later question. Apart, the
    system prompts stay (a system message is never pruned) and the questions go. The
    summary's request joins the system prompts' too, and the merged request keeps no
    metadata: read unmarked, the summary would be conversation (handed to the hooks,
    summarised again), and its wording cannot tell (a ``summary_message_factory``
    writes its own).
    """
    if messages is not None and not isinstance(messages, (list, tuple)):
        raise ConfigTypeError(
            f"messages must be a list of PydanticAI messages, got a {type(messages).__name__}"
        )
    first = messages[0] if messages else None
    if not isinstance(first, ModelRequest) or injected_kind(first) is not None:
        return messages
    parts = list(first.parts)
    lead = 0
    while lead < len(parts) and isinstance(parts[lead], SystemPromptPart):
        lead += 1
    own, at = _own_requests(reducer, parts, lead)
    if not own and (lead == 0 or lead == len(parts)):
        return messages
    split: list[ModelMessage] = [replace(first, parts=parts[:lead])] if lead else []
    split.extend(own)
    if at < len(parts):
        split.append(replace(first, parts=parts[at:]))
    return [*split, *messages[1:]]


def history_processor(
    reducer: MessageReducer | None = None, *, namespace: NamespaceLike = None
) -> Callable[[RunContext[Any], list[ModelMessage]], list[ModelMessage]]:
    """A ``ProcessHistory`` function that reduces the history with ``reducer.reduce()``.

    PydanticAI runs a sync processor in a worker thread; hooks and ``summarize_fn``
    must then be sync (use :func:`ahistory_processor` for async ones).

    Args:
        reducer: the reducer run before each model request; ``None`` for
            ``MessageReducer(config=agent_config())``, the agent recipe.
        namespace: where pruned messages go: a value, ``callable(ctx)``, or ``None``
            for :func:`run_namespace`.

    Example:
        >>> from pydantic_ai.capabilities import ProcessHistory             # doctest: +SKIP
        >>> agent = Agent(model, capabilities=[ProcessHistory(history_processor(reducer))])
    """
    reducer = reducer_or_recipe(reducer)

    def reduce_history(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        where = _resolve(namespace, ctx)
        split = _split_first(messages, reducer)
        result = reducer.reduce(split, namespace=where)
        warn_once_over_budget(reducer, result, where)
        return _outcome(messages, split, result, reducer)

    return reduce_history


def ahistory_processor(
    reducer: MessageReducer | None = None, *, namespace: NamespaceLike = None
) -> Callable[[RunContext[Any], list[ModelMessage]], Any]:
    """The async twin of :func:`history_processor`: awaits ``reducer.areduce()``."""
    reducer = reducer_or_recipe(reducer)

    async def areduce_history(
        ctx: RunContext[Any], messages: list[ModelMessage]
    ) -> list[ModelMessage]:
        where = _resolve(namespace, ctx)
        split = _split_first(messages, reducer)
        result = await reducer.areduce(split, namespace=where)
        warn_once_over_budget(reducer, result, where)
        return _outcome(messages, split, result, reducer)

    return areduce_history


def _tool_schema(tool: Any) -> dict[str, Any]:
    """A PydanticAI ``ToolDefinition`` as the function schema a provider is sent."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description or "",
            "parameters": tool.parameters_json_schema,
        },
    }


@dataclass(init=False)
class ReducingCapability(AbstractCapability[Any]):
    """An agent capability that bounds the history before each model request.

    Awaits ``reducer.areduce()`` on the run's messages and makes the result both what
    the model is sent and the run's stored history (as ``ProcessHistory`` does). In
    token mode the request's tool definitions and instructions are counted once against
    the budget, and again only when they change. Without a ``reducer`` it runs
    ``MessageReducer(config=agent_config())``, the agent recipe.

    When the provider refuses a request as too large for its context window, or rejects a
    reasoning signature, the capability makes one more attempt (``RetryModelRequest``),
    reduced at a smaller budget or without the reasoning of earlier turns
    (:class:`~agentstate_reducer.Recovery`); a second refusal raises the provider's own
    error. ``recover=False`` turns that off.

    ``compaction="openai-responses"`` or ``"anthropic"`` asks the provider to compact on
    its side, the threshold below the reducer's ``max_tokens``
    (:func:`~agentstate_reducer.compaction.provider_compaction`): the capability's model
    settings carry ``openai_context_management`` (``OpenAIResponsesModel``) or
    ``anthropic_context_management`` (``AnthropicModel``, which adds the beta itself).

    Example:
        >>> agent = Agent(model, capabilities=[ReducingCapability(reducer)])  # doctest: +SKIP
    """

    #: The reducer run before each model request.
    reducer: MessageReducer
    namespace: NamespaceLike = None
    #: Retries after a provider's refusal (``None`` with ``recover=False``).
    recovery: Recovery | None = field(default=None, repr=False)
    #: The model settings that ask the provider to compact (empty without ``compaction``).
    compaction: dict[str, Any] = field(default_factory=dict)
    _seen: Any = field(default=None, repr=False)
    _retries: dict[int, Any] = field(default_factory=dict, repr=False)

    def __init__(
        self,
        reducer: MessageReducer | None = None,
        *,
        namespace: NamespaceLike = None,
        recover: bool = True,
        compaction: str | None = None,
    ) -> None:
        self.reducer = reducer_or_recipe(reducer)
        self.namespace = namespace
        self.compaction = _compaction_settings(self.reducer, compaction)
        self.recovery = Recovery(self.reducer, finish=_in_shape) if recover else None
        self._seen = None
        # Per request (its context lives through its attempts): the messages of the retry
        # to send, then the attempt sending them.
        self._retries = {}

    def _see(self, request_context: ModelRequestContext) -> None:
        if not self.reducer.config.token_mode:
            return
        params = request_context.model_request_parameters
        tools = list(getattr(params, "function_tools", ()) or ()) + list(
            getattr(params, "output_tools", ()) or ()
        )
        instructions = _instructions(request_context)
        seen = (tuple(map(id, tools)), instructions)
        if seen != self._seen:
            self._seen = seen
            self.reducer.set_request_overhead(
                tools=[_tool_schema(t) for t in tools], system_prompt=instructions
            )

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self._see(request_context)
        messages = list(request_context.messages)
        split = _split_first(messages, self.reducer)
        where = _resolve(self.namespace, ctx)
        result = await self.reducer.areduce(split, namespace=where)
        warn_once_over_budget(self.reducer, result, where)
        reduced = _outcome(messages, split, result, self.reducer)
        request_context.messages = reduced.copy()
        ctx.messages[:] = reduced
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        if self.recovery is None:
            return request_context
        retry = self._retries.get(id(request_context))
        if isinstance(retry, list):  # the attempt after a refusal
            self._retries[id(request_context)] = request_context.attempt
            request_context.messages = retry
        else:
            where = _resolve(self.namespace, ctx)
            request_context.messages = self.recovery.prepare(request_context.messages, where)
        return request_context

    async def on_model_request_error(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, error: Exception
    ) -> ModelResponse:
        recovery = self.recovery
        if recovery is None:
            raise error
        if self._retries.pop(id(request_context), None) == request_context.attempt:
            recovery.failed_retries += 1
            raise error  # the retry was refused too
        where = _resolve(self.namespace, ctx)
        sent = _split_first(list(request_context.messages), self.reducer)
        retry = await recovery.aretry_messages(sent, error, where)
        if retry is None:
            raise error
        recovery.retries += 1
        self._retries[id(request_context)] = retry
        raise RetryModelRequest()

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        self._retries.pop(id(request_context), None)
        return response

    def get_model_settings(self) -> Any:
        return dict(self.compaction) if self.compaction else None

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a reducer: not part of a serialisable agent spec


def _instructions(request_context: ModelRequestContext) -> str | None:
    """The instruction text the request carries, when PydanticAI says it."""
    params = request_context.model_request_parameters
    return request_instructions(getattr(params, "instruction_parts", None))


#: The model-settings key each provider's PydanticAI model reads ``context_management`` from.
_SETTING = {
    OPENAI_RESPONSES: "openai_context_management",
    ANTHROPIC: "anthropic_context_management",
}


def _compaction_settings(reducer: MessageReducer, provider: str | None) -> dict[str, Any]:
    if provider is None:
        return {}
    params = provider_compaction(reducer.config, provider)
    return {_SETTING[provider]: params["context_management"]}
