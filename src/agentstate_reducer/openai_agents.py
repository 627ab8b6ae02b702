"""OpenAI Agents SDK: bound what each model call is sent, and what a session stores.

Needs the extra: ``pip install "agentstate-reducer[openai-agents]"``.

* :func:`reducing_input_filter` is a ``RunConfig(call_model_input_filter=...)``: before
  every model call it reduces the input items the SDK is about to send (the session's
  history, the new input and everything the run produced so far).
* :class:`ReducingSession` wraps any session (``SQLiteSession``, your own): each time the
  SDK adds items, the stored history is reduced, and the pruned items leave the store.

The items are OpenAI Responses items, read by the package's Responses reader: a model
response (reasoning with the calls and message after it) stays whole, each
``function_call`` keeps its ``function_call_output``. Pruned items reach the reducer's
``on_prune`` hooks (and so an outbox) once each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

try:
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "agentstate_reducer.openai_agents needs the OpenAI Agents SDK; install it with "
        'pip install "agentstate-reducer[openai-agents]"'
    ) from exc

from .config import ReducerResult
from .messages import INJECTED_KEY
from .reducer import MessageReducer, warn_once_over_budget

__all__ = ("ReducingSession", "reducing_input_filter")

#: First label of the default namespace, as the other integrations name it.
MEMORIES = "memories"


def _check(reducer: object) -> MessageReducer:
    if not isinstance(reducer, MessageReducer):
        raise TypeError(f"reducer must be a MessageReducer, got {reducer!r}")
    return reducer


def _tool_schema(tool: Any) -> dict[str, Any]:
    """An SDK tool as the function schema the model is sent (hosted tools: by name)."""
    return {
        "type": "function",
        "name": getattr(tool, "name", type(tool).__name__),
        "description": getattr(tool, "description", "") or "",
        "parameters": getattr(tool, "params_json_schema", None) or {},
    }


def _sendable(items: list[Any]) -> list[Any]:
    """The items with the package's summary marker and made-up ids taken off.

    An injected summary block is two messages carrying :data:`INJECTED_KEY` (and ids the
    package derived); the Responses API accepts neither key on an input message.
    """
    out: list[Any] = []
    for item in items:
        if isinstance(item, Mapping) and INJECTED_KEY in item:
            item = {k: v for k, v in item.items() if k not in (INJECTED_KEY, "id")}
        out.append(item)
    return out


def reducing_input_filter(
    reducer: MessageReducer, *, namespace: Any = None
) -> Callable[[CallModelData[Any]], Any]:
    """A ``call_model_input_filter`` that reduces the input of every model call.

    The SDK keeps its own list of the run's items and hands the whole of it to the filter
    before each call, so the same old items are pruned again on every call: the reducer's
    ledger hands each to the hooks once. In token mode the agent's tools and the call's
    instructions are counted once against the budget (again when they change).

    Args:
        reducer: the reducer run before each model call.
        namespace: where pruned items go: a value, or ``callable(data)`` given the SDK's
            ``CallModelData`` (its ``context`` is your run context).

    Example:
        >>> run_config = RunConfig(call_model_input_filter=reducing_input_filter(reducer))
        ...                                                             # doctest: +SKIP
    """
    _check(reducer)
    seen: list[Any] = [None]

    def count_overhead(data: CallModelData[Any]) -> None:
        tools = list(getattr(data.agent, "tools", ()) or ())
        key = (tuple(map(id, tools)), data.model_data.instructions)
        if key != seen[0]:
            seen[0] = key
            reducer.set_request_overhead(
                tools=[_tool_schema(t) for t in tools],
                system_prompt=data.model_data.instructions,
            )

    async def reduce_input(data: CallModelData[Any]) -> ModelInputData:
        if reducer.config.token_mode:
            count_overhead(data)
        where = namespace(data) if callable(namespace) else namespace
        result = await reducer.areduce(list(data.model_data.input), namespace=where)
        warn_once_over_budget(reducer, result, where)
        return ModelInputData(
            input=_sendable(result.surviving), instructions=data.model_data.instructions
        )

    return reduce_input


def _unchanged(result: ReducerResult, stored: Sequence[Any], new: Sequence[Any]) -> bool:
    """Whether the survivors are exactly ``stored + new``, object for object."""
    surviving = result.surviving
    if len(surviving) != len(stored) + len(new):
        return False
    return all(a is b for a, b in zip(surviving, [*stored, *new], strict=True))


class ReducingSession:
    """A session that keeps what it stores within the reducer's window.

    Wraps any object following the SDK's ``Session`` protocol. ``add_items`` reduces
    the stored items together with the new ones; when nothing is pruned it only adds the
    new items, else it hands the pruned ones to the hooks and rewrites the store with the
    survivors (``clear_session`` then ``add_items``, under a lock, so concurrent adds
    never interleave). Reads, ``pop_item`` and ``clear_session`` go to the inner session.

    Pruned items go to the hooks under ``namespace``, default ``("memories",
    session_id)``. The hooks run before the store is rewritten: an item is never dropped
    from the store before it was handed over, and if the rewrite fails the next add
    prunes it again, which the reducer's ledger does not hand over twice.

    The SDK sends the model the session's items plus what the current run produced; to
    bound that too, give the run :func:`reducing_input_filter` as well.

    Example:
        >>> session = ReducingSession(SQLiteSession("user-42"), reducer)   # doctest: +SKIP
        >>> await Runner.run(agent, "hello", session=session)
    """

    def __init__(self, session: Any, reducer: MessageReducer, *, namespace: Any = None) -> None:
        for method in ("get_items", "add_items", "pop_item", "clear_session"):
            if not callable(getattr(session, method, None)):
                raise TypeError(
                    f"session must follow the Agents SDK Session protocol (no {method}()), "
                    f"got {session!r}"
                )
        #: The wrapped session, which holds the items.
        self.session = session
        #: The reducer run on every ``add_items``.
        self.reducer = _check(reducer)
        self.namespace = (MEMORIES, str(session.session_id)) if namespace is None else namespace
        self._lock = asyncio.Lock()

    @property
    def session_id(self) -> str:
        return str(self.session.session_id)

    @property
    def session_settings(self) -> Any:
        return getattr(self.session, "session_settings", None)

    @session_settings.setter
    def session_settings(self, value: Any) -> None:
        self.session.session_settings = value

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The stored items (the latest ``limit`` when given), as the model may be sent them.

        An injected summary is stored with its marker, so a later reduce folds it; the
        items read here carry no marker.
        """
        return _sendable(list(await self.session.get_items(limit)))

    async def add_items(self, items: list[Any]) -> None:
        """Add ``items``, then prune the stored history down to the reducer's window."""
        new = list(items)
        async with self._lock:
            stored = list(await self.session.get_items())
            result = await self.reducer.areduce(stored, new, namespace=self.namespace)
            warn_once_over_budget(self.reducer, result, self.session_id)
            if _unchanged(result, stored, new):
                await self.session.add_items(new)
                return
            await self.session.clear_session()
            await self.session.add_items(list(result.surviving))

    async def pop_item(self) -> Any:
        """Remove and return the latest item (inner session)."""
        return await self.session.pop_item()

    async def clear_session(self) -> None:
        """Remove every item (inner session)."""
        await self.session.clear_session()

    def __repr__(self) -> str:
        return f"ReducingSession({self.session!r}, {self.reducer!r})"
