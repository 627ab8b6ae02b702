"""OpenAI Agents SDK: bound what each model call is sent, and what a session stores.

Needs the extra: ``pip install "agentstate-reducer[openai-agents]"``.

* :func:`reducing_input_filter` is a ``RunConfig(call_model_input_filter=...)``: before
  every model call it reduces the input items the SDK is about to send (the session's
  history, the new input and everything the run produced so far).
* :class:`RecoveringModel` wraps the agent's model: a request the provider refuses as
  too large, or for a reasoning signature, is sent once more, reduced or stripped.
* :class:`ReducingSession` wraps any session (``SQLiteSession``, your own): each time the
  SDK adds items, the stored history is reduced, and the pruned items leave the store.

The items are OpenAI Responses items, read by the package's Responses reader: a model
response (reasoning with the calls and message after it) stays whole, each
``function_call`` keeps its ``function_call_output``. Pruned items reach the reducer's
``on_prune`` hooks (and so an outbox) once each.
"""

from __future__ import annotations

import inspect
import json
import sys
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

try:
    from agents.model_settings import ModelSettings
    from agents.models.interface import Model
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "agentstate_reducer.openai_agents needs the OpenAI Agents SDK; install it with "
        'pip install "agentstate-reducer[openai-agents]"'
    ) from exc

from ._locks import LoopSafeLock
from ._recover import Recovery
from .compaction import OPENAI_RESPONSES, provider_compaction
from .config import ReducerResult
from .errors import ConfigTypeError
from .read import HUMAN, INJECTED_KEY, write_message
from .reducer import MessageReducer, reducer_or_recipe, warn_once_over_budget

__all__ = ("RecoveringModel", "ReducingSession", "compaction_settings", "reducing_input_filter")

#: First label of the default namespace, as the other integrations name it.
MEMORIES = "memories"


def _check(reducer: object) -> MessageReducer:
    if not isinstance(reducer, MessageReducer):
        raise ConfigTypeError(f"reducer must be a MessageReducer, got {reducer!r}")
    return reducer


def _tool_schema(tool: Any) -> dict[str, Any]:
    """An SDK tool as the function schema the model is sent (hosted tools: by name)."""
    return {
        "type": "function",
        "name": getattr(tool, "name", type(tool).__name__),
        "description": getattr(tool, "description", "") or "",
        "parameters": getattr(tool, "params_json_schema", None) or {},
    }


#: Per reducer, the injected items ``ReducingSession.get_items`` sent unmarked: the item
#: as sent (its JSON) -> the item as stored, the latest :data:`_MARKED_SIZE`.
_MARKED: weakref.WeakKeyDictionary[MessageReducer, OrderedDict[str, Any]] = (
    weakref.WeakKeyDictionary()
)
_MARKED_SIZE = 1_000
_to_json = json.JSONEncoder(sort_keys=True, default=str).encode


def _sendable(items: list[Any], reducer: MessageReducer | None = None) -> list[Any]:
    """The items with the package's marker and made-up ids taken off.

    An injected summary block or turn note carries :data:`INJECTED_KEY` (and an id the
    package derived); the Responses API accepts neither key on an input message. With
    ``reducer``, each item sent unmarked is remembered for :func:`_marked_again`.
    """
    out: list[Any] = []
    for item in items:
        if isinstance(item, Mapping) and INJECTED_KEY in item:
            stored = item
            item = {k: v for k, v in item.items() if k not in (INJECTED_KEY, "id")}
            if reducer is not None:
                marked = _MARKED.setdefault(reducer, OrderedDict())
                marked[_to_json(item)] = stored
                marked.move_to_end(_to_json(item))
                while len(marked) > _MARKED_SIZE:
                    marked.popitem(last=False)
        out.append(item)
    return out


def _marked_again(reducer: MessageReducer, items: list[Any]) -> list[Any]:
    """``items`` with each injected item a ``ReducingSession`` on ``reducer`` sent unmarked
    given its marker back: read unmarked, a summary or a turn note would be a message of
    the conversation to the reducer (kept as one, handed to the hooks)."""
    marked = _MARKED.get(reducer)
    if not marked:
        return items
    out = list(items)
    for i, item in enumerate(out):
        if isinstance(item, Mapping) and INJECTED_KEY not in item:
            stored = marked.get(_to_json(item))
            if stored is not None:
                out[i] = stored
    return out


