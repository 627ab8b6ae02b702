"""A lock that coroutines on any event loop, in any thread, share without blocking a loop."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from types import TracebackType

__all__ = ("LoopSafeLock",)


class _Waiter:
    __slots__ = ("future", "granted", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.granted = False


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class LoopSafeLock:
    """Mutual exclusion for coroutines, whichever loop and thread each runs on.

    ``asyncio.Lock`` belongs to the loop it is first used on, and a ``threading.Lock``
    held across an ``await`` blocks every other task of the loop that waits for it. Here
    waiters queue in order, each on its own loop: ``release`` hands the lock to the first
    one still waiting and wakes it through its loop's ``call_soon_threadsafe``. A waiter
    cancelled after it was handed the lock passes it on, so cancellation never leaks it.
    Not reentrant.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._held = False
        self._waiters: deque[_Waiter] = deque()

    def locked(self) -> bool:
        """Whether some coroutine holds the lock."""
        return self._held

    async def acquire(self) -> None:
        """Wait until the lock is free, then take it."""
        loop = asyncio.get_running_loop()
        with self._guard:
            if not self._held:
                self._held = True
                return
            waiter = _Waiter(loop)
            self._waiters.append(waiter)
        try:
            await waiter.future
        except BaseException:
            with self._guard:
                granted = waiter.granted
                if not granted:
                    self._waiters.remove(waiter)
            if granted:
                self.release()
            raise

    def release(self) -> None:
        """Hand the lock to the next waiter, or free it."""
        with self._guard:
            if not self._held:
                raise RuntimeError("LoopSafeLock.release(): the lock is not held")
            while self._waiters:
                waiter = self._waiters.popleft()
                waiter.granted = True
                try:
                    waiter.loop.call_soon_threadsafe(_wake, waiter.future)
                except RuntimeError:  # its loop is closed: nobody is left to wake there
                    continue
                return
            self._held = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
