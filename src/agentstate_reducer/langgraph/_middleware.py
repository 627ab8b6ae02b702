"""Before each model call of a ``langchain.agents`` agent: bound the stored history."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
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
