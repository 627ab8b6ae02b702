"""The effects the reduce core yields (summarise this batch, hand that batch to a hook);
:func:`~agentstate_reducer._drivers._drive` calls each, ``_adrive`` awaits each."""

from __future__ import annotations

import inspect
from collections.abc import Generator
from typing import Any, NamedTuple

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


_Effect = _Summarise | _Hand
#: The core of a reduce: yields effects, is sent their values, returns the result.
_Flow = Generator[_Effect, Any, ReducerResult[Any]]
