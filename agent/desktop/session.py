"""Everything the desktop core offers for one display, opened on first use.

Opening is lazy so that an agent starts (and advertises no computer use)
even when its display is down, and so that each piece opens its X connection
from the worker thread that first needs it. `close()` releases held input
first, then closes every connection.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from tetherbed.agent.desktop.capture import ScreenCapture
from tetherbed.runtime.clock import Clock

if TYPE_CHECKING:
    from tetherbed.agent.desktop.clipboard import ClipboardOwner
    from tetherbed.agent.desktop.input import InputDriver
    from tetherbed.agent.desktop.windows import WindowInspector


class DesktopSession:
    def __init__(self, display: str, *, clock: Clock | None = None) -> None:
        self.display = display
        self.capture = ScreenCapture(display, clock=clock)
        self._lock = threading.Lock()
        self._input: InputDriver | None = None
        self._windows: WindowInspector | None = None
        self._clipboard: ClipboardOwner | None = None

    @property
    def input(self) -> InputDriver:
        with self._lock:
            if self._input is None:
                from tetherbed.agent.desktop.input import InputDriver

                self._input = InputDriver(self.display)
            return self._input

    @property
    def windows(self) -> WindowInspector:
        with self._lock:
            if self._windows is None:
                from tetherbed.agent.desktop.windows import WindowInspector

                self._windows = WindowInspector(self.display)
            return self._windows

    @property
    def clipboard(self) -> ClipboardOwner:
        with self._lock:
            if self._clipboard is None:
                from tetherbed.agent.desktop.clipboard import ClipboardOwner

                self._clipboard = ClipboardOwner(self.display)
            return self._clipboard

    def release_all(self) -> None:
        """Release held buttons and keys, if input was ever used."""
        driver = self._input
        if driver is not None:
            driver.release_all()

    def close(self) -> None:
        with self._lock:
            parts = [self._input, self._windows, self._clipboard]
            self._input = self._windows = self._clipboard = None
        for part in parts:
            if part is not None:
                try:
                    part.close()
                except Exception:
                    pass  # the display may be gone; closing must go on
        self.capture.close()
