"""The exploring schedule: a seeded, bounded hold for every frame, FIFO per lane.

Each frame gets a hold drawn from its lane's own generator (seeded with the
run's seed and the lane's name), so the k-th frame of a lane is held the same
time under the same seed however the other lanes' traffic interleaves. A frame
leaves when its hold is over *and* everything before it in its lane has left:
one direction of one WebSocket connection is a TCP byte stream, and a receiver
that got its messages out of order would be seeing a fault (that is the
`reorder` rule's job), not a legal schedule. What the holds do reorder is what
a real network may reorder: frames of different connections (other agents,
an agent's old and new connection) and the two directions of one connection
(a request toward the agent against the agent's answers and STATUS on their
way up), i.e. which side "hears" first.

The count bound keeps liveness: with more than `max_held` frames held, the
one due first leaves at once (`why: count`).
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from dataclasses import dataclass

from tetherbed.simulator.proxy.scheduler.actions import Action, Release, WakeAt
from tetherbed.simulator.proxy.scheduler.bound import ScheduleBound
from tetherbed.simulator.proxy.scheduler.decisions import Decision
from tetherbed.simulator.proxy.scheduler.frames import Frame

Lane = tuple[str, int, str]


@dataclass(slots=True)
class _Held:
    frame: Frame
    order: int  # arrival order, the tie-breaker
    due: float
    hold_ms: float


class SeededSchedule:
    mode = "explore"

    def __init__(self, seed: int, bound: ScheduleBound) -> None:
        self.seed = seed
        self.bound = bound
        self._lanes: dict[Lane, deque[_Held]] = {}
        self._rngs: dict[Lane, random.Random] = {}
        self._arrivals = itertools.count()
        self._released = 0
        self._start: float | None = None

    def arrive(self, frame: Frame, now: float) -> list[Action]:
        if self._start is None:
            self._start = now
        lane = frame.key.lane
        rng = self._rngs.get(lane)
        if rng is None:
            rng = self._rngs[lane] = random.Random(f"{self.seed}/{'/'.join(map(str, lane))}")
        hold_ms = rng.uniform(0, self.bound.hold_ms)
        held = _Held(frame, next(self._arrivals), now + hold_ms / 1000, hold_ms)
        self._lanes.setdefault(lane, deque()).append(held)
        return self._drain(now)

    def wake(self, now: float) -> list[Action]:
        return self._drain(now)

    def forget(self, link: str, connection: int) -> None:
        for lane in [lane for lane in self._lanes if lane[:2] == (link, connection)]:
            del self._lanes[lane]

    def held_count(self, link: str, connection: int, direction: str) -> int:
        return len(self._lanes.get((link, connection, direction), ()))

    def _drain(self, now: float) -> list[Action]:
        actions: list[Action] = []
        while True:
            heads = [lane[0] for lane in self._lanes.values() if lane]
            if not heads:
                return actions
            first = min(heads, key=lambda h: (h.due, h.order))
            total = sum(len(lane) for lane in self._lanes.values())
            if first.due <= now:
                actions.append(self._release(first, now, "due"))
            elif total > self.bound.max_held:
                actions.append(self._release(first, now, "count"))
            else:
                actions.append(WakeAt(first.due))
                return actions

    def _release(self, held: _Held, now: float, why: str) -> Release:
        lane = self._lanes[held.frame.key.lane]
        lane.popleft()
        others = tuple(sorted(h.frame.key for queue in self._lanes.values() for h in queue))
        decision = Decision(
            n=self._released,
            t=(now - (now if self._start is None else self._start)) * 1000,
            key=held.frame.key,
            kind=held.frame.kind,
            request_id=held.frame.request_id,
            held=others,
            hold=held.hold_ms,
            why=why,
        )
        self._released += 1
        return Release(held.frame, decision)
