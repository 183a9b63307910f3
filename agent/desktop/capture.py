"""Screen capture with mss: monitors in display-global pixels, and raw BGRA frames.

mss (XShm on X11) grabs a 1080p screen in a few milliseconds, where
`pyautogui.screenshot()` shells out and is fragile under Xvfb. An mss instance
holds an X connection that must stay on the thread that opened it, so each
thread gets its own instance; `close()` closes them all.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from tetherbed.agent.desktop.errors import DependencyMissing, DesktopError, DisplayUnavailable
from tetherbed.agent.desktop.xdisplay import diagnose
from tetherbed.runtime.clock import Clock, SystemClock

#: `grab(monitor=ALL_MONITORS)` captures the bounding box of every monitor.
ALL_MONITORS = -1


@dataclass(frozen=True, slots=True)
class Frame:
    """Raw pixels: BGRA, 4 bytes a pixel, rows tightly packed (stride = width * 4).

    `left`/`top` are the display-global position of the top-left pixel, so a
    point (x, y) in the frame is (left + x, top + y) on the display. `data` may be
    the very buffer mss filled (a `bytearray` no one else holds): it is never
    written after the grab, and keeping it saves copying a picture per capture.
    """

    data: bytes | bytearray
    width: int
    height: int
    left: int
    top: int
    captured_at: float

    @property
    def stride(self) -> int:
        return self.width * 4


@dataclass(frozen=True, slots=True)
class Monitor:
    """One monitor; `index` 0 is the primary, the others follow in X order."""

    index: int
    left: int
    top: int
    width: int
    height: int
    primary: bool

    @property
    def right(self) -> int:
        """One past the last column (exclusive)."""
        return self.left + self.width

    @property
    def bottom(self) -> int:
        """One past the last row (exclusive)."""
        return self.top + self.height

    def contains(self, x: int, y: int) -> bool:
        return self.left <= x < self.right and self.top <= y < self.bottom


def bounding_box(monitors: list[Monitor]) -> tuple[int, int, int, int]:
    """`(x, y, width, height)` of the smallest rectangle holding every monitor."""
    left = min(m.left for m in monitors)
    top = min(m.top for m in monitors)
    right = max(m.right for m in monitors)
    bottom = max(m.bottom for m in monitors)
    return left, top, right - left, bottom - top


class CaptureError(DesktopError):
    """A grab asked for something the display does not have."""


class ScreenCapture:
    """Grabs pixels from one X display; safe to call from any number of threads."""

    def __init__(self, display: str, *, clock: Clock | None = None) -> None:
        self.display = display
        self._clock = clock or SystemClock()
        self._local = threading.local()
        self._all: list[Any] = []
        self._all_lock = threading.Lock()
        self._closed = False

    # --- mss instances, one per (thread, cursor) ---------------------------

    def _mss(self, *, cursor: bool) -> Any:
        attr = "cursor" if cursor else "plain"
        instance = getattr(self._local, attr, None)
        if instance is None:
            instance = self._open(cursor=cursor)
            setattr(self._local, attr, instance)
        return instance

    def _open(self, *, cursor: bool) -> Any:
        if self._closed:
            raise DisplayUnavailable("the screen capture is closed")
        try:
            import mss
        except ImportError as exc:  # pragma: no cover - the desktop extra installs it
            raise DependencyMissing("mss is not installed") from exc
        try:
            instance = mss.MSS(display=self.display, with_cursor=cursor)
        except mss.ScreenShotError as exc:
            raise diagnose(self.display, f"mss cannot open {self.display}: {exc}") from exc
        with self._all_lock:
            self._all.append(instance)
        return instance

    # --- queries -------------------------------------------------------------

    def monitors(self) -> list[Monitor]:
        """Every monitor, primary first, in display-global coordinates."""
        raw = self._mss(cursor=False).monitors[1:]
        if not raw:
            raise CaptureError(f"display {self.display} reports no monitor")
        primary_at = next((i for i, m in enumerate(raw) if m.get("is_primary")), 0)
        ordered = [raw[primary_at], *raw[:primary_at], *raw[primary_at + 1 :]]
        return [
            Monitor(
                index=i,
                left=m["left"],
                top=m["top"],
                width=m["width"],
                height=m["height"],
                primary=i == 0,
            )
            for i, m in enumerate(ordered)
        ]

    def grab(
        self,
        monitor: int = 0,
        region: tuple[int, int, int, int] | None = None,
        *,
        cursor: bool = False,
    ) -> Frame:
        """Pixels of `monitor` (-1: all, stitched), or of `region` when given.

        `region` is display-global `(x, y, width, height)` and wins over
        `monitor`. `cursor=True` composites the pointer image (XFixes).
        """
        if region is not None:
            left, top, width, height = region
            if width <= 0 or height <= 0:
                raise CaptureError(f"empty region {region}")
        else:
            left, top, width, height = self.monitor_rect(monitor)
        box = {"left": left, "top": top, "width": width, "height": height}
        try:
            shot = self._mss(cursor=cursor).grab(box)
        except DesktopError:
            raise
        except Exception as exc:  # mss raises ScreenShotError, ctypes/XCB errors
            raise DisplayUnavailable(f"grab on {self.display} failed: {exc}") from exc
        captured_at = self._clock.time()
        return Frame(
            data=shot.raw,  # mss's own fresh buffer: not copied again
            width=shot.width,
            height=shot.height,
            left=shot.left,
            top=shot.top,
            captured_at=captured_at,
        )

    def monitor_rect(self, monitor: int) -> tuple[int, int, int, int]:
        """`(x, y, width, height)` of a monitor index, or of all of them for -1."""
        monitors = self.monitors()
        if monitor == ALL_MONITORS:
            return bounding_box(monitors)
        if not 0 <= monitor < len(monitors):
            raise CaptureError(f"no monitor {monitor}; this display has {len(monitors)}")
        m = monitors[monitor]
        return m.left, m.top, m.width, m.height

    def close(self) -> None:
        """Close every mss instance (from any thread); later grabs fail."""
        self._closed = True
        with self._all_lock:
            instances, self._all = self._all, []
        for instance in instances:
            instance.close()

    def __enter__(self) -> ScreenCapture:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
