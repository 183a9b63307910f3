"""The spec's reconnect schedule: `min(2^attempt · 1 s, 60 s) + jitter(0-5 s)`.

The agent draws its delays from it and the `backoff_bounds` checker judges
them by it, so both read the numbers here. `HEALTHY_AFTER_SECONDS` is not in
the spec: it is the reading in docs/spec-notes.md ("Reconnect backoff") of
when a connection counts as healthy and resets the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

BASE_SECONDS = 1.0
CAP_SECONDS = 60.0
JITTER_SECONDS = 5.0
#: A connection that completed its handshake and stayed up this long resets
#: the schedule (the reference reading; docs/spec-notes.md).
HEALTHY_AFTER_SECONDS = 10.0
#: 2**attempt is exact in Python at any size; capping the exponent keeps a
#: week-long outage from building huge integers.
_MAX_EXPONENT = 32


@dataclass(frozen=True, slots=True)
class BackoffSchedule:
    base: float = BASE_SECONDS
    cap: float = CAP_SECONDS
    jitter: float = JITTER_SECONDS

    def exponential(self, attempt: int) -> float:
        """The delay for `attempt` before jitter: min(2^attempt · base, cap)."""
        return min(self.base * 2 ** min(attempt, _MAX_EXPONENT), self.cap)

    def bounds(self, attempt: int) -> tuple[float, float]:
        """The interval a delay for `attempt` must fall in."""
        low = self.exponential(attempt)
        return low, low + self.jitter
