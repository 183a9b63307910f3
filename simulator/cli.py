"""`tetherbed run PATH... [--backend sim|process|docker] [--seed N] [--report DIR]`.

Runs every scenario against the target (Tetherbed's own parts, or an agent
command, a hub URL or command and their adapters: docs/targets.md), prints one
line each (verdict, seconds, scenario, and what was unknown or not applicable),
and writes the reports: per scenario `history.jsonl` and `timeline.html`, for
the whole run `results.json` and `junit.xml`. A failing scenario prints the
exact command that replays it; the exit status is 1 when any scenario failed
(with `--strict`, also when a checker had no evidence), 2 when a scenario or
the target is invalid.
"""

from __future__ import annotations

import argparse
import logging
import re
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tetherbed.simulator.reports import RunResult
from tetherbed.simulator.reports.junit import write_junit
from tetherbed.simulator.reports.results import write_results
from tetherbed.simulator.reports.table import print_table
from tetherbed.simulator.reports.timeline.render import write_timeline
from tetherbed.simulator.runner import RunOutcome, replay_command, run_scenario
from tetherbed.simulator.scenario import ScenarioError, load_all
from tetherbed.simulator.targets import TargetError
from tetherbed.simulator.targets.arguments import add_target_arguments, target_from_arguments


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tetherbed run", description="Run scenarios and check their histories."
    )
    parser.add_argument("paths", nargs="+", type=Path, help="scenario files or folders")
    parser.add_argument("--backend", default="sim", choices=["sim", "process", "docker"])
    parser.add_argument("--seed", type=int, default=None, help="default: each scenario's own")
    parser.add_argument("--report", type=Path, default=Path("reports"), help="report folder")
    parser.add_argument("--keep", action="store_true", help="keep each run's working folder")
    parser.add_argument("-v", "--verbose", action="store_true", help="show hub and agent logs")
    parser.add_argument(
        "--strict", action="store_true", help="a checker without evidence (unknown) fails the run"
    )
    add_target_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.getLogger("tetherbed").setLevel(logging.DEBUG if args.verbose else logging.CRITICAL)
    try:
        scenarios = load_all(args.paths)
        target = target_from_arguments(args)
    except (ScenarioError, TargetError, OSError) as exc:
        print(f"tetherbed run: {exc}", file=sys.stderr)
        return 2
    if not target.is_reference:
        if args.backend == "docker" and not target.hub.is_reference:
            print(
                "tetherbed run: the docker backend runs Tetherbed's hub in a container; "
                "test a third-party hub with --backend process",
                file=sys.stderr,
            )
            return 2
        if args.backend == "sim":
            print(
                "tetherbed run: the sim backend runs only Tetherbed's own parts (virtual time); "
                "use --backend process for a third-party target",
                file=sys.stderr,
            )
            return 2
        print(f"target: {target.describe()}", flush=True)
    args.report.mkdir(parents=True, exist_ok=True)
    results: list[RunResult] = []
    for scenario in scenarios:
        seed = scenario.seed if args.seed is None else args.seed
        with tempfile.TemporaryDirectory(prefix="tetherbed-run-") as tmp:
            workdir = Path(tmp)
            if args.keep:
                workdir = Path(tempfile.mkdtemp(prefix=f"tetherbed-{_slug(scenario.name)}-"))
            outcome = run_scenario(
                scenario, args.backend, seed, workdir, target=target, strict=args.strict
            )
        result = _report(outcome, args.report, _replay_options(args))
        results.append(result)
        print(
            f"  {result.verdict:<5} {result.seconds:8.2f} s  {scenario.name}{_notes(result)}",
            flush=True,
        )
    write_results(args.report / "results.json", results)
    write_junit(args.report / "junit.xml", results)
    print()
    print_table(results)
    print(f"reports: {args.report}/ (results.json, junit.xml, */history.jsonl, */timeline.html)")
    return 0 if all(r.verdict == "pass" for r in results) else 1


def _notes(result: RunResult) -> str:
    """What the one-line verdict does not say: unknowns and skipped steps."""
    notes = []
    unknown = result.unknown_checkers
    if unknown:
        notes.append(f"{len(unknown)} unknown: {', '.join(v.name for v in unknown)}")
    if result.not_applicable:
        notes.append(f"{result.not_applicable} reference-only step(s) n/a")
    return f"  [{'; '.join(notes)}]" if notes else ""


def _replay_options(args: argparse.Namespace) -> list[str]:
    """The target options a replay command must repeat."""
    options: list[str] = []
    for name in (
        "target",
        "agent_command",
        "hub_url",
        "hub_command",
        "hub_tokens",
        "client_adapter",
        "admin_adapter",
        "hub_ca",
        "recorder_cert",
        "recorder_key",
    ):
        value = getattr(args, name)
        if value is not None:
            options += ["--" + name.replace("_", "-"), str(value)]
    options += [flag for flag in ("--insecure", "--strict") if getattr(args, flag[2:])]
    return options


def _report(outcome: RunOutcome, report_dir: Path, replay_options: list[str]) -> RunResult:
    scenario = outcome.scenario
    folder = report_dir / f"{_slug(scenario.name)}-{outcome.backend}"
    folder.mkdir(parents=True, exist_ok=True)
    history_path = folder / "history.jsonl"
    outcome.history.write(history_path)
    error = outcome.error or outcome.step_failure
    verdict = outcome.verdict
    write_timeline(
        folder / "timeline.html",
        outcome.history,
        outcome.verdicts,
        scenario.name,
        scenario=scenario.name,
        backend=outcome.backend,
        seed=outcome.seed,
        verdict=verdict,
    )
    return RunResult(
        scenario=scenario.name,
        file=str(scenario.path or ""),
        backend=outcome.backend,
        seed=outcome.seed,
        verdict=verdict,
        seconds=round(outcome.seconds, 3),
        verdicts=outcome.verdicts,
        error=error,
        replay=shlex.join(
            [*shlex.split(replay_command(scenario, outcome.backend, outcome.seed)), *replay_options]
        ),
        history_path=str(history_path),
        not_applicable=len(outcome.not_applicable),
        strict=outcome.strict,
    )


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "scenario"
