"""SIGTERM and SIGINT during `tetherbed run`: stop everything started, then report.

A CI cancel or `timeout` sends SIGTERM, a person presses Ctrl-C. Either way the
hub, agents, proxies and containers the run started must go, and what was
recorded so far must reach the report. So while `StopSignals` is active, the
first signal does not kill the runner: it cancels the scenario in progress,
whose own teardown then stops every part it started, and the runner writes the
partial report and exits with 128 + the signal's number. Further signals while
it cleans up only say that it is doing so.

The handlers are plain `signal.signal` handlers, not the event loop's, because
the backends run different loops (virtual time, uvloop) one after another;
from the handler, the scenario's task is cancelled through its loop's
thread-safe entry.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Coroutine
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(Exception):
    """The scenario was stopped by a signal; its parts have been torn down."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


class StopSignals:
    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> StopSignals:
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    @property
    def name(self) -> str:
        return signal.Signals(self.received).name if self.received else ""

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            print("tetherbed run: still stopping what the run started ...", file=sys.stderr)
            return
        self.received = signum
        task, loop = self._task, self._loop
        if task is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)

    async def guard(self, main: Coroutine[Any, Any, T]) -> T:
        """Run one scenario's main coroutine so that a signal cancels it."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        try:
            if self.received is not None:
                main.close()
                raise Interrupted(self.received)
            return await main
        except asyncio.CancelledError:
            if self.received is None:
                raise
            raise Interrupted(self.received) from None
        finally:
            self._task = self._loop = None
