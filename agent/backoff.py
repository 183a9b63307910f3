"""The agent's reconnect backoff: where it is on the spec's schedule.

Sans-I/O: it computes delays and never sleeps. The random source is passed in
so that the simulator (and tests) get the same delays for the same seed. The
schedule's numbers are the spec's, in `wire/backoff.py`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tetherbed.wire.backoff import BASE_SECONDS, CAP_SECONDS, JITTER_SECONDS, BackoffSchedule


@dataclass(slots=True)
class Backoff:
    rng: random.Random = field(default_factory=random.Random)
    base: float = BASE_SECONDS
    cap: float = CAP_SECONDS
    jitter: float = JITTER_SECONDS
    attempt: int = 0

    @property
    def schedule(self) -> BackoffSchedule:
        return BackoffSchedule(self.base, self.cap, self.jitter)

    def next_delay(self) -> float:
        """The delay before the next attempt; each call moves one attempt on."""
        exponential = self.schedule.exponential(self.attempt)
        self.attempt += 1
        return exponential + self.rng.uniform(0.0, self.jitter)

    def reset(self) -> None:
        """A healthy connection: the next failure starts again from the base."""
        self.attempt = 0

    def bounds(self, attempt: int) -> tuple[float, float]:
        """The interval a delay for `attempt` must fall in (for tests)."""
        return self.schedule.bounds(attempt)
