"""The two drivers of every flow (``_drivers.py``): an error a step raises reaches the
flow, and the caller, as the step raised it."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import pytest

from agentstate_reducer._drivers import _adrive, _Call, _drive


def _raise(error: BaseException) -> Any:
    raise error


async def _araise(error: BaseException) -> Any:
    raise error


def _one_step(error: BaseException) -> Generator[_Call, Any, str]:
    yield _Call(_raise, _araise, error)
    return "never"


def test_a_steps_stopiteration_leaves_the_sync_driver_as_raised() -> None:
    # Not "RuntimeError: generator raised StopIteration" (PEP 479): a step is the
    # caller's code (a Mock whose side_effect ran out raises StopIteration).
    exhausted = StopIteration("no more")
    with pytest.raises(StopIteration) as raised:
        _drive(_one_step(exhausted))
    assert raised.value is exhausted


def test_a_flow_that_handles_a_steps_stopiteration_goes_on() -> None:
    def flow() -> Generator[_Call, Any, str]:
        try:
            yield _Call(_raise, _araise, StopIteration("no more"))
        except StopIteration:
            return "handled"
        return "not raised"

    assert _drive(flow()) == "handled"


def test_a_runtimeerror_a_flow_raises_from_a_stopiteration_is_kept() -> None:
    def flow() -> Generator[_Call, Any, str]:
        try:
            yield _Call(_raise, _araise, StopIteration("no more"))
        except StopIteration as exc:
            raise RuntimeError("the flow's own") from exc
        return "not raised"

    with pytest.raises(RuntimeError, match="the flow's own"):
        _drive(flow())


def test_other_errors_leave_both_drivers_as_raised() -> None:
    for error in (ValueError("v"), KeyboardInterrupt()):
        with pytest.raises(type(error)) as raised:
            _drive(_one_step(error))
        assert raised.value is error
        with pytest.raises(type(error)) as araised:
            asyncio.run(_adrive(_one_step(error)))
        assert araised.value is error


def _cleaned(log: list[str]) -> Generator[_Call, Any, str]:
    try:
        yield _Call(lambda: "one", _aone)
        yield _Call(lambda: "two", _aone)
        return "done"
    finally:
        log.append("cleaned up")


async def _aone() -> str:
    return "one"


def test_a_ctrl_c_between_steps_closes_the_flow_before_it_propagates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Between a step's return and the flow's resumption: the flow is suspended at a
    # yield. Its cleanup must run as the error leaves the driver, not when the traceback
    # that holds its frame is freed (here: kept by pytest.raises).
    from agentstate_reducer import _drivers

    real, areal = _drivers._outcome, _drivers._aoutcome

    def interrupted(call: Any) -> Any:
        real(call)
        raise KeyboardInterrupt

    async def ainterrupted(call: Any) -> Any:
        await areal(call)
        raise KeyboardInterrupt

    monkeypatch.setattr(_drivers, "_outcome", interrupted)
    monkeypatch.setattr(_drivers, "_aoutcome", ainterrupted)
    log: list[str] = []
    with pytest.raises(KeyboardInterrupt) as raised:
        _drive(_cleaned(log))
    assert log == ["cleaned up"]
    with pytest.raises(KeyboardInterrupt) as araised:
        asyncio.run(_adrive(_cleaned(log)))
    assert log == ["cleaned up", "cleaned up"]
    assert raised.traceback and araised.traceback  # still held: the flow ended anyway
