"""In the graph: a state reducer that merges like ``add_messages`` and then prunes,
and the pieces shared by the pre-model hook and the agent middleware."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, cast

from langchain_core.messages import RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from .._merge import PrunedIds, merge_messages, plain_append
from ..config import ReducerResult
from ..errors import ConfigError, ConfigTypeError
from ..read import message_id
from ..reducer import MessageReducer, as_message_list, reducer_or_recipe
from ._saver import memory_namespace, warn_over_budget

__all__ = (
    "PrunedIds",
    "channel_namespace",
    "merge_messages",
    "removal_update",
    "reducing_add_messages",
    "reducing_pre_model_hook",
    "run_namespace",
    "warn_in_run",
)


_FORMATS = (None, "langchain-openai")


def _run_config() -> RunnableConfig | None:
    try:
        return get_config()
    except RuntimeError:
        return None


def warn_in_run(reducer: MessageReducer, result: ReducerResult[Any]) -> None:
    """:func:`warn_over_budget` for the thread of the run in context, if any."""
    if result.over_budget:
        warn_over_budget(reducer, result, _run_config())


def run_namespace(reducer: MessageReducer) -> Any:
    """:func:`memory_namespace` of the run config in context, or ``None`` outside a run."""
    try:
        config = get_config()
    except RuntimeError:
        return None
    return memory_namespace(reducer, config)


def channel_namespace(reducer: MessageReducer, namespace: Any = None) -> Any:
    """The namespace a channel reducer of ``reducer`` reduces under: ``namespace`` when
    given, else :func:`run_namespace` when it has hooks, else ``None``."""
    if namespace is not None:
        return namespace
    return run_namespace(reducer) if reducer.config.on_prune else None


def _check_format(format: object) -> None:
    if format not in _FORMATS:
        # add_messages' own words, so code matching them keeps working.
        raise ConfigError(
            f"Unrecognized format={format!r:.80}. Expected one of 'langchain-openai', None."
        )


def reducing_add_messages(
    reducer: MessageReducer | None = None, *, namespace: Any = None, format: str | None = None
) -> Callable[..., Any]:
    """Return a state reducer that merges like ``add_messages``, then prunes with ``reducer``.

    The merge is LangGraph's own ``add_messages`` (ids assigned, same id replaces,
    ``RemoveMessage`` or ``{"type": "remove", "id": ...}``, ``REMOVE_ALL_MESSAGES``,
    ``format="langchain-openai"``), and it is called the same ways: ``merge(left,
    right)``; ``merge()`` or ``merge(format=...)`` returns a partial; a ``None`` on one
    side raises ``ValueError``. The one difference: removing an id that this reducer
    pruned (the last ``dedupe_window`` of them) is a no-op; removing an id that never
    was in the list raises :class:`UpdateError` (a ``ValueError``) in ``add_messages``'
    words. Law:
    ``reducing_add_messages(r)(left, right) == r.reduce(add_messages(left,
    right)).surviving`` for valid updates.

    Channel reducers run outside any node, so they do not see the run config: pruned
    messages go to ``namespace`` when given, else to :func:`memory_namespace` of the
    run config in context (a subgraph's reducer sees its parent's), else ``None``.
    Hooks are called through the sync ``reduce()``, under ``ainvoke`` too. Without a
    ``reducer`` it prunes with ``MessageReducer(config=agent_config())``, the agent recipe.

    Raises:
        TypeError: ``reducer`` is not a ``MessageReducer``.
        ConfigError: ``format`` is neither ``None`` nor ``"langchain-openai"``.

    Example:
        >>> from typing import Annotated
        >>> from typing_extensions import TypedDict
        >>> from agentstate_reducer import MessageReducer
        >>> class State(TypedDict):
        ...     messages: Annotated[list, reducing_add_messages(MessageReducer(10, 20))]
    """
    reducer = reducer_or_recipe(reducer)
    _check_format(format)
    pruned = PrunedIds(reducer.config.dedupe_window)

    def merge_and_reduce(left: Any, right: Any, *, format: str | None = format) -> list[Any]:
        where = channel_namespace(reducer, namespace)
        try:
            appended = plain_append(left, right, format, fresh=reducer._fresh_ids)
            if appended is not None:  # the common update: reduce(left, right) compares left once
                result = reducer.reduce(left, appended, namespace=where)
            else:
                result = reducer.reduce(
                    merge_messages(left, right, pruned, format), namespace=where
                )
        finally:
            # The comparison of left handed to the reduce is valid for this call only: a
            # reduce that raised before taking it must not leave it to the next one.
            reducer._checked.list = None
        warn_in_run(reducer, result)
        pruned.add(result.pruned)
        return result.surviving

    def merge(left: Any = None, right: Any = None, **options: Any) -> Any:
        if options.keys() - {"format"}:
            raise ConfigTypeError(f"unexpected options {sorted(options.keys() - {'format'})!r}; "
                            "expected only format=")
        if "format" in options:
            _check_format(options["format"])
        if left is not None and right is not None:
            return merge_and_reduce(left, right, **options)
        if left is None and right is None:
            return functools.partial(merge_and_reduce, **options)
        # add_messages' own words, so code matching them keeps working.
        raise ConfigError(
            "Must specify non-null arguments for both 'left' and 'right'. Only "
            f"received: '{'left' if left is not None else 'right'}'."
        )

    merge.__name__ = "reducing_add_messages"
    return merge


def removal_update(
    existing: list[Any], result: ReducerResult[Any], messages_key: str = "messages"
) -> dict[str, Any]:
    """The state update that turns ``existing`` into ``result.surviving`` under ``add_messages``.

    One ``RemoveMessage(id)`` per pruned message, and each message context editing
    replaced, under its own id (``add_messages`` swaps it in place). When a summary was
    injected (it must sit where the pruned block was), synthetic results were added (they
    must sit after their call), or a pruned or edited message has no id, the whole list is
    replaced through ``REMOVE_ALL_MESSAGES``. ``{}`` when nothing changed.
    """
    if not result.pruned and not result.edited and not result.repaired:
        return {}
    ids = [message_id(m) for m in result.pruned]
    injected = len(result.surviving) + len(result.pruned) != len(existing)
    before = {id(m) for m in existing}
    edited = [m for m in result.surviving if id(m) not in before] if result.edited else []
    if injected or None in ids or any(message_id(m) is None for m in edited):
        return {messages_key: [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result.surviving]}
    return {messages_key: [*(RemoveMessage(id=cast(str, i)) for i in ids), *edited]}


def _messages_in(state: Any, messages_key: str) -> list[Any]:
    value = state.get(messages_key) if isinstance(state, Mapping) else getattr(state, messages_key)
    return as_message_list(value)


def reducing_pre_model_hook(
    reducer: MessageReducer | None = None, *, messages_key: str = "messages"
) -> Runnable[Any, dict[str, Any]]:
    """Return a ``create_react_agent`` ``pre_model_hook`` that bounds the stored history.

    Before each model call it reduces ``state[messages_key]`` and returns the
    :func:`removal_update` (``RemoveMessage`` per pruned id, or the whole list when a
    summary is injected), so the model and the checkpoint both see the bounded list.
    The namespace comes from the run config (:func:`memory_namespace`). Runs
    ``reduce()`` under ``invoke`` and ``areduce()`` under ``ainvoke``. Without a
    ``reducer`` it runs ``MessageReducer(config=agent_config())``, the agent recipe.
    """
    reducer = reducer_or_recipe(reducer)

    def hook(state: Any, config: RunnableConfig) -> dict[str, Any]:
        existing = _messages_in(state, messages_key)
        result = reducer.reduce(existing, namespace=memory_namespace(reducer, config))
        warn_over_budget(reducer, result, config)
        return removal_update(existing, result, messages_key)

    async def ahook(state: Any, config: RunnableConfig) -> dict[str, Any]:
        existing = _messages_in(state, messages_key)
        result = await reducer.areduce(existing, namespace=memory_namespace(reducer, config))
        warn_over_budget(reducer, result, config)
        return removal_update(existing, result, messages_key)

    return RunnableLambda(hook, afunc=ahook, name="reducing_pre_model_hook")