def reducing_input_filter(
    reducer: MessageReducer | None = None, *, namespace: Any = None
) -> Callable[[CallModelData[Any]], Any]:
    """A ``call_model_input_filter`` that reduces the input of every model call.

    The SDK keeps its own list of the run's items and hands the whole of it to the filter
    before each call. When that list is the previous call's input plus new items, the
    filter reduces what it returned last plus the new items, as the other integrations
    reduce their stored state: an item pruned or edited once stays so, the reducer's
    append path reads only the new items, and a ``ReducingSession`` on the same reducer
    sees the same history its store holds (so each item reaches the hooks once, keyed
    alike). Any other input (a new run, another conversation) is reduced whole. In token
    mode the agent's tools and the call's instructions are counted once against the
    budget (again when they change).

    Args:
        reducer: the reducer run before each model call; ``None`` for
            ``MessageReducer(config=agent_config())``, the agent recipe.
        namespace: where pruned items go: a value, or ``callable(data)`` given the SDK's
            ``CallModelData`` (its ``context`` is your run context).

    Example:
        >>> run_config = RunConfig(call_model_input_filter=reducing_input_filter(reducer))
        ...                                                             # doctest: +SKIP
    """
    reducer = reducer_or_recipe(reducer)
    seen: list[Any] = [None]
    #: ``(input, namespace, survivors)`` of the latest call.
    last: list[tuple[list[Any], Any, list[Any]]] = []

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
        items = list(data.model_data.input)
        todo = items
        if last:
            before, at, after = last[0]
            if at == where and len(items) >= len(before) and items[: len(before)] == before:
                todo = [*after, *items[len(before) :]]
        if todo is items:
            todo = _marked_again(reducer, items)
        result = await reducer.areduce(todo, namespace=where)
        last[:] = [(items, where, list(result.surviving))]
        warn_once_over_budget(reducer, result, where)
        return ModelInputData(
            input=_sendable(result.surviving), instructions=data.model_data.instructions
        )

    return reduce_input


def _unchanged(result: ReducerResult[Any], stored: Sequence[Any], new: Sequence[Any]) -> bool:
    """Whether the survivors are exactly ``stored + new``, object for object."""
    surviving = result.surviving
    if len(surviving) != len(stored) + len(new):
        return False
    return all(a is b for a, b in zip(surviving, [*stored, *new], strict=True))


_HISTORY_METHODS = ("get_items", "add_items", "pop_item", "clear_session")
#: The wrapper's own attributes (set on it, never on the inner session).
_OWN = frozenset({"session", "reducer", "namespace"})
#: The limit asked for to read every item when the inner session's settings set one.
_NO_LIMIT = sys.maxsize
_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _parameters(method: Any) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError, RuntimeError):
        return None


def _accepts_wrapper(session: Any) -> bool:
    """Whether every history method takes ``wrapper`` by keyword (the SDK's opt-in)."""
    for name in _HISTORY_METHODS:
        params = _parameters(getattr(session, name, None))
        if params is None or not any(p.name == "wrapper" and p.kind in _NAMED for p in params):
            return False
    return True


def _takes(method: Any, name: str) -> bool:
    """Whether ``method`` takes ``name`` by keyword (yes when it cannot be inspected)."""
    params = _parameters(method)
    if params is None:
        return True
    return any(
        (p.name == name and p.kind in _NAMED) or p.kind is inspect.Parameter.VAR_KEYWORD
        for p in params
    )


def _latest(items: list[Any], limit: int) -> list[Any]:
    """The latest ``limit`` items, as ``SQLiteSession`` reads them (a negative: all)."""
    if limit < 0:
        return items
    return items[len(items) - limit :] if limit else []


