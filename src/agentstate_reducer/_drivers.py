"""One core, two drivers: a flow is a generator that yields steps (each with ``call`` and
``acall``) and is sent their values; :func:`_drive` calls each step, :func:`_adrive`
awaits each, so the sync and async twins of a flow differ only in the driver. The reduce
core yields its effects (``reducing/effects.py``); the LangGraph saver's writes, the TTL
sweeper, the relay, the recovery and the summariser yield :class:`_Call` steps."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Protocol, TypeVar, cast

_T = TypeVar("_T")


class _Step(Protocol):
    """What a driver runs: :meth:`call` for the sync driver, :meth:`acall` for the async one."""

    def call(self) -> Any: ...

    async def acall(self) -> Any: ...


def _resume(
    flow: Generator[_Step, Any, Any], value: Any = None, error: BaseException | None = None
) -> tuple[bool, Any]:
    """``(True, the result)`` once ``flow`` returns, else ``(False, its next step)``:
    ``flow`` is sent ``value``, or thrown ``error``."""
    try:
        return False, (flow.send(value) if error is None else flow.throw(error))
    except StopIteration as stop:
        return True, stop.value
    except RuntimeError as exc:
        # A step's StopIteration the flow let through: Python (PEP 479) re-raised it as
        # this RuntimeError; the caller gets the step's own error, as a call would give.
        if not (isinstance(error, StopIteration) and exc.__cause__ is error
                and exc.args == ("generator raised StopIteration",)):
            raise
    raise error


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
    """The sync driver: run each step; send back its value, or throw in its error
    (the flow decides what an error means, and what propagates).

    An error outside both (a Ctrl-C between a step's return and the flow's resumption)
    closes the flow before it propagates: its own cleanup (a batch handed back to the
    ledger) runs then, not whenever the traceback that holds it is freed."""
    try:
        done, got = _resume(flow)
        while not done:
            done, got = _resume(flow, *_outcome(got.call))
    except BaseException:
        flow.close()  # a flow that already ended (it raised this error): nothing to do
        raise
    return cast("_T", got)


async def _adrive(flow: Generator[_Step, Any, _T]) -> _T:
    """The async driver: :func:`_drive`, awaiting each step."""
    try:
        done, got = _resume(flow)
        while not done:
            done, got = _resume(flow, *await _aoutcome(got.acall))
    except BaseException:
        flow.close()
        raise
    return cast("_T", got)


class _Call:
    """A step: :func:`_drive` calls ``sync(*args, **kwargs)``, :func:`_adrive` awaits
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
