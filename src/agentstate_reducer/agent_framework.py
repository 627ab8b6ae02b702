"""Microsoft Agent Framework: bound every model request an agent sends.

Needs the extra: ``pip install "agentstate-reducer[agent-framework]"``.

:class:`ReducingChatMiddleware` is chat middleware (``Agent(middleware=[...])``, or a chat
client's ``middleware=``): the framework runs it before every call to the chat client,
each step of a tool loop included, and what it leaves in ``context.messages`` is what the
model receives. The session's history and the loop's own list are not changed: each
request is reduced from all of it. A message's function calls stay with the ``tool``
message holding their results, and pruned messages reach the reducer's ``on_prune`` hooks
(and so an outbox) once each, under ``namespace`` (default: ``("memories", session id)``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

try:
    from agent_framework import ChatContext, ChatMiddleware
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "agentstate_reducer.agent_framework needs Microsoft Agent Framework; install it "
        'with pip install "agentstate-reducer[agent-framework]"'
    ) from exc

from .read import INJECTED_KEY
from .read.agent_framework import sendable
from .reducer import MessageReducer, reducer_or_recipe, warn_once_over_budget

__all__ = ("ReducingChatMiddleware", "session_namespace")

#: First label of the default namespace, as the other integrations name it.
MEMORIES = "memories"
#: Keys the package adds to a message it writes, never sent to a provider.
_PACKAGE_KEYS = frozenset({INJECTED_KEY})

#: ``namespace=``: a fixed namespace, or ``callable(context) -> namespace`` per request.
NamespaceLike = Any


def session_namespace(context: ChatContext) -> tuple[str, str] | None:
    """The default namespace of a request: ``("memories", session id)``, or ``None``
    when the agent runs without a session."""
    session = context.session
    return None if session is None else (MEMORIES, str(session.session_id))


def _tool_schema(tool: Any) -> dict[str, Any]:
    """A tool as the function schema a provider is sent (others: by name)."""
    spec = getattr(tool, "to_json_schema_spec", None)
    if callable(spec):
        found = spec()
        if isinstance(found, dict):
            return found
    return {"type": "function", "function": {"name": getattr(tool, "name", str(tool))}}


class ReducingChatMiddleware(ChatMiddleware):
    """Chat middleware that bounds every model request with a :class:`MessageReducer`.

    Reduces ``context.messages`` before the chat client is called; in token mode the
    request's tools and instructions are counted once against the budget (again when they
    change). Without a ``reducer`` it runs ``MessageReducer(config=agent_config())``, the
    agent recipe. Messages the reduce left as they were are sent as the framework built
    them; edited ones (a cleared result, a turn note, a synthetic result for an abandoned
    call) are new ``Message`` objects.

    Example:
        >>> agent = Agent(client=client, tools=[lookup],                  # doctest: +SKIP
        ...               middleware=[ReducingChatMiddleware()])
    """

    def __init__(
        self, reducer: MessageReducer | None = None, *, namespace: NamespaceLike = None
    ) -> None:
        #: The reducer run before each model request.
        self.reducer = reducer_or_recipe(reducer)
        self.namespace = namespace
        self._seen: Any = None

    def _see(self, options: Any) -> None:
        options = options or {}
        tools = list(options.get("tools") or ())
        instructions = options.get("instructions")
        instructions = instructions if isinstance(instructions, str) and instructions else None
        seen = (tuple(map(id, tools)), instructions)
        if seen != self._seen:
            self._seen = seen
            self.reducer.set_request_overhead(
                tools=[_tool_schema(t) for t in tools], system_prompt=instructions
            )

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        messages = list(context.messages)
        if messages:
            if self.reducer.config.token_mode:
                self._see(context.options)
            namespace = self.namespace
            if namespace is None:
                where = session_namespace(context)
            else:
                where = namespace(context) if callable(namespace) else namespace
            result = await self.reducer.areduce(messages, namespace=where)
            warn_once_over_budget(self.reducer, result, where)
            surviving = result.surviving
            unchanged = len(surviving) == len(messages) and all(
                a is b for a, b in zip(surviving, messages, strict=True)
            )
            if not unchanged:
                context.messages = sendable(surviving, _PACKAGE_KEYS)
        await call_next()
