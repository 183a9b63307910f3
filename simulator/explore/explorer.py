"""Running generated histories across seeds and judging each, Jepsen-style.

For each seed the scenario's `generate:` and `nemesis:` become a plan
(`generator.py`), the plan runs as an ordinary scenario on the chosen backend
against the chosen target, and the usual checkers judge its history. Each
seed's verdict and interleaving (`interleaving.fingerprint`) are kept; the
first failure is shrunk (`shrink.py`) into a small plan that fails the same
way, ready to export as a step-list scenario.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tetherbed.simulator.explore.generator import plan_for
from tetherbed.simulator.explore.interleaving import fingerprint
from tetherbed.simulator.explore.plan import Plan
from tetherbed.simulator.explore.shrink import DEFAULT_BUDGET, Attempt, Shrunk, shrink
from tetherbed.simulator.proxy.scheduler.options import ScheduleOptions
from tetherbed.simulator.runner import RunOutcome, run_scenario
from tetherbed.simulator.scenario import Scenario, parse
from tetherbed.simulator.stop_signals import StopSignals
from tetherbed.simulator.targets import Target


@dataclass(frozen=True, slots=True)
class SeedResult:
    seed: int
    verdict: str
    interleaving: str
    seconds: float
    #: Checkers that failed, and the first line of why each did.
    failed: tuple[tuple[str, str], ...]
    error: str | None
    size: dict

    @property
    def failed_names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.failed)


@dataclass
class Explorer:
    """Runs plans of one scenario on one backend against one target."""

    scenario: Scenario
    backend: str
    target: Target | None = None
    strict: bool = False
    stop: StopSignals | None = None
    #: On process and docker: the agents' proxies schedule their frames under
    #: each plan's seed (`--schedule`), so the seed also picks a frame order.
    schedule: ScheduleOptions | None = None
    #: Seeds run so far, and how many ran along each interleaving.
    runs: int = 0
    seen_interleavings: dict[str, int] = field(default_factory=dict)

    def run_plan(self, plan: Plan) -> RunOutcome:
        scenario = parse(plan.document(), self.scenario.path, self.backend)
        workdir = Path(tempfile.mkdtemp(prefix="tetherbed-explore-"))
        try:
            return run_scenario(
                scenario,
                self.backend,
                plan.seed,
                workdir,
                self.stop,
                target=self.target,
                strict=self.strict,
                schedule=self.schedule,
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def run_seed(self, seed: int) -> tuple[SeedResult, RunOutcome, Plan]:
        plan = plan_for(self.scenario, seed)
        started = time.monotonic()
        outcome = self.run_plan(plan)
        failed = tuple(
            (v.name, _first_line(v.summary)) for v in outcome.verdicts if v.failed or v.error
        )
        if outcome.failure is not None:
            failed += (("step", _first_line(outcome.failure)),)
        error = outcome.run_error
        result = SeedResult(
            seed=seed,
            verdict=outcome.verdict,
            interleaving=fingerprint(outcome.history),
            seconds=round(time.monotonic() - started, 3),
            failed=failed,
            error=_first_line(error) if error else None,
            size=plan.size(),
        )
        self.runs += 1
        self.seen_interleavings[result.interleaving] = (
            self.seen_interleavings.get(result.interleaving, 0) + 1
        )
        return result, outcome, plan

    def explore(
        self, seeds: Iterable[int], report: Callable[[SeedResult], None] | None = None
    ) -> list[tuple[SeedResult, Plan]]:
        results = []
        for seed in seeds:
            if self.stop is not None and self.stop.received is not None:
                break
            result, _, plan = self.run_seed(seed)
            results.append((result, plan))
            if report is not None:
                report(result)
        return results

    def attempt(self, plan: Plan) -> Attempt:
        outcome = self.run_plan(plan)
        failed = frozenset(v.name for v in outcome.verdicts if v.failed)
        if outcome.failure is not None:
            failed |= {"step"}
        return Attempt(outcome.verdict, failed)

    def shrink(self, plan: Plan, failed: frozenset[str], budget: int = DEFAULT_BUDGET) -> Shrunk:
        return shrink(plan, self.attempt, failed, budget=budget)


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    line = lines[0] if lines else ""
    return line if len(line) <= 200 else line[:199] + "…"
