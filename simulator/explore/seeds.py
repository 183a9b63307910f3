"""`--seeds`: one scenario across many seeds, and what the seeds explored.

On the sim backend a seed fixes the whole schedule (which of the callbacks
ready at one virtual instant runs first, which messages straggle, every
jitter), so a sweep over seeds is a sweep over interleavings, and every
failure replays from its seed alone. On the process and docker backends a
seed fixes the parts' random choices, not the operating system's scheduling:
the sweep reports what each seed did, and a failure's replay command may
need several runs to show it again.

The core (`parse_seeds`, `SeedSweep`, `render`) does no I/O; `sweep` runs
the scenario once per seed through the runner and feeds the core.
"""

from __future__ import annotations

import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tetherbed.simulator.explore.interleaving import diff, fingerprint, steps
from tetherbed.simulator.explore.interleaving import render as render_lines
from tetherbed.simulator.proxy.scheduler.options import ScheduleOptions
from tetherbed.simulator.runner import RunOutcome, replay_command, run_scenario
from tetherbed.simulator.scenario import Scenario, load
from tetherbed.simulator.stop_signals import StopSignals
from tetherbed.simulator.targets import Target

#: The most seeds one `--seeds` may name (a typo like 1..5000000 is refused).
MAX_SEEDS = 100_000
_RANGE = re.compile(r"^(-?\d+)\s*\.\.\s*(-?\d+)$")


class SeedsError(ValueError):
    """A `--seeds` value that names no seeds, or too many."""


def parse_seeds(text: str) -> list[int]:
    """`1..500`, `7`, `1,5,9`, or a mix (`1..3,9`): the seeds, in order, once each."""
    seeds: list[int] = []
    seen: set[int] = set()
    parts = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not part for part in parts):
        raise SeedsError(f"--seeds {text!r}: give N, A..B or a comma-separated list of them")
    for part in parts:
        found = _RANGE.match(part)
        if found:
            first, last = int(found.group(1)), int(found.group(2))
            if last < first:
                raise SeedsError(f"--seeds {text!r}: the range {part} runs backwards")
            if last - first + 1 > MAX_SEEDS:
                raise SeedsError(f"--seeds {text!r}: more than {MAX_SEEDS} seeds")
            chosen = range(first, last + 1)
        else:
            try:
                chosen = range(int(part), int(part) + 1)
            except ValueError:
                raise SeedsError(
                    f"--seeds {text!r}: {part!r} is neither a seed (7) nor a range (1..40)"
                ) from None
        for seed in chosen:
            if seed not in seen:
                seen.add(seed)
                seeds.append(seed)
        if len(seeds) > MAX_SEEDS:
            raise SeedsError(f"--seeds {text!r}: more than {MAX_SEEDS} seeds")
    return seeds


def describe_seeds(seeds: Sequence[int]) -> str:
    """The seeds as a short text: `1..40`, `1..3,9`."""
    runs: list[str] = []
    index = 0
    while index < len(seeds):
        end = index
        while end + 1 < len(seeds) and seeds[end + 1] == seeds[end] + 1:
            end += 1
        first, last = seeds[index], seeds[end]
        runs.append(str(first) if first == last else f"{first}..{last}")
        index = end + 1
    return ",".join(runs)


@dataclass(frozen=True)
class SeedRun:
    """What one seed did."""

    seed: int
    verdict: str
    interleaving: str
    seconds: float
    #: The exact command that runs this seed again.
    replay: str
    #: Why it did not pass (its first line), None when it passed.
    why: str | None = None
    #: Where its history was written (failures only), when it was.
    history: str | None = None
    #: The frame scheduler's decision log (scheduled failures only): `tetherbed
    #: run ... --replay` follows its frame order again.
    decisions: str | None = None

    @property
    def failed(self) -> bool:
        return self.verdict not in ("pass", "not_applicable")

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "verdict": self.verdict,
            "interleaving": self.interleaving,
            "seconds": round(self.seconds, 3),
            "replay": self.replay,
            "why": self.why,
            "decisions": self.decisions,
            "history": self.history,
        }


@dataclass
class SeedSweep:
    """The runs of one scenario across seeds, as they come in."""

    scenario: str
    file: str
    backend: str
    runs: list[SeedRun] = field(default_factory=list)
    #: Each distinct interleaving's lines, as its first seed recorded them.
    lines: dict[str, list[str]] = field(default_factory=dict)

    def add(self, run: SeedRun, lines: list[str]) -> None:
        self.runs.append(run)
        self.lines.setdefault(run.interleaving, lines)

    @property
    def seeds(self) -> list[int]:
        return [run.seed for run in self.runs]

    @property
    def interleavings(self) -> dict[str, list[int]]:
        """Each distinct interleaving and the seeds that produced it, by first seed."""
        found: dict[str, list[int]] = {}
        for run in self.runs:
            found.setdefault(run.interleaving, []).append(run.seed)
        return found

    @property
    def failures(self) -> list[SeedRun]:
        return [run for run in self.runs if run.failed]

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "file": self.file,
            "backend": self.backend,
            "seeds": describe_seeds(self.seeds),
            "runs": len(self.runs),
            "interleavings": [
                {"fingerprint": key, "seeds": seeds, "steps": len(self.lines.get(key, []))}
                for key, seeds in self.interleavings.items()
            ],
            "distinct_interleavings": len(self.interleavings),
            "failures": [run.to_json() for run in self.failures],
            "verdicts": _count(run.verdict for run in self.runs),
        }


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def seed_run(
    outcome: RunOutcome,
    replay_options: Sequence[str] = (),
    history: str | None = None,
    decisions: str | None = None,
) -> tuple[SeedRun, list[str]]:
    """One run's outcome as the sweep keeps it, and its interleaving's lines."""
    lines = steps(outcome.history)
    why = outcome.run_error or outcome.failure
    if why is None and outcome.verdict not in ("pass", "not_applicable"):
        failed = [v.name for v in outcome.verdicts if v.status in ("fail", "error")]
        unknown = [v.name for v in outcome.verdicts if v.unknown]
        why = "checkers: " + ", ".join(failed or [f"{name} (unknown)" for name in unknown])
    replay = shlex.join(
        [
            *shlex.split(replay_command(outcome.scenario, outcome.backend, outcome.seed)),
            *replay_options,
        ]
    )
    run = SeedRun(
        seed=outcome.seed,
        verdict=outcome.verdict,
        interleaving=fingerprint(outcome.history),
        seconds=outcome.seconds,
        replay=replay,
        why=_first_line(why) if why else None,
        history=history,
        decisions=decisions,
    )
    return run, lines


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else text


