"""The agent's reconnect schedule (§6 "backoff 1 s → 30 s (jitter)").

Reading (docs/spec-notes.md): the delay before reconnect attempt n (counted
from 0 since the last healthy stream) is the exponential step
min(2^n · 1 s, 30 s), scaled by a uniform factor in [0.8, 1.2] and clamped to
[1 s, 30 s]. The clamp keeps the spec's two numbers as hard bounds; the jitter
spreads agents that lost their streams together (a hub restart) on both sides
of the step, also at the cap.

Pure: the agent passes the uniform draw in; a checker asks for the bounds.
"""

from __future__ import annotations

from tetherbed.wire.dsh.constants import RECONNECT_BASE_S, RECONNECT_CAP_S, RECONNECT_JITTER


def step(attempt: int) -> float:
    """The un-jittered delay before attempt `attempt`."""
    if attempt < 0:
        raise ValueError("attempts count from 0")
    return min(RECONNECT_BASE_S * 2 ** min(attempt, 32), RECONNECT_CAP_S)


def delay(attempt: int, uniform01: float) -> float:
    """The delay for `attempt`, given a uniform draw in [0, 1)."""
    factor = 1.0 - RECONNECT_JITTER + 2 * RECONNECT_JITTER * uniform01
    return min(max(step(attempt) * factor, RECONNECT_BASE_S), RECONNECT_CAP_S)


def bounds(attempt: int) -> tuple[float, float]:
    """The interval every delay for `attempt` falls in."""
    low = step(attempt) * (1.0 - RECONNECT_JITTER)
    high = step(attempt) * (1.0 + RECONNECT_JITTER)
    return max(low, RECONNECT_BASE_S), min(high, RECONNECT_CAP_S)
