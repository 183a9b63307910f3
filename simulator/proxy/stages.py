"""What each toxic does to one direction of one connection, as a timeline.

A stage takes an event with the time it reaches the stage and returns the events
it lets out with the times they may leave. Stages never sleep: times only grow
along the chain, and the direction's writer waits for each. Because an event's
time is when the proxy *read* it, data that keeps arriving while earlier data is
delayed does not pile up delays (latency stays latency, not latency × n).
A stage that must act with no data arriving (timeout, reset_peer) asks for a
timer that feeds an event to the stages after it.

Randomness (jitter, slice sizes) comes from the `random.Random` given, so a seed
reproduces every choice.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from tetherbed.simulator.proxy.events import Event, Signal, Timed
from tetherbed.simulator.proxy.toxics import Toxic


class Cancellable(Protocol):
    def cancel(self) -> None: ...


# later(when, event): feed `event` to the stages after this one at loop time `when`.
Later = Callable[[float, Event], Cancellable]


class Stage(Protocol):
    def process(self, event: Event, at: float) -> list[Timed]: ...

    def close(self) -> None:
        """Cancel timers; the toxic was removed or the connection ended."""


class _Ordered:
    """Base for stages that keep order: nothing leaves before what came earlier."""

    def __init__(self) -> None:
        self._last = float("-inf")

    def _emit(self, event: Event, when: float) -> Timed:
        when = max(when, self._last)
        self._last = when
        return when, event

    def _signal(self, event: Signal, at: float) -> list[Timed]:
        if event is Signal.RESET:
            return [(at, event)]
        return [self._emit(event, at)]

    def close(self) -> None:
        pass


class LatencyStage(_Ordered):
    """Each chunk leaves `latency` ± `jitter` ms after it arrived."""

    def __init__(self, latency_ms: int, jitter_ms: int, rng: random.Random) -> None:
        super().__init__()
        self._latency = max(latency_ms, 0) / 1000
        self._jitter = max(jitter_ms, 0) / 1000
        self._rng = rng

    def process(self, event: Event, at: float) -> list[Timed]:
        if isinstance(event, Signal):
            return self._signal(event, at)
        delay = self._latency
        if self._jitter:
            delay = max(0.0, delay + self._rng.uniform(-self._jitter, self._jitter))
        return [self._emit(event, at + delay)]


class BandwidthStage(_Ordered):
    """At most `rate` KB/s (1 KB = 1000 bytes), sent in pieces of 100 ms worth."""

    def __init__(self, rate_kb: int) -> None:
        super().__init__()
        self._bytes_per_second = max(rate_kb, 0) * 1000
        self._piece = max(1, self._bytes_per_second // 10)

    def process(self, event: Event, at: float) -> list[Timed]:
        if isinstance(event, Signal):
            return self._signal(event, at)
        if not self._bytes_per_second:
            return [self._emit(event, at)]
        out: list[Timed] = []
        when = max(at, self._last)
        for start in range(0, len(event), self._piece):
            piece = event[start : start + self._piece]
            when += len(piece) / self._bytes_per_second
            out.append(self._emit(piece, when))
        return out


class SlowCloseStage(_Ordered):
    """The sender's EOF, or a close, leaves `delay` ms late; data is untouched."""

    def __init__(self, delay_ms: int) -> None:
        super().__init__()
        self._delay = max(delay_ms, 0) / 1000

    def process(self, event: Event, at: float) -> list[Timed]:
        if event is Signal.EOF or event is Signal.CLOSE:
            return [self._emit(event, at + self._delay)]
        if event is Signal.RESET:
            return [(at, event)]
        return [self._emit(event, at)]


class TimeoutStage(_Ordered):
    """Drops all data; closes the connection `timeout` ms after it started (0: never).

    With timeout 0 this is a blackhole: the connection stays open, nothing passes.
    """

    def __init__(self, timeout_ms: int, now: float, later: Later) -> None:
        super().__init__()
        self._timer = later(now + timeout_ms / 1000, Signal.CLOSE) if timeout_ms > 0 else None

    def process(self, event: Event, at: float) -> list[Timed]:
        if isinstance(event, Signal):
            return self._signal(event, at)
        return []

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class ResetPeerStage(_Ordered):
    """On the first data, waits `timeout` ms and then resets the connection (RST).

    The data that triggered it, and anything after, is dropped: a reset discards
    unsent bytes.
    """

    def __init__(self, timeout_ms: int, later: Later) -> None:
        super().__init__()
        self._timeout = max(timeout_ms, 0) / 1000
        self._later = later
        self._timer: Cancellable | None = None
        self._fired = False

    def process(self, event: Event, at: float) -> list[Timed]:
        if isinstance(event, Signal):
            return self._signal(event, at)
        if self._fired:
            return []
        self._fired = True
        if not self._timeout:
            return [(at, Signal.RESET)]
        self._timer = self._later(at + self._timeout, Signal.RESET)
        return []

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class SlicerStage(_Ordered):
    """Cuts data into pieces of `average_size` ± `size_variation` bytes, `delay` µs apart."""

    def __init__(self, average: int, variation: int, delay_us: int, rng: random.Random) -> None:
        super().__init__()
        self._average = max(average, 0)
        self._variation = max(min(variation, self._average - 1), 0)
        self._delay = max(delay_us, 0) / 1_000_000
        self._rng = rng

    def sizes(self, total: int) -> list[int]:
        """Piece sizes for `total` bytes (consumes randomness)."""
        sizes = []
        while total > 0:
            size = self._average
            if self._variation:
                size += self._rng.randint(-self._variation, self._variation)
            size = min(max(size, 1), total)
            sizes.append(size)
            total -= size
        return sizes

    def process(self, event: Event, at: float) -> list[Timed]:
        if isinstance(event, Signal):
            return self._signal(event, at)
        if not self._average:
            return [self._emit(event, at)]
        out: list[Timed] = []
        when = max(at, self._last)
        start = 0
        for size in self.sizes(len(event)):
            out.append(self._emit(event[start : start + size], when))
            start += size
            when += self._delay
        self._last = when  # the next piece keeps the spacing across chunks
        return out


class LimitDataStage(_Ordered):
    """Lets `bytes` bytes through, then closes the connection."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self._remaining = max(limit, 0)
        self._done = False

    def process(self, event: Event, at: float) -> list[Timed]:
        if isinstance(event, Signal):
            return self._signal(event, at)
        if self._done:
            return []
        out: list[Timed] = []
        piece = event[: self._remaining]
        if piece:
            self._remaining -= len(piece)
            out.append(self._emit(piece, at))
        if not self._remaining:
            self._done = True
            out.append(self._emit(Signal.CLOSE, at))
        return out


def build_stage(toxic: Toxic, *, now: float, rng: random.Random, later: Later) -> Stage:
    """The running form of `toxic` for one direction of one connection."""
    value = toxic.attribute
    match toxic.type:
        case "latency":
            return LatencyStage(value("latency"), value("jitter"), rng)
        case "bandwidth":
            return BandwidthStage(value("rate"))
        case "slow_close":
            return SlowCloseStage(value("delay"))
        case "timeout":
            return TimeoutStage(value("timeout"), now, later)
        case "reset_peer":
            return ResetPeerStage(value("timeout"), later)
        case "slicer":
            return SlicerStage(value("average_size"), value("size_variation"), value("delay"), rng)
        case "limit_data":
            return LimitDataStage(value("bytes"))
    raise ValueError(f"unknown toxic type {toxic.type!r}")
