"""The effects the core yields (summarise this batch, hand that batch to a hook) and the two
drivers that run them: :func:`_drive` calls each, :func:`_adrive` awaits each (any flow of
steps with ``call`` and ``acall``: a :class:`_Call` drives the LangGraph saver's writes and
a refused request's retry the same way)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator
from typing import Any, NamedTuple, Protocol, TypeVar, cast

from ..config import ReducerResult, RememberFn, SummarizeFn
from ..errors import ConfigTypeError
from ..summary import Summarizer, _closed_awaitable


class _Refused(ConfigTypeError):
    """An async callable met the sync :meth:`MessageReducer.reduce`: never a failed summary
    or a skipped hook, always raised."""


def _refuse_awaitable(value: object, name: str) -> None:
    """reduce() cannot await: close the awaitable and say so."""
    if _closed_awaitable(value):
        raise _Refused(
            f"{name} returned an awaitable; call 'await reducer.areduce(...)' instead"
        )


# -- effects and their drivers -------------------------------------------------------


class _Summarise(NamedTuple):
    """Effect: the reply of ``fn`` to a copy of ``batch``."""

    fn: SummarizeFn
    batch: list[Any]

    def call(self) -> Any:
        reply = self.fn(list(self.batch))
        _refuse_awaitable(reply, "summarize_fn")
        return reply

    async def acall(self) -> Any:
        if isinstance(self.fn, Summarizer):
            return await self.fn.acall(list(self.batch))
        reply = self.fn(list(self.batch))
        return (await reply) if inspect.isawaitable(reply) else reply


class _Hand(NamedTuple):
    """Effect: what ``on_prune[position]`` returns for a copy of ``batch``."""

    position: int
    hook: RememberFn
    batch: list[Any]
    namespace: Any

    def call(self) -> Any:
        got = self.hook(list(self.batch), self.namespace)
        _refuse_awaitable(got, f"on_prune[{self.position}]")
        return got

    async def acall(self) -> Any:
        got = self.hook(list(self.batch), self.namespace)
        return (await got) if inspect.isawaitable(got) else got


class _Call:
    """A step of a flow outside the reduce (a saver's write, a refused request's retry):
    :func:`_drive` calls ``sync(*args, **kwargs)``, :func:`_adrive` awaits
    ``asynchronous(*args, **kwargs)``."""

    __slots__ = ("args", "asynchronous", "kwargs", "sync")

    def __init__(
        self,
        sync: Callable[..., Any],
        asynchronous: Callable[..., Awaitable[Any]],
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self.sync = sync
        self.asynchronous = asynchronous
        self.args = args
        self.kwargs = kwargs

    def call(self) -> Any:
        return self.sync(*self.args, **self.kwargs)

    async def acall(self) -> Any:
        return await self.asynchronous(*self.args, **self.kwargs)


def _blocking(fn: Callable[..., Any], *args: Any) -> _Call:
    """``fn(*args)``, which blocks: the async driver runs it in a worker thread."""

    async def in_thread(*given: Any) -> Any:
        return await asyncio.to_thread(fn, *given)

    return _Call(fn, in_thread, *args)


_Effect = _Summarise | _Hand
#: The core of a reduce: yields effects, is sent their values, returns the result.
_Flow = Generator[_Effect, Any, ReducerResult[Any]]

_T = TypeVar("_T")


class _Step(Protocol):
    """What a driver runs: :meth:`call` for the sync driver, :meth:`acall` for the async one."""

    def call(self) -> Any: ...

    async def acall(self) -> Any: ...


def _resume(
    flow: Generator[_Step, Any, Any], value: Any = None, error: BaseException | None = None
) -> tuple[bool, Any]:
    """``(True, the result)`` once ``flow`` returns, else ``(False, its next effect)``:
    ``flow`` is sent ``value``, or thrown ``error``."""
    try:
        return False, (flow.send(value) if error is None else flow.throw(error))
    except StopIteration as stop:
        return True, stop.value


def _outcome(call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """``(its value, None)`` of ``call()``, or ``(None, its error)``."""
    try:
        return call(), None
    except BaseException as exc:
        return None, exc


async def _aoutcome(call: Callable[[], Awaitable[Any]]) -> tuple[Any, BaseException | None]:
    """:func:`_outcome`, awaiting ``call()``."""
    try:
        return await call(), None
    except BaseException as exc:
        return None, exc


def _drive(flow: Generator[_Step, Any, _T]) -> _T:
    """The sync driver: run each effect; send back its value, or throw in its error
    (the core decides what an error means, and what propagates)."""
    done, got = _resume(flow)
    while not done:
        done, got = _resume(flow, *_outcome(got.call))
    return cast("_T", got)


async def _adrive(flow: Generator[_Step, Any, _T]) -> _T:
    """The async driver: :func:`_drive`, awaiting each effect."""
    done, got = _resume(flow)
    while not done:
        done, got = _resume(flow, *await _aoutcome(got.acall))
    return cast("_T", got)
