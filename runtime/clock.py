"""The clock every core and driver is given instead of reading time itself.

`time()` is wall time for envelope `ts` fields and audit records; `monotonic()`
is for deadlines and durations. The simulator passes a virtual clock that moves
only when its scheduler says so.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to; for tests of sans-I/O cores."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._wall0 = start
        self._now = 0.0

    def time(self) -> float:
        return self._wall0 + self._now

    def monotonic(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time does not run backwards")
        self._now += seconds
