"""The capture thread: samples the selected display and publishes into the FrameStore.

It runs at the quality preset's frame rate while video viewers or waiting requests
need it, and at an idle rate otherwise, so that an idle adapter costs little CPU
but its latest frame is never near the two-second staleness limit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tetherbed.agent.native.frames import FrameStore
from tetherbed.agent.native.observations import Rect

log = logging.getLogger(__name__)
IDLE_INTERVAL_S = 0.25


class CaptureLoop:
    def __init__(
        self,
        capture: Any,  # desktop.capture.ScreenCapture
        store: FrameStore,
        *,
        fps: float,
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        self._capture = capture
        self._store = store
        self._interval = 1.0 / fps
        self._busy = busy
        self._monitor = 0
        self._generation = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="native-capture", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def select(self, monitor: int, generation: int) -> None:
        """Capture `monitor` for `generation` from the next sample on."""
        self._monitor, self._generation = monitor, generation
        self._wake.set()

    def kick(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        last = float("-inf")
        while not self._stop.is_set():
            fast = self._busy() or self._store.demanded()
            delay = last + (self._interval if fast else IDLE_INTERVAL_S) - time.monotonic()
            if delay > 0 and self._wake.wait(delay):
                self._wake.clear()  # kicked: someone waits for a fresh frame, sample now
            if self._stop.is_set():
                break
            last = time.monotonic()
            monitor, generation = self._monitor, self._generation
            try:
                frame = self._capture.grab(monitor)
            except Exception as exc:  # a display that vanished must not kill the thread
                log.warning("capture of monitor %d failed: %s", monitor, exc)
                self._store.capture_failed()
                last += 0.5
                continue
            rect = Rect(frame.left, frame.top, frame.width, frame.height)
            self._store.publish(generation, frame, rect, time.monotonic())
