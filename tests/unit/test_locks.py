"""``LoopSafeLock``: one lock for coroutines on any loop, in any thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentstate_reducer._locks import LoopSafeLock, _Waiter


def run_loops(count: int) -> tuple[list[asyncio.AbstractEventLoop], list[threading.Thread]]:
    loops = [asyncio.new_event_loop() for _ in range(count)]
    threads = [threading.Thread(target=loop.run_forever, daemon=True) for loop in loops]
    for thread in threads:
        thread.start()
    return loops, threads


def stop_loops(loops: list[asyncio.AbstractEventLoop], threads: list[threading.Thread]) -> None:
    for loop in loops:
        loop.call_soon_threadsafe(loop.stop)
    for thread in threads:
        thread.join(timeout=5)
    for loop in loops:
        loop.close()


def test_one_holder_at_a_time_across_loops_and_threads() -> None:
    lock = LoopSafeLock()
    inside: list[int] = []
    most = [0]
    counter = [0]

    async def critical() -> None:
        async with lock:
            inside.append(1)
            most[0] = max(most[0], len(inside))
            value = counter[0]
            await asyncio.sleep(0)  # others run meanwhile, on this loop and the others
            counter[0] = value + 1
            inside.pop()

    async def many() -> None:
        await asyncio.gather(*(critical() for _ in range(20)))

    loops, threads = run_loops(4)
    try:
        futures = [asyncio.run_coroutine_threadsafe(many(), loop) for loop in loops]
        extra = [threading.Thread(target=asyncio.run, args=(many(),)) for _ in range(4)]
        for thread in extra:
            thread.start()
        for future in futures:
            future.result(timeout=30)
        for thread in extra:
            thread.join(timeout=30)
    finally:
        stop_loops(loops, threads)
    assert most[0] == 1
    assert counter[0] == 8 * 20
    assert not lock.locked()


async def test_waiters_get_the_lock_in_order() -> None:
    lock = LoopSafeLock()
    order: list[int] = []
    await lock.acquire()

    async def waiter(n: int) -> None:
        async with lock:
            order.append(n)

    tasks = [asyncio.create_task(waiter(n)) for n in range(5)]
    await asyncio.sleep(0)
    lock.release()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]


async def test_a_cancelled_waiter_never_keeps_the_lock() -> None:
    lock = LoopSafeLock()
    await lock.acquire()
    waiting = asyncio.create_task(lock.acquire())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    lock.release()
    assert not lock.locked()


async def test_a_waiter_cancelled_after_the_handover_passes_the_lock_on() -> None:
    lock = LoopSafeLock()
    await lock.acquire()
    first = asyncio.create_task(lock.acquire())
    got: list[str] = []

    async def second() -> None:
        async with lock:
            got.append("second")

    later = asyncio.create_task(second())
    await asyncio.sleep(0)
    lock.release()  # hands the lock to ``first``, whose wake-up is only scheduled
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(later, timeout=5)
    assert got == ["second"] and not lock.locked()


def test_a_waiter_on_a_closed_loop_is_skipped() -> None:
    # A loop closed while one of its tasks still waited: nothing there can take the lock.
    lock = LoopSafeLock()
    loop = asyncio.new_event_loop()
    loop.run_until_complete(lock.acquire())
    dead = asyncio.new_event_loop()
    lock._waiters.append(_Waiter(dead))
    dead.close()
    lock.release()
    assert not lock.locked() and not lock._waiters
    loop.run_until_complete(lock.acquire())
    lock.release()
    loop.close()


def test_release_when_free_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not held"):
        LoopSafeLock().release()
