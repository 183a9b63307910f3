"""A seeded frame scheduler for the fault proxy: explore and replay frame orders
of real processes.

The cores are sans-I/O (`seeded.SeededSchedule`, `replay.ReplaySchedule`: fed
frame arrivals and clock ticks, they return releases); `driver.FrameScheduler`
runs one on asyncio for every proxy of a run and writes the decision log
(`decisions.py`). `ScheduleOptions` is how a run asks for it. See
docs/explore.md, "Scheduling real processes".
"""

from tetherbed.simulator.proxy.scheduler.bound import BoundError, ScheduleBound
from tetherbed.simulator.proxy.scheduler.decisions import Decision, DecisionLog, DecisionLogError
from tetherbed.simulator.proxy.scheduler.driver import FrameScheduler
from tetherbed.simulator.proxy.scheduler.frames import Frame, FrameKey
from tetherbed.simulator.proxy.scheduler.options import (
    ScheduleOptions,
    record_outcome,
    schedule_report,
)
from tetherbed.simulator.proxy.scheduler.replay import Divergence, ReplaySchedule
from tetherbed.simulator.proxy.scheduler.seeded import SeededSchedule

__all__ = [
    "BoundError",
    "Decision",
    "DecisionLog",
    "DecisionLogError",
    "Divergence",
    "Frame",
    "FrameKey",
    "FrameScheduler",
    "ReplaySchedule",
    "ScheduleBound",
    "ScheduleOptions",
    "SeededSchedule",
    "record_outcome",
    "schedule_report",
]
