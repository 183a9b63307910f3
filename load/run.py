"""One load run from start to end: its folder, Locust, the CPU sampler, the report.

Every profile (load/profiles/) builds a plan and a topology, then hands them
here: Locust runs (alone, with forked workers, or as a master), the CPU of
the generator, the hub and the agents is sampled, and afterwards the run's
timeline is read back, plotted, summarised and judged by `--fail-if`.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tetherbed.load import locust_process
from tetherbed.load.analysis.hub_metrics import HubDelta, scrape
from tetherbed.load.analysis.plot import write_plot
from tetherbed.load.analysis.timeline import (
    Figures,
    Second,
    Window,
    figures,
    names_of,
    read_stages,
    read_timeline,
    select,
)
from tetherbed.load.cpu_sampler import CpuSampler
from tetherbed.load.fail_if import Condition, ConditionError, evaluate
from tetherbed.load.locust_process import Distribution, LocustRun
from tetherbed.load.plan import Plan
from tetherbed.load.topology import Topology


@dataclass
class RunResult:
    """What one Locust run produced, read back."""

    folder: Path
    exit_code: int
    rows: list[Second]
    windows: list[Window]
    cpu: dict[str, float]
    processes: dict[str, int]
    wall_seconds: float
    hub: HubDelta | None = None

    def figures(
        self, kind: str, names: list[str] | None = None, window: Window | None = None
    ) -> Figures:
        rows = select(self.rows, types=[kind], names=names)
        if window is None:
            return figures(rows)
        return figures(rows, window.start, window.end)

    def counts(self, kind: str) -> dict[str, int]:
        return names_of(self.rows, kind)


def run_locust(
    plan: Plan,
    folder: Path,
    distribution: Distribution,
    topology: Topology,
    *,
    tick: Callable[[LocustRun], None] | None = None,
    extra_cpu: dict[str, int | None] | None = None,
) -> RunResult:
    """Run Locust on `plan` until its stages are over (or `tick` stops it early)."""
    folder.mkdir(parents=True, exist_ok=True)
    metrics_url = topology.metrics_url()
    before = scrape(metrics_url) if metrics_url else None
    sampler = CpuSampler()
    sampler.watch("hub", topology.hub_pid)
    for process in topology.processes:
        if process.name.startswith(("agent", "real")):
            sampler.watch("agents", process.pid)
        elif process.name == "recorder":
            sampler.watch("recorder", process.pid)
        elif process.name == "bridge":  # the clients' side: part of the generator
            sampler.watch("generator", process.pid)
    for group, pid in (extra_cpu or {}).items():
        sampler.watch(group, pid)
    started = time.monotonic()
    run = locust_process.start(plan, folder, distribution)
    sampler.watch("generator", run.process.pid)
    timeout = plan.total_seconds + locust_process.GRACE_SECONDS
    if distribution.expect_workers:
        timeout += 3600  # a master waits for workers someone else starts
    try:

        def on_tick() -> None:
            sampler.sample()
            if tick is not None:
                tick(run)

        code = run.wait(timeout, tick=on_tick)
    finally:
        run.kill()
    sampler.sample(force=True)
    wall = time.monotonic() - started
    after = scrape(metrics_url) if metrics_url else None
    hub = HubDelta(before, after) if before is not None and after is not None else None
    if code != 0:
        print(f"locust exited with {code}; its log:\n{run.log()}", file=sys.stderr)
    groups = ("generator", "hub", "agents", "recorder", *(extra_cpu or {}))
    return RunResult(
        folder=folder,
        exit_code=code,
        rows=read_timeline(folder),
        windows=read_stages(folder),
        cpu={g: sampler.seconds(g) for g in groups},
        processes={g: sampler.processes(g) for g in groups},
        wall_seconds=wall,
        hub=hub,
    )


# --- reporting --------------------------------------------------------------------------


@dataclass
class Report:
    """The summary of a run: lines for the terminal, figures for JSON and --fail-if."""

    profile: str
    folder: Path
    lines: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    #: The metrics `--fail-if` may name (None: not measured).
    metrics: dict[str, float | None] = field(default_factory=dict)
    #: Problems that fail the run whatever --fail-if says (a smoke run's zero requests).
    problems: list[str] = field(default_factory=list)

    def add(self, line: str = "") -> None:
        self.lines.append(line)


def request_table(result: RunResult, kinds: list[str]) -> list[str]:
    """One line per request name of these types, then the total."""
    lines = [
        f"  {'type':<7}{'name':<34}{'requests':>9}{'fails':>7}{'req/s':>9}"
        f"{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
    ]
    for kind in kinds:
        for name in sorted(result.counts(kind)):
            found = result.figures(kind, [name])
            lines.append(_row(kind, name, found))
    return lines


def _row(kind: str, name: str, found: Figures) -> str:
    return (
        f"  {kind:<7}{name[:33]:<34}{found.requests:>9,}{found.failures:>7,}{found.rps:>9,.1f}"
        f"{_ms(found.p50_ms):>9}{_ms(found.p99_ms):>9}{_ms(found.max_ms):>9}"
    )


def _ms(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else "-"


def standard_metrics(found: Figures) -> dict[str, float | None]:
    """The metrics every run has, for its main request type."""
    return {
        "requests": float(found.requests),
        "errors": float(found.failures),
        "error_rate": 100.0 * found.failures / found.requests if found.requests else 0.0,
        "rps": found.rps,
        "p50": _finite(found.p50_ms),
        "p95": _finite(found.p95_ms),
        "p99": _finite(found.p99_ms),
        "max": _finite(found.max_ms),
        "mean": _finite(found.mean_ms),
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def finish(report: Report, result: RunResult, conditions: list[Condition], *, as_json: bool) -> int:
    """Write the plot and summary.json, print, apply --fail-if; the exit status."""
    write_plot(
        report.folder / "plot.svg",
        result.rows,
        result.windows,
        title=f"tetherbed load {report.profile}",
        p99_bound_ms=report.figures.get("p99_bound_ms"),
    )
    try:
        failed = evaluate(conditions, report.metrics)
        status_error = None
    except ConditionError as exc:
        failed, status_error = [], str(exc)
    document = {
        "profile": report.profile,
        "folder": str(report.folder),
        "figures": report.figures,
        "metrics": report.metrics,
        "problems": report.problems,
        "fail_if": {"conditions": [c.text for c in conditions], "held": failed},
        "cpu_seconds": result.cpu,
        "wall_seconds": round(result.wall_seconds, 2),
        "locust_exit_code": result.exit_code,
    }
    (report.folder / "summary.json").write_text(
        json.dumps(document, indent=2, default=str), encoding="utf-8"
    )
    if as_json:
        print(json.dumps(document, indent=2, default=str))
    else:
        print("\n".join(report.lines))
        print(
            f"\nreports in {report.folder}: summary.json, plot.svg, locust/report.html, "
            "locust/locust_stats.csv, locust/locust_stats_history.csv"
        )
    for problem in report.problems:
        print(f"FAILED: {problem}", file=sys.stderr)
    for held in failed:
        print(f"FAILED --fail-if {held}", file=sys.stderr)
    if status_error is not None:
        print(f"error: {status_error}", file=sys.stderr)
        return 2
    if result.exit_code != 0:
        return 1
    return 1 if failed or report.problems else 0


def generator_lines(
    result: RunResult, workers: int, echo_rps: float | None, hub_rps: float
) -> list[str]:
    """Whether the generator, not the hub, may be what limits the run."""
    processes = max(result.processes.get("generator", 1), 1)
    busy = result.cpu.get("generator", 0.0) / max(result.wall_seconds, 1e-9)
    lines = [
        f"generator: {processes} Locust process(es), {busy * 100:.0f}% of a core in all "
        f"({busy / max(workers, 1) * 100:.0f}% per worker)"
    ]
    if echo_rps:
        ratio = hub_rps / (echo_rps * max(workers, 1))
        lines.append(
            f"  one Locust process against a raw websockets echo: {echo_rps:,.0f} req/s; "
            f"this run's {hub_rps:,.0f} req/s through the hub is {ratio:.2f} of what "
            f"{max(workers, 1)} such process(es) can send"
        )
        if ratio >= 0.8:
            lines.append(
                "  the generator is close to its ceiling: the hub may be faster than measured "
                "(use --workers, or more machines with --master/--worker)"
            )
    return lines
