"""What a schedule asks its driver to do, and the interface both schedules share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tetherbed.simulator.proxy.scheduler.decisions import Decision
from tetherbed.simulator.proxy.scheduler.frames import Frame


@dataclass(frozen=True, slots=True)
class Release:
    """Let this frame go on toward its receiver now (the decision is logged)."""

    frame: Frame
    decision: Decision


@dataclass(frozen=True, slots=True)
class WakeAt:
    """Call `wake(now)` at this time (the earliest pending; replaces the previous)."""

    when: float


Action = Release | WakeAt


class Schedule(Protocol):
    """A sans-I/O frame schedule: fed arrivals and clock ticks, it returns releases."""

    mode: str

    def arrive(self, frame: Frame, now: float) -> list[Action]: ...

    def wake(self, now: float) -> list[Action]: ...

    def forget(self, link: str, connection: int) -> None:
        """The connection is gone: drop what is held for it."""

    def held_count(self, link: str, connection: int, direction: str) -> int: ...
