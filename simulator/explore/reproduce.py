"""How often a recorded failure comes back when its frame order is replayed.

Real processes are not deterministic: replaying a decision log makes the
proxies release frames in the recorded order, but the agent and the hub still
run on a real clock, so a frame may come late, early, or not at all. Each run
says how far it kept to the log (`divergence`), and a run *reproduces* the
failure when it fails the same way the recorded run did (the same failing
checkers, and a failed step if the recorded run had one; a pass, for the log
of a run that passed).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tetherbed.simulator.proxy.scheduler import DecisionLog, ScheduleOptions
from tetherbed.simulator.runner import RunOutcome, run_scenario
from tetherbed.simulator.scenario import Scenario
from tetherbed.simulator.stop_signals import StopSignals
from tetherbed.simulator.targets import Target


def failure_signature(outcome: RunOutcome) -> list[str]:
    """The failing checkers' names, plus `step` when an expect or assert failed."""
    failed = [v.name for v in outcome.verdicts if v.failed]
    return sorted([*failed, "step"] if outcome.failure is not None else failed)


@dataclass
class ReplayRun:
    index: int
    outcome: RunOutcome
    reproduced: bool

    @property
    def divergence(self) -> dict[str, Any]:
        return dict((self.outcome.schedule or {}).get("divergence") or {})

    @property
    def followed_exactly(self) -> bool:
        d = self.divergence
        return bool(d) and not (d.get("unexpected") or d.get("changed") or d.get("missing"))


@dataclass
class Reproduction:
    log: Path
    wanted: dict[str, Any] | None
    runs: list[ReplayRun] = field(default_factory=list)

    @property
    def reproduced(self) -> int:
        return sum(run.reproduced for run in self.runs)

    def summary(self) -> str:
        runs = len(self.runs)
        exact = sum(run.followed_exactly for run in self.runs)
        if self.wanted is None:
            what = "the log has no recorded verdict; counted: runs that failed"
        elif self.wanted.get("verdict") == "pass":
            what = "the recorded run passed; counted: runs that passed too"
        else:
            failed = [
                "a failed expect/assert step" if name == "step" else f"checker {name}"
                for name in self.wanted.get("failed") or []
            ]
            what = f"the recorded failure: {', '.join(failed) or '?'}"
        return (
            f"reproduced {self.reproduced} of {runs} runs ({what}); the frame order followed "
            f"the log exactly in {exact} of {runs}. Real processes are not deterministic: "
            "the replay enforces the recorded release order, and frames that did not come "
            "as recorded are counted as divergence."
        )


def reproduce(
    scenario: Scenario,
    backend: str,
    log: Path,
    times: int,
    *,
    target: Target | None = None,
    seed: int | None = None,
    wait: float | None = None,
    stop: StopSignals | None = None,
    decisions_folder: Path | None = None,
    keep: bool = False,
    on_run: Callable[[ReplayRun], None] | None = None,
) -> Reproduction:
    """Replay `log` `times` times (its own seed unless `seed`)."""
    recorded = DecisionLog.read(log)
    run_seed = seed if seed is not None else int(recorded.header.get("seed", scenario.seed))
    result = Reproduction(log, recorded.outcome)
    for index in range(1, times + 1):
        if stop is not None and stop.received is not None:
            break
        decisions = decisions_folder / f"replay-{index}.jsonl" if decisions_folder else None
        options = ScheduleOptions(replay=recorded, replay_path=log, decisions=decisions)
        if wait is not None:
            options = replace(options, wait=wait)
        workdir = Path(tempfile.mkdtemp(prefix="tetherbed-replay-"))
        try:
            outcome = run_scenario(
                scenario, backend, run_seed, workdir, stop, target=target, schedule=options
            )
        finally:
            if not keep:
                shutil.rmtree(workdir, ignore_errors=True)
        run = ReplayRun(index, outcome, _reproduced(outcome, recorded.outcome))
        result.runs.append(run)
        if on_run is not None:
            on_run(run)
    return result


def _reproduced(outcome: RunOutcome, wanted: dict[str, Any] | None) -> bool:
    """The run ended as the recorded one did: the same failure, or a pass for a
    pass (a log without a verdict: any failure)."""
    if wanted is not None and wanted.get("verdict") == "pass":
        return outcome.verdict == "pass"
    if outcome.verdict != "fail":
        return False
    if wanted is None or wanted.get("verdict") != "fail":
        return True
    return failure_signature(outcome) == sorted(wanted.get("failed") or [])
