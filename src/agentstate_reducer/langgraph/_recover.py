"""A chat model for graph nodes that retries once after the provider refused a request."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from .._recover import Recovery
from ..errors import ConfigTypeError
from ..reducer import MessageReducer, as_message_list
from ._graph import channel_namespace

__all__ = ("recovering_model",)


def recovering_model(
    model: Any, reducer: MessageReducer, *, namespace: Any = None
) -> Runnable[Any, Any]:
    """``model`` (a chat model, tools bound) that retries once after a refusal.

    For a ``StateGraph`` whose ``messages`` channel is :func:`reducing_add_messages`:
    call it in the model node instead of ``model``. When the provider refuses the
    request as too large, the messages are reduced again at a smaller budget (the
    reducer's ceiling for the thread is lowered, so the channel keeps under it from then
    on); when it rejects a reasoning signature, they are sent without the reasoning of
    earlier turns. A second refusal raises the provider's own error (see
    :class:`~agentstate_reducer.Recovery`). ``namespace`` must be the channel reducer's.

    Example:
        >>> llm = recovering_model(ChatOpenAI(model="gpt-4o").bind_tools(tools), reducer)
        ...                                                            # doctest: +SKIP
        >>> def agent(state): return {"messages": [llm.invoke(state["messages"])]}
    """
    if not isinstance(reducer, MessageReducer):
        raise ConfigTypeError(f"reducer must be a MessageReducer, got {reducer!r}")
    recovery = Recovery(reducer)

    def invoke(messages: Any, config: RunnableConfig) -> Any:
        return recovery.call(
            as_message_list(messages),
            lambda sent: model.invoke(sent, config),
            namespace=channel_namespace(reducer, namespace),
        )

    async def ainvoke(messages: Any, config: RunnableConfig) -> Any:
        return await recovery.acall(
            as_message_list(messages),
            lambda sent: model.ainvoke(sent, config),
            namespace=channel_namespace(reducer, namespace),
        )

    runnable = RunnableLambda(invoke, afunc=ainvoke, name="recovering_model")
    return runnable
