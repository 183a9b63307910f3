"""An asyncio loop on its own thread, for Hypothesis's synchronous tests to drive.

Hypothesis calls a plain function per example; the peers Tetherbed plays (the
native adapter's caller, raw agents, the scripted platform) are asyncio code. The
loop lives for the whole run, so connections and processes outlive one example.
"""

from __future__ import annotations

import asyncio
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


def as_sent(data: bytes) -> str | bytes:
    """What goes on a WebSocket: a text message when the bytes are UTF-8 (as the spec
    sends every frame), a binary one when they are not (no text message can carry them)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data
