"""Blocking file operations that overlap in virtual time, one system call at a time.

On a real agent each file operation runs in a worker thread, so two requests
in flight interleave at the granularity of system calls: a FILE_READ may open
the old file while a FILE_WRITE to it is still between its fsync and its
rename, a FILE_LIST may see a name that is gone by the time it stats it.
Running each operation inline on the sim loop (what the sim did) makes every
operation atomic and hides those races.

`SteppedCalls.run(fn, *args)` runs `fn` in a worker thread, but never
concurrently with the loop: a profile hook (`sys.setprofile`, in the worker
thread only) stops the worker before each file-system call (`os.open`,
`os.stat`, `os.rename`, ...) and hands control back to the loop, which lets
virtual time pass (a seeded cost per call, fsync the dearest) before running
it to its next call. Exactly one thread runs at a time and every pause is a
virtual-time sleep, so a seed fixes the interleaving of concurrent
operations, byte for byte; different seeds give different interleavings.

If the awaiting task is cancelled (the agent is killed), the worker is
resumed with an exception raised at its pending call, so nothing after the
kill touches the file system (what `finally` blocks do on the way out runs).
"""

from __future__ import annotations

import asyncio
import io
import os
import random
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

#: The calls a worker stops before: every one that reads or changes the file system.
_FILE_SYSTEM_CALLS = (
    os.open, os.read, os.pread, os.write, os.pwrite, os.stat, os.lstat, os.fstat,
    os.listdir, os.scandir, os.rename, os.replace, os.link, os.unlink, os.remove,
    os.rmdir, os.mkdir, os.fsync, os.fchmod, os.chmod, os.readlink, os.symlink,
    os.truncate, os.ftruncate, os.utime, io.open,
)  # fmt: skip
_STOPS = frozenset(id(call) for call in _FILE_SYSTEM_CALLS)
_FSYNC = id(os.fsync)

#: Virtual seconds a system call costs: (low, high) of a seeded uniform draw.
CALL_COST = (5e-6, 50e-6)
#: fsync waits for the disk: from a page-cache file system (cheap) to a busy disk.
FSYNC_COST = (20e-6, 4e-3)


class Abandoned(BaseException):
    """Raised in a worker at its pending call when its task was cancelled."""


class _SteppedCall:
    """One blocking call in a worker thread that runs only when stepped."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._fn = fn
        self._args = args
        self._go = threading.Semaphore(0)
        self._stopped = threading.Semaphore(0)
        self._abandon = False
        self.done = False
        self.pending: int | None = None  # id of the call it stopped before
        self.result: Any = None
        self.error: BaseException | None = None
        threading.Thread(target=self._main, name="sim-file-op", daemon=True).start()

    def _main(self) -> None:
        self._go.acquire()
        sys.setprofile(self._hook)
        try:
            self.result = self._fn(*self._args)
        except BaseException as exc:
            self.error = exc
        finally:
            sys.setprofile(None)
            self.done = True
            self._stopped.release()

    def _hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "c_call" or id(arg) not in _STOPS:
            return
        self.pending = id(arg)
        self._stopped.release()
        self._go.acquire()
        if self._abandon:
            raise Abandoned  # the profile hook is dropped; the worker unwinds freely

    def step(self) -> bool:
        """Run the worker to its next file-system call or its end; True at the end."""
        self._go.release()
        self._stopped.acquire()
        return self.done

    def abandon(self) -> None:
        self._abandon = True
        while not self.step():
            pass


class SteppedCalls:
    """Runs blocking calls so that concurrent ones interleave, seeded, in virtual time."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def cost(self, call: int | None) -> float:
        low, high = FSYNC_COST if call == _FSYNC else CALL_COST
        return self.rng.uniform(low, high)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        call = _SteppedCall(fn, args)
        try:
            while True:
                if call.step():
                    break
                # The call it stopped before takes this long; others run meanwhile.
                await asyncio.sleep(self.cost(call.pending))
        except BaseException:
            if not call.done:
                call.abandon()
            raise
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[no-any-return]
