"""In the graph: a state reducer that merges like ``add_messages`` and then prunes,
and the pieces shared by the pre-model hook and the agent middleware."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from langchain_core.messages import RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from ..config import ReducerResult
from ..messages import message_id
from ..reducer import MessageReducer, as_message_list
from ._saver import memory_namespace

__all__ = (
    "removal_update",
    "reducing_add_messages",
    "reducing_pre_model_hook",
    "run_namespace",
)


def run_namespace(reducer: MessageReducer) -> Any:
    """:func:`memory_namespace` of the run config in context, or ``None`` outside a run."""
    try:
        config = get_config()
    except RuntimeError:
        return None
    return memory_namespace(reducer, config)


def _as_update(value: Any) -> list[Any]:
    # add_messages' coercion: a tuple such as ("user", "hi") is one message, not a list.
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _without_stale_removals(left: list[Any], right: list[Any]) -> list[Any]:
    """Drop ``RemoveMessage`` updates for ids that are no longer in the list.

    Pruning removes messages a node may still hold; removing one of those again is a
    no-op here instead of ``add_messages``' ``ValueError``.
    """
    if not any(isinstance(m, RemoveMessage) for m in right):
        return right
    known = {message_id(m) for m in left}
    known.update(message_id(m) for m in right if not isinstance(m, RemoveMessage))
    known.add(REMOVE_ALL_MESSAGES)
    return [m for m in right if not isinstance(m, RemoveMessage) or m.id in known]


def reducing_add_messages(
    reducer: MessageReducer, *, namespace: Any = None
) -> Callable[[Any, Any], list[Any]]:
    """Return a state reducer that merges like ``add_messages``, then prunes with ``reducer``.

    The merge is LangGraph's own ``add_messages`` (ids assigned, same id replaces,
    ``RemoveMessage`` and ``REMOVE_ALL_MESSAGES``), so nodes keep its semantics; the
    one difference is that removing an id no longer in the list (pruned already) is
    a no-op. Law: ``reducing_add_messages(r)(left, right) ==
    r.reduce(add_messages(left, right)).surviving`` for valid updates.

    Channel reducers run outside any node, so they do not see the run config: pruned
    messages go to ``namespace`` when given, else to :func:`memory_namespace` of the
    run config in context (a subgraph's reducer sees its parent's), else ``None``.
    Hooks are called through the sync ``reduce()``, under ``ainvoke`` too.

    Example:
        >>> from typing import Annotated
        >>> from typing_extensions import TypedDict
        >>> from agentstate_reducer import MessageReducer
        >>> class State(TypedDict):
        ...     messages: Annotated[list, reducing_add_messages(MessageReducer(10, 20))]
    """
    if not isinstance(reducer, MessageReducer):
        raise TypeError(f"reducer must be a MessageReducer, got {reducer!r}")

    def merge(left: Any, right: Any) -> list[Any]:
        existing = _as_update(left)
        update = _without_stale_removals(existing, _as_update(right))
        merged = cast(list[Any], add_messages(existing, update))
        if namespace is not None:
            where = namespace
        elif reducer.config.on_prune:
            where = run_namespace(reducer)
        else:
            where = None
        return reducer.reduce(merged, namespace=where).surviving

    merge.__name__ = "reducing_add_messages"
    return merge


def removal_update(
    existing: list[Any], result: ReducerResult, messages_key: str = "messages"
) -> dict[str, Any]:
    """The state update that turns ``existing`` into ``result.surviving`` under ``add_messages``.

    One ``RemoveMessage(id)`` per pruned message; when a summary was injected (it must
    sit where the pruned block was) or a pruned message has no id, the whole list is
    replaced through ``REMOVE_ALL_MESSAGES``. ``{}`` when nothing was pruned.
    """
    if not result.pruned:
        return {}
    ids = [message_id(m) for m in result.pruned]
    injected = len(result.surviving) + len(result.pruned) != len(existing)
    if injected or None in ids:
        return {messages_key: [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result.surviving]}
    return {messages_key: [RemoveMessage(id=cast(str, i)) for i in ids]}


def _messages_in(state: Any, messages_key: str) -> list[Any]:
    value = state.get(messages_key) if isinstance(state, Mapping) else getattr(state, messages_key)
    return as_message_list(value)


def reducing_pre_model_hook(
    reducer: MessageReducer, *, messages_key: str = "messages"
) -> Runnable[Any, dict[str, Any]]:
    """Return a ``create_react_agent`` ``pre_model_hook`` that bounds the stored history.

    Before each model call it reduces ``state[messages_key]`` and returns the
    :func:`removal_update` (``RemoveMessage`` per pruned id, or the whole list when a
    summary is injected), so the model and the checkpoint both see the bounded list.
    The namespace comes from the run config (:func:`memory_namespace`). Runs
    ``reduce()`` under ``invoke`` and ``areduce()`` under ``ainvoke``.
    """
    if not isinstance(reducer, MessageReducer):
        raise TypeError(f"reducer must be a MessageReducer, got {reducer!r}")

    def hook(state: Any, config: RunnableConfig) -> dict[str, Any]:
        existing = _messages_in(state, messages_key)
        result = reducer.reduce(existing, namespace=memory_namespace(reducer, config))
        return removal_update(existing, result, messages_key)

    async def ahook(state: Any, config: RunnableConfig) -> dict[str, Any]:
        existing = _messages_in(state, messages_key)
        result = await reducer.areduce(existing, namespace=memory_namespace(reducer, config))
        return removal_update(existing, result, messages_key)

    return RunnableLambda(hook, afunc=ahook, name="reducing_pre_model_hook")
