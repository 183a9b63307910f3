"""How a run turns the frame scheduler on: the one object backends and commands take.

    from tetherbed.simulator.proxy.scheduler import ScheduleOptions
    options = ScheduleOptions.explore("200ms", decisions=Path("run/decisions.jsonl"))
    options = ScheduleOptions.replaying(Path("run/decisions.jsonl"), decisions=Path("again.jsonl"))
    outcome = run_scenario(scenario, "process", seed, workdir, target=t, schedule=options)
    outcome.schedule  # {"mode", "decisions", "released", "divergence"?}

Exploring, the run's seed draws the holds; replaying, the log's order is
enforced and the seed still drives everything else (the proxies' own
choices, Tetherbed's agent's jitter).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetherbed.simulator.proxy.scheduler.bound import ScheduleBound
from tetherbed.simulator.proxy.scheduler.decisions import DecisionLog, append_outcome
from tetherbed.simulator.proxy.scheduler.driver import FrameScheduler
from tetherbed.simulator.proxy.scheduler.replay import DEFAULT_WAIT_S, ReplaySchedule
from tetherbed.simulator.proxy.scheduler.seeded import SeededSchedule


@dataclass(frozen=True)
class ScheduleOptions:
    #: Exploring: the bound of the seeded holds. None when replaying.
    bound: ScheduleBound | None = None
    #: Replaying: the log to follow.
    replay: DecisionLog | None = None
    replay_path: Path | None = None
    #: Where this run writes its own decision log (None: nowhere).
    decisions: Path | None = None
    #: Replaying: how long to wait for a frame the log names before giving up on it.
    wait: float = DEFAULT_WAIT_S

    @classmethod
    def explore(
        cls, bound: ScheduleBound | str | None = None, *, decisions: Path | None = None
    ) -> ScheduleOptions:
        if not isinstance(bound, ScheduleBound):
            bound = ScheduleBound.parse(bound)
        return cls(bound=bound, decisions=decisions)

    @classmethod
    def replaying(
        cls, log: Path, *, decisions: Path | None = None, wait: float = DEFAULT_WAIT_S
    ) -> ScheduleOptions:
        """Raises `DecisionLogError` for a file that is not a decision log."""
        return cls(replay=DecisionLog.read(log), replay_path=log, decisions=decisions, wait=wait)

    @property
    def mode(self) -> str:
        return "replay" if self.replay is not None else "explore"

    def with_decisions(self, decisions: Path | None) -> ScheduleOptions:
        return ScheduleOptions(self.bound, self.replay, self.replay_path, decisions, self.wait)

    def build(
        self, seed: int, header: dict[str, Any] | None = None, *, links: set[str] | None = None
    ) -> FrameScheduler:
        """The scheduler for one run (`links`: only these proxies' decisions, replaying)."""
        info = {"seed": seed, **(header or {})}
        if self.replay is not None:
            schedule: Any = ReplaySchedule(self.replay.decisions, wait=self.wait, links=links)
            info["replaying"] = str(self.replay_path) if self.replay_path else None
        else:
            bound = self.bound or ScheduleBound()
            schedule = SeededSchedule(seed, bound)
            info["bound"] = str(bound)
        return FrameScheduler(schedule, decisions=self.decisions, header=info)


def schedule_report(scheduler: FrameScheduler) -> dict[str, Any]:
    """What a finished run's scheduler did, for the outcome and the terminal."""
    report: dict[str, Any] = {
        "mode": scheduler.schedule.mode,
        "decisions": str(scheduler.decisions) if scheduler.decisions else None,
        "released": scheduler.released,
    }
    report.update(scheduler.summary())
    return report


def record_outcome(decisions: Path | None, verdict: str, failed: list[str]) -> None:
    """Append the run's verdict to its decision log (what a replay tries to reproduce)."""
    if decisions is not None and decisions.exists():
        append_outcome(decisions, {"verdict": verdict, "failed": sorted(failed)})
