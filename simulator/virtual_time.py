"""An asyncio event loop that runs in virtual time.

`loop.time()` is a number the loop moves itself: whenever every task is
blocked and nothing is ready, time jumps straight to the next timer. A 60 s
reconnect backoff therefore costs no real time, and since nothing depends on
how fast the machine is, the same program takes the same steps every run.

Work handed to threads (`asyncio.to_thread`, `run_in_executor`) is real and
takes real time; while any is outstanding, virtual time stands still and the
loop waits for it, so a blocking file operation never lets a timer overtake
it. Real sockets and pipes still work, but time does not wait for them: a
program that needs real I/O to arrive "before" a virtual deadline does not
belong in this loop.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")

#: Virtual time starts here, so that wall-clock timestamps look plausible.
EPOCH = 1_700_000_000.0


class _VirtualSelector(selectors.BaseSelector):
    """Wraps a real selector; instead of sleeping, it moves the loop's clock."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop
        self._real = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Any:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        loop = self._loop
        if loop.threads_busy:
            # Real work is running: wait for it in real time, time stands still.
            return self._real.select(None if timeout is None or timeout > 0 else 0)
        events = self._real.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            # Nothing scheduled at all: only real I/O can wake us.
            return self._real.select(None)
        loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._threads_busy = 0
        super().__init__(selector=_VirtualSelector(self))

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds

    @property
    def threads_busy(self) -> int:
        return self._threads_busy

    def run_in_executor(
        self, executor: Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self._threads_busy += 1
        future.add_done_callback(self._thread_done)
        return future

    def _thread_done(self, _future: asyncio.Future[Any]) -> None:
        self._threads_busy -= 1


class VirtualClock:
    """The `Clock` of code running on a VirtualTimeLoop."""

    def __init__(self, loop: VirtualTimeLoop, epoch: float = EPOCH) -> None:
        self._loop = loop
        self._epoch = epoch

    def time(self) -> float:
        return self._epoch + self._loop.time()

    def monotonic(self) -> float:
        return self._loop.time()


def run_virtual(main: Coroutine[Any, Any, T], *, start: float = 0.0) -> T:
    """Run `main` to completion on a fresh VirtualTimeLoop."""
    loop = VirtualTimeLoop(start)
    try:
        return loop.run_until_complete(main)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
