"""The reconnect schedule: `min(2^attempt · base, cap) + uniform(0, jitter)`.

Sans-I/O: it computes delays and never sleeps. The random source is passed in
so that the simulator (and tests) get the same delays for the same seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

BASE_SECONDS = 1.0
CAP_SECONDS = 60.0
JITTER_SECONDS = 5.0
#: A connection counts as healthy, and resets the schedule, once it has
#: completed its handshake and stayed up this long.
HEALTHY_AFTER_SECONDS = 10.0


@dataclass(slots=True)
class Backoff:
    rng: random.Random = field(default_factory=random.Random)
    base: float = BASE_SECONDS
    cap: float = CAP_SECONDS
    jitter: float = JITTER_SECONDS
    attempt: int = 0

    def next_delay(self) -> float:
        """The delay before the next attempt; each call moves one attempt on."""
        # 2**attempt overflows nothing in Python, but cap the exponent anyway so
        # that a week-long outage does not build huge integers.
        exponential = min(self.base * 2 ** min(self.attempt, 32), self.cap)
        self.attempt += 1
        return exponential + self.rng.uniform(0.0, self.jitter)

    def reset(self) -> None:
        """A healthy connection: the next failure starts again from the base."""
        self.attempt = 0

    def bounds(self, attempt: int) -> tuple[float, float]:
        """The interval a delay for `attempt` must fall in (for checkers)."""
        low = min(self.base * 2 ** min(attempt, 32), self.cap)
        return low, low + self.jitter
