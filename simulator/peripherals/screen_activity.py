"""Something happening on a display, as a process: blocks of colour painted on the root window.

    python -m tetherbed.simulator.peripherals.screen_activity --display :N [--fps 20]

A video stream only carries pictures that change, so a case about video flow
control (unacknowledged frames, keyframes, a stalled viewer) needs a screen
that keeps changing. Run as its own process, it is started and stopped by PID
like any other part of a test bed; it paints with python-xlib, so it needs no
window manager. Each frame repaints a different band with a different colour,
so every captured frame differs from the last.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time


def paint(display_name: str, fps: float) -> None:
    from Xlib import X
    from Xlib.display import Display

    display = Display(display_name)
    screen = display.screen()
    root = screen.root
    width, height = screen.width_in_pixels, screen.height_in_pixels
    gc = root.create_gc(foreground=0, subwindow_mode=X.IncludeInferiors)
    bands = 12
    interval = 1.0 / fps
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    frame = 0
    try:
        while running[0]:
            frame += 1
            band = frame % bands
            gc.change(foreground=(frame * 2654435761) & 0xFFFFFF)
            root.fill_rectangle(gc, 0, band * height // bands, width, height // bands + 1)
            display.sync()
            time.sleep(interval)
    finally:
        display.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--display", required=True, help="X display name, :N")
    parser.add_argument("--fps", type=float, default=20.0)
    args = parser.parse_args(argv)
    paint(args.display, args.fps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
