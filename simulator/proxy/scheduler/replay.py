"""The replaying schedule: release frames in a decision log's order, as far as
the real processes let it.

Real processes are not deterministic: the same seed and the same log do not
make an agent send the same frames at the same moments. So a replay enforces
what it can and counts what it cannot:

- a frame named in the log is held until every frame before it in the log
  has gone, and until the frames the proxy was holding when it went in the
  recorded run (`held`) have arrived too, so that frames released together
  then are released together now (that is what lets the receiver see them
  "at once", the usual trigger of a race);
- a frame the log does not name (`unexpected`: a heartbeat that fell
  elsewhere, a different request id does not count) goes out as soon as its
  lane allows; one whose type differs from the log's is `changed`;
- a frame the log names that does not come within the patience (`wait` plus
  the recorded gap before it) is given up (`missing`), so a replay never
  deadlocks on a frame the other side will only send after seeing a frame
  the replay is holding; if it comes later it goes out at once (`late`).

FIFO per lane holds as in the exploring schedule.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tetherbed.simulator.proxy.scheduler.actions import Action, Release, WakeAt
from tetherbed.simulator.proxy.scheduler.decisions import Decision
from tetherbed.simulator.proxy.scheduler.frames import Frame, FrameKey

Lane = tuple[str, int, str]
DEFAULT_WAIT_S = 1.0


@dataclass(slots=True)
class Divergence:
    """How far a replay kept to its log."""

    decisions: int = 0
    followed: int = 0
    unexpected: int = 0
    changed: int = 0
    missing: int = 0
    late: int = 0
    gate_timeouts: int = 0
    first: list[str] = field(default_factory=list)  # the first few, in words

    @property
    def diverged(self) -> int:
        return self.unexpected + self.changed + self.missing

    def note(self, text: str) -> None:
        if len(self.first) < 5:
            self.first.append(text)

    def to_json(self) -> dict[str, object]:
        return {
            "decisions": self.decisions,
            "followed": self.followed,
            "unexpected": self.unexpected,
            "changed": self.changed,
            "missing": self.missing,
            "late": self.late,
            "gate_timeouts": self.gate_timeouts,
            "first": list(self.first),
        }


class ReplaySchedule:
    mode = "replay"

    def __init__(
        self,
        decisions: list[Decision],
        *,
        wait: float = DEFAULT_WAIT_S,
        links: set[str] | None = None,
    ) -> None:
        """`links`: only these proxies' decisions (a proxy process that hosts
        some of the run's links, as on the docker backend)."""
        self._log = [d for d in decisions if links is None or d.key.link in links]
        self._slot = {d.key: index for index, d in enumerate(self._log)}
        self._wait = wait
        self._next = 0
        self._stall_since: float | None = None
        self._lanes: dict[Lane, deque[Frame]] = {}
        self._seen: set[FrameKey] = set()
        self._done: set[FrameKey] = set()
        self._given_up: set[FrameKey] = set()
        self._released = 0
        self._start: float | None = None
        self.divergence = Divergence(decisions=len(self._log))

    def arrive(self, frame: Frame, now: float) -> list[Action]:
        if self._start is None:
            self._start = now
        key = frame.key
        self._seen.add(key)
        slot = self._slot.get(key)
        if slot is None:
            self.divergence.unexpected += 1
            self.divergence.note(f"unexpected {frame.kind} {key}")
        elif self._log[slot].kind != frame.kind:
            self.divergence.changed += 1
            self.divergence.note(f"{key} is {frame.kind}, the log has {self._log[slot].kind}")
        self._lanes.setdefault(key.lane, deque()).append(frame)
        return self._drain(now)

    def wake(self, now: float) -> list[Action]:
        return self._drain(now)

    def forget(self, link: str, connection: int) -> None:
        for lane in [lane for lane in self._lanes if lane[:2] == (link, connection)]:
            del self._lanes[lane]
        for decision in self._log[self._next :]:
            key = decision.key
            if (key.link, key.connection) == (link, connection) and key not in self._seen:
                self._give_up(key, "its connection ended")

    def held_count(self, link: str, connection: int, direction: str) -> int:
        return len(self._lanes.get((link, connection, direction), ()))

    def finish(self) -> Divergence:
        """The run is over: slots never reached count as missing."""
        for decision in self._log[self._next :]:
            if decision.key not in self._done:
                self._give_up(decision.key, "the run ended first")
        self._next = len(self._log)
        return self.divergence

    # -- releasing --------------------------------------------------------------

    def _drain(self, now: float) -> list[Action]:
        actions: list[Action] = []
        while True:
            free = self._free_head()
            if free is not None:
                actions.append(self._release(free, now, self._why_free(free)))
                continue
            while self._next < len(self._log) and self._log[self._next].key in self._done:
                self._advance()
            if self._next >= len(self._log):
                return actions
            decision = self._log[self._next]
            if self._stall_since is None:
                self._stall_since = now
            deadline = self._stall_since + self._wait + self._gap(self._next)
            lane = self._lanes.get(decision.key.lane)
            if lane and lane[0].key == decision.key:
                waiting = [k for k in decision.held if k not in self._seen and k not in self._done]
                if waiting and now < deadline:
                    actions.append(WakeAt(deadline))
                    return actions
                if waiting:
                    self.divergence.gate_timeouts += 1
                self.divergence.followed += 1
                actions.append(self._release(lane[0], now, "replay"))
                self._advance()
                continue
            if now >= deadline:
                self._give_up(decision.key, "it did not come")
                self._advance()
                continue
            actions.append(WakeAt(deadline))
            return actions

    def _free_head(self) -> Frame | None:
        """A lane head the log has no slot for any more (or never had)."""
        for lane in self._lanes.values():
            if lane:
                key = lane[0].key
                if key not in self._slot or key in self._given_up:
                    return lane[0]
        return None

    def _why_free(self, frame: Frame) -> str:
        if frame.key in self._given_up:
            self.divergence.late += 1
            return "late"
        return "unexpected" if self._next < len(self._log) else "past-log"

    def _gap(self, index: int) -> float:
        """The recorded time between this decision and the one before it (s)."""
        if index == 0:
            return self._log[0].t / 1000
        return max(0.0, self._log[index].t - self._log[index - 1].t) / 1000

    def _advance(self) -> None:
        self._next += 1
        self._stall_since = None

    def _give_up(self, key: FrameKey, why: str) -> None:
        if key in self._done:
            return
        self._done.add(key)
        self._given_up.add(key)
        self.divergence.missing += 1
        self.divergence.note(f"missing {key}: {why}")

    def _release(self, frame: Frame, now: float, why: str) -> Release:
        lane = self._lanes[frame.key.lane]
        lane.popleft()
        self._done.add(frame.key)
        others = tuple(sorted(f.key for queue in self._lanes.values() for f in queue))
        decision = Decision(
            n=self._released,
            t=(now - (now if self._start is None else self._start)) * 1000,
            key=frame.key,
            kind=frame.kind,
            request_id=frame.request_id,
            held=others,
            why=why,
        )
        self._released += 1
        return Release(frame, decision)
