"""When processes were frozen, and when faults were on.

A frozen process cannot keep its timers, so checkers that hold it to a
schedule (backoff_bounds) excuse lateness across a pause, and the timeline
shades pauses and fault periods.

Fault events pair by `id` when they carry one. Without it, a `fault_stop`
ends the open faults on its target (every target for "all"), of its kind —
where kind "faults" means every kind but "partition", as the runner's
`clear` step does, and a missing kind means any.
"""

from __future__ import annotations

from dataclasses import dataclass

from tetherbed.simulator.checkers.evidence.records import fields, is_event, ordered, text, time_of
from tetherbed.simulator.history import History, Record

#: Fault kinds that freeze their target (SIGSTOP and the like).
PAUSE_FAULTS = frozenset({"pause", "freeze", "sigstop", "suspend", "stop_process"})
#: fault_stop targets that mean "every target".
EVERY_TARGET = frozenset({"all", "*", ""})


@dataclass(frozen=True, slots=True)
class Period:
    """From `start` to `end` (None: still on at the end of the history)."""

    start: Record
    end: Record | None

    def overlaps(self, begin: float, finish: float) -> bool:
        stop = float("inf") if self.end is None else time_of(self.end)
        return time_of(self.start) < finish and stop > begin

    @property
    def kind(self) -> str:
        return text(fields(self.start).get("kind")) or ""

    @property
    def target(self) -> str:
        return text(fields(self.start).get("target")) or ""


def process_of(target: str) -> str:
    """A fault target names a process either fully (agent:a) or by agent name (a)."""
    if ":" in target or target in ("hub", "runner", "fault"):
        return target
    return f"agent:{target}"


def fault_periods(history: History) -> list[Period]:
    """Every fault, from its fault_start to the fault_stop that ended it."""
    periods: list[Period] = []
    open_: list[Record] = []
    for record in ordered(history):
        if is_event(record, "fault_start"):
            open_.append(record)
        elif is_event(record, "fault_stop"):
            ended = [start for start in open_ if _stops(record, start)]
            for start in ended:
                open_.remove(start)
                periods.append(Period(start, record))
    periods += [Period(start, None) for start in open_]
    periods.sort(key=lambda p: (time_of(p.start), p.start.index))
    return periods


def _stops(stop: Record, start: Record) -> bool:
    halt, begin = fields(stop), fields(start)
    if halt.get("id") is not None or begin.get("id") is not None:
        return halt.get("id") == begin.get("id")
    target = text(halt.get("target"))
    if target is not None and target not in EVERY_TARGET and target != begin.get("target"):
        return False
    kind = text(halt.get("kind"))
    if kind is None or kind == begin.get("kind"):
        return True
    return kind == "faults" and begin.get("kind") != "partition"


def pauses(history: History) -> dict[str, list[Period]]:
    """Pause periods by process name: paused…resumed, and pause-like faults."""
    found: dict[str, list[Period]] = {}
    open_: dict[str, Record] = {}
    for record in ordered(history):
        if not is_event(record):
            continue
        if record.f == "paused":
            open_.setdefault(record.process, record)
        elif record.f in ("resumed", "killed", "exited", "started"):
            start = open_.pop(record.process, None)
            if start is not None:
                found.setdefault(record.process, []).append(Period(start, record))
    for process, start in open_.items():
        found.setdefault(process, []).append(Period(start, None))
    for period in fault_periods(history):
        if period.kind in PAUSE_FAULTS and period.target:
            found.setdefault(process_of(period.target), []).append(period)
    for periods in found.values():
        periods.sort(key=lambda p: (time_of(p.start), p.start.index))
    return found
