"""LangGraph and LangChain agents: bound the history in the graph, at persistence, per model call.

Needs the extra: ``pip install "agentstate-reducer[langgraph]"``.

Three places to bound a conversation (see ``docs/langgraph.md`` for which to pick):

* in the graph: :func:`reducing_add_messages` merges like ``add_messages`` and then prunes;
* at persistence: :class:`ReducingSaver` reduces each checkpoint as it is written;
* before each model call: :class:`ReducingMiddleware` (``langchain.agents``) and
  :func:`reducing_pre_model_hook` (``create_react_agent``) emit ``RemoveMessage`` updates.

:func:`recovering_model` retries a graph node's model call once after the provider
refuses it (too large, or a reasoning signature); the middleware does so by itself.

:func:`store_hook` hands what was pruned (and the originals context editing replaced)
to any LangGraph ``BaseStore``; :func:`fetch_original` and :func:`recall_tool` read an
edited original back by its handle.
"""

from __future__ import annotations

__all__ = (
    "ReducingMiddleware",
    "ReducingSaver",
    "ThreadTTL",
    "aapply_reducer",
    "afetch_original",
    "apply_reducer",
    "fetch_original",
    "memory_namespace",
    "recall_tool",
    "recovering_model",
    "reducing_add_messages",
    "reducing_pre_model_hook",
    "store_hook",
)

from typing import TYPE_CHECKING, Any

try:
    import langchain_core.messages  # noqa: F401
    import langgraph.graph.message  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "agentstate_reducer.langgraph needs LangGraph; install it with "
        'pip install "agentstate-reducer[langgraph]"'
    ) from exc

from ._graph import reducing_add_messages, reducing_pre_model_hook
from ._recall import recall_tool
from ._recover import recovering_model
from ._saver import ReducingSaver, aapply_reducer, apply_reducer, memory_namespace
from ._store import afetch_original, fetch_original, store_hook
from ._ttl import ThreadTTL

if TYPE_CHECKING:
    from ._middleware import ReducingMiddleware


def __getattr__(name: str) -> Any:
    # langchain (for langchain.agents) is imported only when the middleware is asked for.
    if name == "ReducingMiddleware":
        from ._middleware import ReducingMiddleware

        return ReducingMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
