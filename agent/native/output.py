"""The bounded output queue to the preserved stdout descriptor.

At most 64 messages and 8 MiB wait; a producer beyond that waits for space, which
in turn stops the stdin reader (backpressure instead of memory growth). A writer
thread writes in 64 KiB slices and records progress; when the pipe accepts nothing
for 10 s while output waits, `on_stall` ends the process, as the spec demands.
Blocking writes on a thread work for pipes, files and terminals alike.

When the caller closes its end of stdout, `on_closed` is called: at the first
write that fails (EPIPE), or, with nothing to write, when the watchdog sees the
descriptor report an error (a pipe whose reader is gone polls POLLERR). The
adapter then ends as on EOF: nobody can receive an answer any more.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: How often the watchdog looks at progress and at the descriptor.
WATCH_SECONDS = 0.5
MAX_MESSAGES = 64
MAX_BYTES = 8 * 1024 * 1024
STALL_SECONDS = 10.0
SLICE = 65536


@dataclass(slots=True)
class OutputBudget:
    """Sans-I/O accounting: may a message of `size` bytes be queued now?"""

    max_messages: int = MAX_MESSAGES
    max_bytes: int = MAX_BYTES
    messages: int = 0
    bytes: int = 0

    def fits(self, size: int) -> bool:
        if self.messages == 0:
            return True  # one oversized message may always go alone
        return self.messages < self.max_messages and self.bytes + size <= self.max_bytes

    def add(self, size: int) -> None:
        self.messages += 1
        self.bytes += size

    def remove(self, size: int) -> None:
        self.messages -= 1
        self.bytes -= size


class OutputQueue:
    def __init__(
        self,
        fd: int,
        *,
        on_stall: Callable[[], None],
        on_closed: Callable[[], None] = lambda: None,
        stall_seconds: float = STALL_SECONDS,
        budget: OutputBudget | None = None,
    ) -> None:
        self._fd = fd
        self._on_stall = on_stall
        self._on_closed = on_closed
        self._reader_gone = _reader_probe(fd)
        self._stall_seconds = stall_seconds
        self._budget = budget or OutputBudget()
        self._queue: collections.deque[bytes] = collections.deque()
        self._cond = threading.Condition()
        self._writing = False
        self._closed = False
        self._broken = False
        self.last_progress = time.monotonic()
        self._loop = asyncio.get_running_loop()
        self._space = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._thread = threading.Thread(target=self._run, name="native-stdout", daemon=True)
        self._thread.start()
        self._watchdog = asyncio.create_task(self._watch())

    @property
    def broken(self) -> bool:
        return self._broken

    async def put(self, data: bytes) -> None:
        while True:
            with self._cond:
                if self._broken or self._closed:
                    return  # nobody reads any more; the answer has nowhere to go
                if self._budget.fits(len(data)):
                    if not self._queue and not self._writing:
                        self.last_progress = time.monotonic()
                    self._budget.add(len(data))
                    self._queue.append(data)
                    self._idle.clear()
                    self._cond.notify()
                    return
                self._space.clear()
            await self._space.wait()

    async def flush(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), seconds)
        return self._idle.is_set()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._watchdog.cancel()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                data = self._queue[0]
                self._writing = True
            try:
                view = memoryview(data)
                while view:
                    written = os.write(self._fd, view[:SLICE])
                    view = view[written:]
                    self.last_progress = time.monotonic()
            except OSError:
                with self._cond:
                    self._broken = True
                    self._queue.clear()
                    self._writing = False
                self._notify()
                return
            with self._cond:
                self._queue.popleft()
                self._budget.remove(len(data))
                self._writing = False
            self._notify()

    def _notify(self) -> None:
        def wake() -> None:
            self._space.set()
            with self._cond:
                idle = not self._queue and not self._writing
            if idle:
                self._idle.set()

        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(wake)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            with self._cond:
                waiting = bool(self._queue) or self._writing
                broken = self._broken
            if broken or self._reader_gone():
                self._on_closed()
                return
            if waiting and time.monotonic() - self.last_progress > self._stall_seconds:
                self._on_stall()
                return


def _reader_probe(fd: int) -> Callable[[], bool]:
    """A check, cheap and non-blocking, of whether the other end of `fd` is gone."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    gone = select.POLLERR | select.POLLHUP | select.POLLNVAL

    def reader_gone() -> bool:
        return any(events & gone for _, events in poller.poll(0))

    return reader_gone
