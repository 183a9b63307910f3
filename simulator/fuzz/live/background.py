"""An asyncio loop on its own thread, for Hypothesis's synchronous tests to drive.

Hypothesis calls a plain function per example; the peers Tetherbed plays (the
native adapter's caller, raw agents, the scripted platform) are asyncio code. The
loop lives for the whole run, so connections and processes outlive one example.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coroutine` on the loop and wait for its result (TimeoutError past `timeout`)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self.loop.is_running():
            self.loop.close()


class OnBackgroundLoop:
    """A live target whose peers run on a BackgroundLoop: one it was lent (by a run
    that shares it), or its own, which it closes when it stops."""

    def __init__(self, loop: BackgroundLoop | None) -> None:
        self.loop = loop or BackgroundLoop()
        self._own_loop = loop is None

    def stop(self) -> None:
        """Run `_stop` on the loop (a failure there still closes the loop), then close
        the loop if it is this target's own."""
        with contextlib.suppress(Exception):
            self.loop.run(self._stop(), 60)
        self._close_own_loop()

    async def _stop(self) -> None:
        """What stopping ends: processes, connections, servers."""

    def _close_own_loop(self) -> None:
        if self._own_loop:
            self.loop.close()


def as_sent(data: bytes) -> str | bytes:
    """What goes on a WebSocket: a text message when the bytes are UTF-8 (as the spec
    sends every frame), a binary one when they are not (no text message can carry them)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data
