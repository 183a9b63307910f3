"""The asyncio side of a frame schedule: timers, deliveries and the decision log.

One `FrameScheduler` serves every proxy of a run (on the process backend all
agents' proxies live in the runner's loop), so frames of different agents are
ordered against each other too. Each proxied WebSocket connection opens a
`ScheduledConnection`; the connection hands it every whole message with the
function that passes it on, and the scheduler calls that function when the
schedule releases the frame.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tetherbed.simulator.proxy.scheduler.actions import Release, Schedule, WakeAt
from tetherbed.simulator.proxy.scheduler.decisions import DecisionWriter
from tetherbed.simulator.proxy.scheduler.frames import DOWN, UP, Frame, FrameKey, label

log = logging.getLogger(__name__)
Deliver = Callable[[], None]


class FrameScheduler:
    def __init__(
        self,
        schedule: Schedule,
        *,
        decisions: Path | None = None,
        header: dict[str, Any] | None = None,
    ) -> None:
        self.schedule = schedule
        self.decisions = decisions
        self._writer = (
            DecisionWriter(decisions, {"schedule": schedule.mode, **(header or {})})
            if decisions is not None
            else None
        )
        self._connections: dict[str, int] = {}
        self._deliveries: dict[FrameKey, Deliver] = {}
        #: Frames submitted and not delivered yet, per lane. The schedule may
        #: release several at once, so its own count is ahead of the deliveries.
        self._undelivered: dict[tuple[str, int, str], int] = {}
        self._after_drain: dict[tuple[str, int, str], list[Deliver]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.released = 0

    def open(self, link: str) -> ScheduledConnection:
        """A new connection on `link` (a proxy's name): numbered in accept order."""
        number = self._connections.get(link, 0)
        self._connections[link] = number + 1
        return ScheduledConnection(self, link, number)

    def close(self) -> None:
        """Stop: cancel the timer, end the decision log with a summary and close it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._writer is not None:
            self._writer.summary(self.summary())
            self._writer.close()

    def summary(self) -> dict[str, Any]:
        """How many frames went out and, replaying, how far the run kept to its log."""
        summary: dict[str, Any] = {"released": self.released}
        finish = getattr(self.schedule, "finish", None)
        if finish is not None:
            summary["divergence"] = finish().to_json()
        return summary

    # -- from connections ------------------------------------------------------

    def _submit(self, frame: Frame, deliver: Deliver) -> None:
        self._deliveries[frame.key] = deliver
        lane = frame.key.lane
        self._undelivered[lane] = self._undelivered.get(lane, 0) + 1
        self._apply(self.schedule.arrive(frame, _now()))

    def _forget(self, link: str, connection: int) -> None:
        for key in [k for k in self._deliveries if (k.link, k.connection) == (link, connection)]:
            del self._deliveries[key]
        for lanes in (self._after_drain, self._undelivered):
            for lane in [lane for lane in lanes if lane[:2] == (link, connection)]:
                del lanes[lane]
        self.schedule.forget(link, connection)
        self._apply(self.schedule.wake(_now()))

    def _when_drained(self, lane: tuple[str, int, str], callback: Deliver) -> None:
        if not self._undelivered.get(lane):
            callback()
        else:
            self._after_drain.setdefault(lane, []).append(callback)

    # -- applying the schedule's actions -----------------------------------------

    def _wake(self) -> None:
        self._timer = None
        self._apply(self.schedule.wake(_now()))

    def _apply(self, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, Release):
                self._release(action)
            elif isinstance(action, WakeAt):
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = asyncio.get_running_loop().call_at(action.when, self._wake)

    def _release(self, release: Release) -> None:
        key = release.frame.key
        deliver = self._deliveries.pop(key, None)
        self.released += 1
        if key.lane in self._undelivered:
            self._undelivered[key.lane] -= 1
        if self._writer is not None:
            self._writer.write(release.decision)
        if deliver is None:
            return
        try:
            deliver()
        except Exception:  # a connection that broke meanwhile: its own code handles it
            log.exception("delivering %s failed", key)
        waiting = self._after_drain.get(key.lane)
        if waiting and not self._undelivered.get(key.lane):
            del self._after_drain[key.lane]
            for callback in waiting:
                callback()


class ScheduledConnection:
    """One proxied connection's handle on the run's scheduler."""

    def __init__(self, scheduler: FrameScheduler, link: str, number: int) -> None:
        self._scheduler = scheduler
        self.link = link
        self.number = number
        self._counts = {UP: 0, DOWN: 0}
        self._closed = False

    def submit(self, direction: str, data: bytes, deliver: Deliver) -> None:
        """Hold one whole message going `up` or `down`; `deliver` passes it on."""
        if self._closed:
            return
        index = self._counts[direction]
        self._counts[direction] = index + 1
        kind, request_id = label(data, masked=direction == UP)
        key = FrameKey(self.link, self.number, direction, index)
        self._scheduler._submit(Frame(key, kind, request_id), deliver)

    def when_drained(self, direction: str, callback: Deliver) -> None:
        """Call back once nothing of this direction is held (a half-close waits for it)."""
        self._scheduler._when_drained((self.link, self.number, direction), callback)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._scheduler._forget(self.link, self.number)


def _now() -> float:
    return asyncio.get_running_loop().time()
