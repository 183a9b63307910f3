"""Something happening on a display, as a process: `ScreenNoise` until SIGTERM.

    python -m tetherbed.simulator.peripherals.screen_activity --display :N [--fps 20]

A video stream only carries pictures that change, so a case about video flow
control (unacknowledged frames, keyframes, a stalled viewer) needs a screen
that keeps changing. This is screen_noise.py's painter run as its own
process, so that a test bed starts and stops it by PID like any other part.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from tetherbed.simulator.peripherals.screen_noise import ScreenNoise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--display", required=True, help="X display name, :N")
    parser.add_argument("--fps", type=float, default=20.0)
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with ScreenNoise(args.display, fps=args.fps):
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
