"""The way back: a LangChain tool an agent calls to read a part context editing replaced."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from ..errors import ConfigError, ConfigTypeError
from ..reducer import MessageReducer
from ._graph import run_namespace
from ._store import OriginalSource, afetch_original, fetch_original, original_sources

__all__ = ("recall_tool",)

_DESCRIPTION = (
    "Read back a tool result or text that was cleared or offloaded from the conversation. "
    "Pass the handle (ctx_...) named in the placeholder; long originals come in pages: "
    "pass offset to read further."
)


def _page(handle: str, text: str | None, offset: int, size: int) -> str:
    if text is None:
        return f"Nothing is stored under handle {handle} (yet)."
    offset = max(0, offset)
    end = min(len(text), offset + size)
    more = f"; call again with offset={end} for more" if end < len(text) else ""
    return f"[{handle}: characters {offset}-{end} of {len(text)}{more}]\n{text[offset:end]}"


def recall_tool(
    store: OriginalSource | Sequence[OriginalSource],
    *,
    reducer: MessageReducer | None = None,
    namespace: Any = None,
    page_chars: int = 4_000,
    name: str = "read_original",
) -> BaseTool:
    """A LangChain tool (``handle``, ``offset``) reading an edited original back, page by page.

    The namespace is ``namespace`` when given, else :func:`memory_namespace` of the run
    the tool is called in (through ``reducer``'s ``namespace_key``), else the store
    hook's default. Keep ``page_chars`` well under the ``Offload.above`` threshold, so
    a page is never offloaded again.

    Args:
        store: where the reducer's hooks put the originals, as :func:`fetch_original`
            takes it: a store, a :func:`store_hook`, an ``Outbox``, or a list of them
            asked in turn.
        reducer: the reducer whose hooks stored the originals (for the namespace).
        namespace: a fixed namespace to read from.
        page_chars: characters returned per call.
        name: the tool's name as the model sees it.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> recall_tool(InMemoryStore()).name
        'read_original'
    """
    sources = original_sources(store)
    if reducer is not None and not isinstance(reducer, MessageReducer):
        raise ConfigTypeError(f"reducer must be a MessageReducer or None, got {reducer!r}")
    if isinstance(page_chars, bool) or not isinstance(page_chars, int) or page_chars < 1:
        raise ConfigError(f"page_chars must be an int >= 1, got {page_chars!r}")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"name must be a non-empty string, got {name!r}")

    def where() -> Any:
        if namespace is not None or reducer is None:
            return namespace
        return run_namespace(reducer)

    def read_original(handle: str, offset: int = 0) -> str:
        return _page(handle, fetch_original(sources, handle, namespace=where()), offset, page_chars)

    async def aread_original(handle: str, offset: int = 0) -> str:
        text = await afetch_original(sources, handle, namespace=where())
        return _page(handle, text, offset, page_chars)

    return StructuredTool.from_function(
        func=read_original, coroutine=aread_original, name=name, description=_DESCRIPTION
    )
