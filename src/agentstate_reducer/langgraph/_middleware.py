"""Before each model call of a ``langchain.agents`` agent: bound the stored history."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "ReducingMiddleware needs langchain (langchain.agents); install it with "
        'pip install "agentstate-reducer[langgraph]"'
    ) from exc
from langgraph.runtime import Runtime

from .._recover import Recovery
from ..compaction import provider_compaction
from ..errors import ConfigError
from ..reducer import MessageReducer, reducer_or_recipe
from ._graph import removal_update, run_namespace, warn_in_run

__all__ = ("ReducingMiddleware",)


class ReducingMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """``create_agent`` middleware that bounds the stored history before each model call.

    ``before_model`` reduces ``state["messages"]`` and returns ``RemoveMessage``
    updates for the pruned ids plus the messages context editing replaced, under
    their own ids (or replaces the whole list when a summary is injected), so both
    the model and the checkpoint see the bounded, edited list. Without a ``reducer``
    it runs ``MessageReducer(config=agent_config())``, the agent recipe. Pruned
    messages reach the reducer's hooks under :func:`memory_namespace` of the run
    config. ``abefore_model`` (under ``ainvoke``) awaits ``areduce()``.

    In token mode, what each model request sends besides the history is counted once
    against the budget: ``tools`` given here, and the tools and system prompt the agent
    sends, as ``wrap_model_call`` sees them (from the first request on; the reduce before
    the very first request knows only ``tools`` and the reducer's config).

    When the provider refuses a request as too large for its context window, or rejects a
    reasoning signature, ``wrap_model_call`` sends it once more, reduced at a smaller
    budget or without the reasoning of earlier turns (:class:`~agentstate_reducer.
    Recovery`); a second refusal raises the provider's own error. ``recover=False`` turns
    that off.

    ``compaction="openai-responses"`` or ``"anthropic"`` asks the provider to compact on
    its side: each request binds the parameters of
    :func:`~agentstate_reducer.compaction.provider_compaction` (threshold below the
    reducer's ``max_tokens``) as model settings, which the chat model's call receives as
    keyword arguments; a mapping is bound as given. The reply's compaction is the reader's
    boundary; the reducer stays the fallback.

    Example:
        >>> from langchain.agents import create_agent                 # doctest: +SKIP
        >>> agent = create_agent(model, tools, middleware=[ReducingMiddleware(reducer)])
    """

    def __init__(
        self,
        reducer: MessageReducer | None = None,
        *,
        tools: Sequence[Any] = (),
        recover: bool = True,
        compaction: str | Mapping[str, Any] | None = None,
    ) -> None:
        reducer = reducer_or_recipe(reducer)
        super().__init__()
        #: The reducer run before each model call.
        self.reducer = reducer
        self._extra_tools = list(tools)
        self._seen: tuple[Any, ...] | None = None
        #: Retries after a provider's refusal (``None`` with ``recover=False``).
        self.recovery = Recovery(reducer) if recover else None
        if self._extra_tools and reducer.config.token_mode:
            reducer.set_request_overhead(tools=self._extra_tools)
        #: The parameters bound to each model request to ask the provider to compact.
        self.compaction: dict[str, Any] = _compaction(reducer, compaction)

    def _bound(self, request: ModelRequest) -> ModelRequest:
        """``request`` with the compaction parameters among its model settings (its own
        settings win)."""
        if not self.compaction:
            return request
        return request.override(model_settings={**self.compaction, **request.model_settings})

    def _see(self, request: ModelRequest) -> None:
        """Count the request's tools and system prompt once, when they change."""
        if not self.reducer.config.token_mode:
            return
        tools = list(request.tools or ())
        seen = (tuple(map(id, tools)), request.system_prompt)
        if seen != self._seen:
            self._seen = seen
            self.reducer.set_request_overhead(
                tools=[*self._extra_tools, *tools], system_prompt=request.system_prompt
            )

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        self._see(request)
        request = self._bound(request)
        if self.recovery is None:
            return handler(request)
        return self.recovery.call(
            request.messages,
            lambda messages: handler(request.override(messages=messages)),
            namespace=run_namespace(self.reducer),
        )

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        self._see(request)
        request = self._bound(request)
        if self.recovery is None:
            return await handler(request)
        return await self.recovery.acall(
            request.messages,
            lambda messages: handler(request.override(messages=messages)),
            namespace=run_namespace(self.reducer),
        )

    def before_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        existing = list(state["messages"])
        result = self.reducer.reduce(existing, namespace=run_namespace(self.reducer))
        warn_in_run(self.reducer, result)
        return removal_update(existing, result) or None

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        existing = list(state["messages"])
        result = await self.reducer.areduce(existing, namespace=run_namespace(self.reducer))
        warn_in_run(self.reducer, result)
        return removal_update(existing, result) or None


def _compaction(reducer: MessageReducer, compaction: object) -> dict[str, Any]:
    if compaction is None:
        return {}
    if isinstance(compaction, str):
        return provider_compaction(reducer.config, compaction)
    if isinstance(compaction, Mapping):
        return dict(compaction)
    raise ConfigError(
        f"compaction must be 'openai-responses', 'anthropic', a mapping of request "
        f"parameters or None, got {compaction!r}"
    )
