"""The spec's reconnect schedule: `min(2^attempt · 1 s, 60 s) + jitter(0-5 s)`.

Only the constants and the bounds they imply live here: how an agent counts
its attempts, and when it starts counting again, is the agent's business
(`agent/backoff.py` for the reference). Checkers hold any agent to these
bounds, so they must not come from the agent under test.
"""

from __future__ import annotations

BASE_SECONDS = 1.0
CAP_SECONDS = 60.0
JITTER_SECONDS = 5.0


def delay_bounds(
    attempt: int,
    *,
    base: float = BASE_SECONDS,
    cap: float = CAP_SECONDS,
    jitter: float = JITTER_SECONDS,
) -> tuple[float, float]:
    """[low, high] of the delay before reconnect attempt number `attempt` (from 0)."""
    exponent = min(max(attempt, 0), 64)  # 2^64 s is past any cap; avoids huge ints
    low = min(base * 2.0**exponent, cap)
    return low, low + jitter