async def _call(method: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Call a session method; await the result when it is awaitable, as the SDK does."""
    result = method(*args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


class ReducingSession:
    """A session that keeps what it stores within the reducer's window.

    Wraps any object following the SDK's ``Session`` protocol and behaves as it does:
    ``add_items`` reduces the stored items together with the new ones; when nothing is
    pruned it only adds the new items, else it hands the pruned ones to the hooks and
    rewrites the store with the survivors (``clear_session`` then ``add_items``). Reads,
    ``pop_item`` and ``clear_session`` go to the inner session, and so does every other
    public attribute and method (``close()``, ``session_settings``, ``run_compaction``,
    your own), read or set; names starting with ``_`` are not forwarded, since a private
    hook of the inner session (a compaction snapshot, say) would bypass the reducer.

    The SDK's context protocol passes through: when every history method of the inner
    session takes ``wrapper``, each call hands it the run's ``RunContextWrapper``, so a
    scoped (per-tenant) store keeps its scope. Give ``namespace`` a callable then, so
    the pruned items of each scope go to their own namespace.

    One lock, shared by every event loop and thread, serialises the calls on one wrapper
    without blocking a loop while it waits: concurrent adds from threads and loops never
    interleave with a rewrite, and a read never sees the store half rewritten.

    Pruned items go to the hooks under ``namespace``, default ``("memories",
    session_id)``, or ``namespace(wrapper)`` when it is callable (``wrapper`` is the
    call's ``RunContextWrapper``, ``None`` outside a run). The hooks run before the store
    is rewritten: an item is never dropped from the store before it was handed over, and
    if the rewrite fails the next add prunes it again, which the reducer's ledger does
    not hand over twice.

    Without a ``reducer`` it runs ``MessageReducer(config=agent_config())``, the agent
    recipe. The SDK sends the model the session's items plus what the current run
    produced; to bound that too, give the run :func:`reducing_input_filter` as well.

    Example:
        >>> session = ReducingSession(SQLiteSession("user-42"), reducer)   # doctest: +SKIP
        >>> await Runner.run(agent, "hello", session=session)
    """

    #: The wrapped session, which holds the items.
    session: Any
    #: The reducer run on every ``add_items``.
    reducer: MessageReducer
    #: Where pruned items go: a value, or ``callable(wrapper)``.
    namespace: Any

    def __init__(
        self, session: Any, reducer: MessageReducer | None = None, *, namespace: Any = None
    ) -> None:
        for method in _HISTORY_METHODS:
            if not callable(getattr(session, method, None)):
                raise ConfigTypeError(
                    f"session must follow the Agents SDK Session protocol (no {method}()), "
                    f"got {session!r}"
                )
        self.session = session
        self.reducer = reducer_or_recipe(reducer)
        self.namespace = (MEMORIES, str(session.session_id)) if namespace is None else namespace
        self._reducing_lock = LoopSafeLock()

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the wrapper itself lacks.
        inner = self.__dict__.get("session")
        if inner is None or name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or name in _OWN or hasattr(type(self), name):
            object.__setattr__(self, name, value)
        else:
            setattr(self.session, name, value)

    def __delattr__(self, name: str) -> None:
        if name.startswith("_") or name in _OWN or name in self.__dict__:
            object.__delattr__(self, name)
        else:
            delattr(self.session, name)

    @property
    def session_id(self) -> str:
        return str(self.session.session_id)

    @session_id.setter
    def session_id(self, value: str) -> None:
        self.session.session_id = value

    @property
    def session_settings(self) -> Any:
        return getattr(self.session, "session_settings", None)

    @session_settings.setter
    def session_settings(self, value: Any) -> None:
        self.session.session_settings = value

    def _scope(self, wrapper: Any) -> dict[str, Any]:
        """The ``wrapper`` keyword for the inner session, if it opted into the protocol."""
        if wrapper is None or not _accepts_wrapper(self.session):
            return {}
        return {"wrapper": wrapper}

    async def _read(self, limit: int | None, scope: dict[str, Any]) -> list[Any]:
        get_items = self.session.get_items
        if limit is None:
            return list(await _call(get_items, **scope))
        if _takes(get_items, "limit"):
            return list(await _call(get_items, limit=limit, **scope))
        items = list(await _call(get_items, **scope))
        return _latest(items, limit)

    async def _read_all(self, scope: dict[str, Any]) -> list[Any]:
        """Every stored item, whatever limit the inner session's settings set."""
        settings = getattr(self.session, "session_settings", None)
        if getattr(settings, "limit", None) is None or not _takes(self.session.get_items, "limit"):
            return list(await _call(self.session.get_items, **scope))
        return list(await _call(self.session.get_items, limit=_NO_LIMIT, **scope))

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Any]:
        """The stored items (the latest ``limit`` when given), as the model may be sent them.

        ``limit`` reaches the inner session only when given and only if its ``get_items``
        takes one; otherwise the latest items are cut here. An injected summary is stored
        with its marker, so a later reduce folds it; the items read here carry no marker.
        """
        async with self._reducing_lock:
            items = await self._read(limit, self._scope(wrapper))
        return _sendable(items, self.reducer)

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        """Add ``items``, then prune the stored history down to the reducer's window."""
        if not isinstance(items, (list, tuple)):
            raise ConfigTypeError(
                f"add_items(items): items must be a list of items, got a {type(items).__name__}"
            )
        new = list(items)
        scope = self._scope(wrapper)
        where = self.namespace(wrapper) if callable(self.namespace) else self.namespace
        async with self._reducing_lock:
            stored = await self._read_all(scope)
            result = await self.reducer.areduce(stored, new, namespace=where)
            warn_once_over_budget(self.reducer, result, self.session_id)
            if _unchanged(result, stored, new):
                await _call(self.session.add_items, new, **scope)
                return
            await _call(self.session.clear_session, **scope)
            await _call(self.session.add_items, list(result.surviving), **scope)

    async def pop_item(self, *, wrapper: Any = None) -> Any:
        """Remove and return the latest item (inner session)."""
        async with self._reducing_lock:
            return await _call(self.session.pop_item, **self._scope(wrapper))

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Remove every item (inner session)."""
        async with self._reducing_lock:
            await _call(self.session.clear_session, **self._scope(wrapper))

    async def __aenter__(self) -> ReducingSession:
        enter = getattr(type(self.session), "__aenter__", None)
        if enter is None:
            raise ConfigTypeError(f"{self.session!r} does not support 'async with'")
        await enter(self.session)
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await type(self.session).__aexit__(self.session, *exc_info)

    def __repr__(self) -> str:
        return f"ReducingSession({self.session!r}, {self.reducer!r})"


def _items(input: Any) -> list[Any]:
    """The SDK's input as items (a string is one user message, as the SDK reads it)."""
    return [write_message(HUMAN, input)] if isinstance(input, str) else list(input)


class RecoveringModel(Model):
    """An SDK ``Model`` that sends a refused request once more, reduced or stripped.

    When ``model`` raises a context-length error (OpenAI ``context_length_exceeded``,
    HTTP 413, the other providers' equivalents), the input is reduced again with
    ``reducer`` at a smaller budget (the thread's ceiling is lowered, so the
    :func:`reducing_input_filter` under the same ``namespace`` keeps under it from then
    on); when it rejects a reasoning signature, the input goes without the reasoning of
    earlier turns. A second refusal raises the provider's own error (see
    :class:`~agentstate_reducer.Recovery`). Streaming retries only when the stream fails
    before its first event.

    Example:
        >>> agent = Agent(name="a", model=RecoveringModel(OpenAIResponsesModel(...), reducer))
        ...                                                             # doctest: +SKIP
    """

    def __init__(self, model: Model, reducer: MessageReducer, *, namespace: Any = None) -> None:
        if not isinstance(model, Model):
            raise ConfigTypeError(f"model must be an Agents SDK Model, got {model!r}")
        #: The model that serves the requests.
        self.model = model
        #: The reducer a refusal lowers the budget of.
        self.reducer = _check(reducer)
        self.namespace = namespace
        #: Retries after a provider's refusal.
        self.recovery = Recovery(self.reducer, finish=lambda r: _sendable(r.surviving))

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> Any:
        return await self.recovery.acall(
            _items(input),
            lambda sent: self.model.get_response(system_instructions, sent, *args, **kwargs),
            namespace=self.namespace,
        )

    def stream_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        return self._stream(system_instructions, _items(input), args, kwargs)

    async def _stream(
        self, system: str | None, items: list[Any], args: Any, kwargs: Any
    ) -> AsyncIterator[Any]:
        sent = self.recovery.prepare(items, self.namespace)
        events = self.model.stream_response(system, sent, *args, **kwargs).__aiter__()
        try:
            first = await events.__anext__()
        except StopAsyncIteration:
            return
        except Exception as exc:
            retry = await self.recovery.aretry_messages(sent, exc, self.namespace)
            if retry is None:
                raise
        else:
            yield first
            async for event in events:
                yield event
            return
        self.recovery.retries += 1
        try:
            async for event in self.model.stream_response(system, retry, *args, **kwargs):
                yield event
        except Exception:
            self.recovery.failed_retries += 1
            raise

    def get_retry_advice(self, request: Any) -> Any:
        return self.model.get_retry_advice(request)

    async def close(self) -> None:
        await self.model.close()

    def __repr__(self) -> str:
        return f"RecoveringModel({self.model!r}, {self.reducer!r})"


def compaction_settings(
    reducer: MessageReducer | None = None, *, threshold: int | None = None
) -> ModelSettings:
    """``ModelSettings(context_management=...)`` asking the Responses API to compact below
    ``reducer``'s ``max_tokens`` (:func:`~agentstate_reducer.compaction.provider_compaction`);
    give it to ``Agent(model_settings=...)`` or ``RunConfig(model_settings=...)`` next to
    :class:`ReducingSession` / :func:`reducing_input_filter` on the same reducer, which stay
    the fallback. The reply's ``compaction`` item is the reader's boundary. Responses models
    only: the SDK's ``context_management`` setting is the Responses API's.

    Example:
        >>> agent = Agent(..., model_settings=compaction_settings(reducer))  # doctest: +SKIP
    """
    reducer = reducer_or_recipe(reducer)
    params = provider_compaction(reducer.config, OPENAI_RESPONSES, threshold=threshold)
    return ModelSettings(context_management=params["context_management"])
