"""A clock set to exact instants, so that a deadline `t + budget` is reached exactly.

`ManualClock.advance(due - now)` can land one float ulp short of `due` and
leave a timer that never fires; the machine jumps straight to the instant.
"""

from __future__ import annotations


class VirtualClock:
    """Monotonic time starts at 0; wall time is a fixed offset from it."""

    def __init__(self, wall_start: float = 1_700_000_000.0) -> None:
        self._wall0 = wall_start
        self._now = 0.0

    def time(self) -> float:
        return self._wall0 + self._now

    def monotonic(self) -> float:
        return self._now

    def advance_to(self, instant: float) -> None:
        if instant < self._now:
            raise ValueError(f"time does not run backwards ({instant} < {self._now})")
        self._now = instant
