"""Google ADK: bound every model request an agent sends.

Needs the extra: ``pip install "agentstate-reducer[adk]"``.

* :class:`ReducingPlugin` goes in ``App(plugins=[...])``:
  before each model request of every agent the runner serves, it reduces
  ``llm_request.contents``.
* :func:`reducing_before_model_callback` does the same for one agent:
  ``LlmAgent(before_model_callback=...)``.

ADK builds each request's contents anew from the session's events, so the session keeps
every event and only what the model is sent is bounded. The contents are read as the
Gemini contents they are (their JSON form, ``Content.model_dump(mode="json")``): a model
content keeps its function calls and the user content after it their responses, a
turn's steps stay in order. Pruned contents reach the reducer's ``on_prune`` hooks (and
so an outbox) once each, as those JSON dicts, under ``namespace`` (default:
``("memories", session id)``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

try:
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.plugins.base_plugin import BasePlugin
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "agentstate_reducer.adk needs Google ADK; install it with "
        'pip install "agentstate-reducer[adk]"'
    ) from exc

from .read import INJECTED_KEY, PACKAGE_NOTE, read_message
from .read.gemini import SYSTEM_KEYS, request_system
from .reducer import MessageReducer, reducer_or_recipe, warn_once_over_budget

__all__ = ("ReducingPlugin", "reducing_before_model_callback", "session_namespace")

#: First label of the default namespace, as the other integrations name it.
MEMORIES = "memories"
#: Keys the package adds to a content it writes (an injected note's id and marker).
_PACKAGE_KEYS = frozenset({INJECTED_KEY, PACKAGE_NOTE, "id"})

#: ``namespace=``: a fixed namespace, or ``callable(callback_context) -> namespace``.
NamespaceLike = Any


def session_namespace(callback_context: CallbackContext) -> tuple[str, str]:
    """The default namespace of a request: ``("memories", session id)``."""
    return (MEMORIES, str(callback_context.session.id))


def _resolve(namespace: NamespaceLike, callback_context: CallbackContext) -> Any:
    if namespace is None:
        return session_namespace(callback_context)
    return namespace(callback_context) if callable(namespace) else namespace


def _text(instruction: Any) -> str | None:
    """A system instruction's text: a string, or a content read as Gemini's one."""
    if instruction is None or isinstance(instruction, str):
        return instruction or None
    document = {SYSTEM_KEYS[1]: instruction.model_dump(mode="json", exclude_none=True)}
    found = request_system(document)
    return "\n".join(read_message(found[1]).texts) or None if found is not None else None


def _tool_schemas(tools: Any) -> list[dict[str, Any]]:
    """The function declarations of a request's tools, as the schemas it sends."""
    out: list[dict[str, Any]] = []
    for tool in tools or ():
        for declaration in getattr(tool, "function_declarations", None) or ():
            out.append(declaration.model_dump(mode="json", exclude_none=True))
    return out


def _as_content(message: Mapping[str, Any]) -> types.Content:
    """A content the reducer wrote (an edited copy, a note, a synthetic response) as a
    ``types.Content``, read from JSON so a ``thought_signature`` is decoded as dumped."""
    kept = {k: v for k, v in message.items() if k not in _PACKAGE_KEYS}
    return types.Content.model_validate_json(json.dumps(kept, ensure_ascii=False))


class _Reduce:
    """The one step both entry points run: reduce ``llm_request.contents`` in place."""

    def __init__(self, reducer: MessageReducer | None, namespace: NamespaceLike) -> None:
        self.reducer = reducer_or_recipe(reducer)
        self.namespace = namespace
        self._seen: Any = None

    def _see(self, llm_request: LlmRequest) -> None:
        config = llm_request.config
        tools = list(config.tools or ()) if config is not None else []
        instruction = config.system_instruction if config is not None else None
        seen = (tuple(map(id, tools)), _text(instruction))
        if seen != self._seen:
            self._seen = seen
            self.reducer.set_request_overhead(tools=_tool_schemas(tools), system_prompt=seen[1])

    async def __call__(self, callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        contents = list(llm_request.contents or ())
        if not contents:
            return
        if self.reducer.config.token_mode:
            self._see(llm_request)
        sent = [c.model_dump(mode="json", exclude_none=True) for c in contents]
        where = _resolve(self.namespace, callback_context)
        result = await self.reducer.areduce(sent, namespace=where)
        warn_once_over_budget(self.reducer, result, where)
        kept = {id(m): c for m, c in zip(sent, contents, strict=True)}
        surviving = result.surviving
        if len(surviving) == len(sent) and all(id(m) in kept for m in surviving):
            return  # nothing pruned or edited: the request goes as ADK built it
        llm_request.contents = [
            kept[id(m)] if id(m) in kept else _as_content(m) for m in surviving
        ]


class ReducingPlugin(BasePlugin):
    """A runner plugin that bounds every model request with a :class:`MessageReducer`.

    Before each request of every agent the runner serves, ``llm_request.contents`` is
    reduced; in token mode the request's tools and system instruction are counted once
    against the budget (again when they change). Without a ``reducer`` it runs
    ``MessageReducer(config=agent_config())``, the agent recipe. Contents the reduce
    left as they were are sent as ADK built them; edited ones (a cleared result, a turn
    note) are new ``types.Content`` objects. The session's events are never changed.

    Example:
        >>> app = App(name="app", root_agent=agent, plugins=[ReducingPlugin()])  # doctest: +SKIP
    """

    def __init__(
        self,
        reducer: MessageReducer | None = None,
        *,
        namespace: NamespaceLike = None,
        name: str = "agentstate_reducer",
    ) -> None:
        super().__init__(name)
        self._reduce = _Reduce(reducer, namespace)

    @property
    def reducer(self) -> MessageReducer:
        """The reducer run before each model request."""
        return self._reduce.reducer

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        await self._reduce(callback_context, llm_request)
        return None


def reducing_before_model_callback(
    reducer: MessageReducer | None = None, *, namespace: NamespaceLike = None
) -> Callable[..., Any]:
    """An agent's ``before_model_callback`` that reduces each request's contents.

    The same reduction as :class:`ReducingPlugin`, for one ``LlmAgent``.

    Args:
        reducer: the reducer run before each model request; ``None`` for
            ``MessageReducer(config=agent_config())``, the agent recipe.
        namespace: where pruned contents go: a value, ``callable(callback_context)``, or
            ``None`` for :func:`session_namespace`.

    Example:
        >>> agent = LlmAgent(name="a", model=model,                        # doctest: +SKIP
        ...                  before_model_callback=reducing_before_model_callback())
    """
    step = _Reduce(reducer, namespace)

    async def before_model_callback(
        *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        await step(callback_context, llm_request)
        return None

    before_model_callback.reducer = step.reducer  # type: ignore[attr-defined]
    return before_model_callback