Progress = Callable[[SeedRun], None]


def sweep(
    scenario: Scenario | Path,
    seeds: Sequence[int],
    backend: str = "sim",
    *,
    target: Target | None = None,
    strict: bool = False,
    stop: StopSignals | None = None,
    replay_options: Sequence[str] = (),
    report: Path | None = None,
    progress: Progress | None = None,
    schedule: ScheduleOptions | None = None,
) -> SeedSweep:
    """Run `scenario` once per seed on `backend` and gather what the seeds did.

    With `report`, each failing seed's history is written to
    `report/<scenario>-<backend>-seed<N>/history.jsonl`. A received stop
    signal ends the sweep after the run it interrupted. With `schedule` (process
    and docker backends) the fault proxy schedules the agents' frames under each
    seed, and a failing seed keeps its decision log next to its history.
    """
    if isinstance(scenario, Path):
        scenario = load(scenario, backend)
    result = SeedSweep(scenario.name, str(scenario.path or ""), backend)
    for seed in seeds:
        if stop is not None and stop.received is not None:
            break
        workdir = Path(tempfile.mkdtemp(prefix="tetherbed-seeds-"))
        seeded = None if schedule is None else schedule.with_decisions(workdir / "decisions.jsonl")
        decisions = None
        try:
            outcome = run_scenario(
                scenario,
                backend,
                seed,
                workdir,
                stop,
                target=target,
                strict=strict,
                schedule=seeded,
            )
            written = None
            if report is not None and outcome.verdict not in ("pass", "not_applicable"):
                folder = report / f"{slug(scenario.name)}-{backend}-seed{seed}"
                folder.mkdir(parents=True, exist_ok=True)
                outcome.history.write(folder / "history.jsonl")
                written = str(folder / "history.jsonl")
                log = workdir / "decisions.jsonl"
                if seeded is not None and log.exists():
                    decisions = str(shutil.copy(log, folder / "decisions.jsonl"))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        run, lines = seed_run(outcome, replay_options, written, decisions)
        result.add(run, lines)
        if progress is not None:
            progress(run)
    return result


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "scenario"


# --- text --------------------------------------------------------------------------


def render(result: SeedSweep, *, show_interleavings: bool = False) -> str:
    """One scenario's sweep for a person: its interleavings, then each failure
    with the command that replays it."""
    out: list[str] = []
    seeds = describe_seeds(result.seeds)
    found = result.interleavings
    out.append(
        f"{result.file or result.scenario} ({result.backend}), seeds {seeds}: "
        f"{len(result.runs)} runs, {len(found)} distinct interleavings, "
        f"{len(result.failures)} failures"
    )
    out.append(f"  {'interleaving':<16}  {'steps':>5}  {'runs':>4}  seeds")
    for key, chosen in found.items():
        out.append(
            f"  {key:<16}  {len(result.lines.get(key, [])):>5}  {len(chosen):>4}  "
            f"{_cut(describe_seeds(sorted(chosen)), 60)}"
        )
    for run in result.failures:
        out.append(f"  {run.verdict.upper()} seed {run.seed} ({run.interleaving}): {run.why}")
        out.append(f"    replay: {run.replay}")
        if run.decisions:
            out.append(f"    frame order: {run.decisions} (replay it: --replay, --times N)")
        if run.history:
            out.append(f"    history: {run.history}")
    if show_interleavings and found:
        keys = list(found)
        first = result.lines[keys[0]]
        out.append(f"  interleaving {keys[0]} (seed {found[keys[0]][0]}):")
        out.extend("    " + line for line in render_lines(first).splitlines())
        for key in keys[1:]:
            out.append(f"  interleaving {key} (seed {found[key][0]}), against the first:")
            text = diff(first, result.lines[key], names=(keys[0], key))
            out.extend("    " + line for line in text.splitlines())
    return "\n".join(out) + "\n"


def summary(results: Sequence[SeedSweep]) -> str:
    """A table of several sweeps: scenario, backend, seeds, interleavings, failures."""
    rows = [("scenario", "backend", "seeds", "runs", "interleavings", "failures")]
    for result in results:
        rows.append(
            (
                Path(result.file).name if result.file else result.scenario,
                result.backend,
                describe_seeds(result.seeds),
                str(len(result.runs)),
                str(len(result.interleavings)),
                str(len(result.failures)),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append(
            "  ".join(
                cell.ljust(width) if i < 3 else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines) + "\n"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
