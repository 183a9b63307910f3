"""The latest picture of the connected display, shared by images, status and video.

A new `frame_id` is assigned only when the pixels change; a capture that finds the
same pixels just refreshes `confirmed_at`, so a still screen keeps its id while its
age stays small. That makes `after_frame_id` mean "wait for a different picture".
Thread-safe: the capture thread publishes, the owner loop and encoder read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tetherbed.agent.native.observations import Rect

MAX_FRAME_AGE_S = 2.0


@dataclass(frozen=True, slots=True)
class Picture:
    frame_id: int
    generation: int
    geometry_epoch: int
    frame: Any  # desktop.capture.Frame: BGRA, display-global left/top
    rect: Rect  # the display's global rectangle
    captured_at: float  # monotonic, when these pixels were first seen


Listener = Callable[[Picture], None]


class FrameStore:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._latest: Picture | None = None
        self._confirmed_at = 0.0
        self._next_id = 1
        self.generation = 0
        self.geometry_epoch = 0
        self._listeners: list[Listener] = []
        self._demand_until = 0.0
        self.failures = 0

    def subscribe(self, listener: Listener) -> None:
        """Called on the capture thread for every new picture; must not block."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def new_generation(self, generation: int) -> None:
        with self._lock:
            self.generation = generation
            self._latest = None

    def publish(self, generation: int, frame: Any, rect: Rect, now: float) -> Picture | None:
        """Record a capture; returns the new Picture, or None when nothing changed."""
        with self._lock:
            if generation != self.generation:
                return None  # captured for a display that is no longer selected
            self.failures = 0
            latest = self._latest
            if latest is not None and latest.rect == rect and latest.frame.data == frame.data:
                self._confirmed_at = now
                return None
            if latest is not None and latest.rect != rect:
                self.geometry_epoch += 1
            picture = Picture(self._next_id, generation, self.geometry_epoch, frame, rect, now)
            self._next_id += 1
            self._latest = picture
            self._confirmed_at = now
            listeners = list(self._listeners)
        for listener in listeners:
            listener(picture)
        return picture

    def capture_failed(self) -> None:
        with self._lock:
            self.failures += 1

    def latest(self) -> tuple[Picture | None, float]:
        """The latest picture of the current generation and its age in seconds."""
        with self._lock:
            if self._latest is None:
                return None, float("inf")
            return self._latest, max(0.0, self._clock() - self._confirmed_at)

    def last_frame_id(self) -> int:
        """The newest id handed out (0 before any); used as an action's `after_frame_id`."""
        with self._lock:
            return self._next_id - 1

    def demand(self, seconds: float) -> None:
        """Ask the capture loop for its fast rate for a while (someone waits for a frame)."""
        with self._lock:
            self._demand_until = max(self._demand_until, self._clock() + seconds)

    def demanded(self) -> bool:
        with self._lock:
            return self._clock() < self._demand_until
