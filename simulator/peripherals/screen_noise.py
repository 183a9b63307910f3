"""Something changing on an X display: a thread paints moving bars on the root window.

Video tests, the video bench and the load tests' video profile need pictures
that differ from frame to frame; painting the root window with python-xlib needs
no window manager and no toolkit. Paints keep to a fixed schedule (`fps` a
second, whatever a paint takes), so the bench can paint faster than the adapter
samples and the content never limits its rate.
"""

from __future__ import annotations

import threading
import time


class ScreenNoise:
    def __init__(self, display: str, *, fps: float = 60.0, bars: int = 8) -> None:
        self._display_name = display
        self._interval = 1.0 / fps
        self._bars = bars
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="screen-noise", daemon=True)

    def __enter__(self) -> ScreenNoise:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        from Xlib import X
        from Xlib.display import Display

        display = Display(self._display_name)
        screen = display.screen()
        root = screen.root
        width, height = screen.width_in_pixels, screen.height_in_pixels
        gc = root.create_gc(foreground=0, subwindow_mode=X.IncludeInferiors)
        frame = 0
        start = time.monotonic()
        try:
            while not self._stop.is_set():
                frame += 1
                for i in range(self._bars):
                    color = ((frame * 37 + i * 97) * 2654435761) & 0xFFFFFF
                    gc.change(foreground=color)
                    x = (frame * 13 + i * width // self._bars) % width
                    root.fill_rectangle(
                        gc, x, (i * height) // self._bars, 160, height // self._bars
                    )
                display.sync()
                late = time.monotonic() - (start + frame * self._interval)
                if late > self._interval:  # fell behind (a busy machine): skip, never burst
                    start += late
                self._stop.wait(max(0.0, start + frame * self._interval - time.monotonic()))
        finally:
            display.close()
