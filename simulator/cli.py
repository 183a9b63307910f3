"""`tetherbed run PATH... [--backend sim|process|docker] [--seed N] [--report DIR]`.

Runs every scenario, prints one line each (verdict, seconds, scenario) and,
for one that did not pass, why: each failing checker's summary and first
piece of evidence, or the error's message. Then a table (scenario, backend,
verdict, seconds, seed), the exact command that replays each failure, and
where the reports are: per scenario `history.jsonl` and `timeline.html`, for
the whole run `results.json` and `junit.xml`.

Exit status: 0 every scenario passed; 1 one failed or could not be judged
(its verdict says which); 2 the input is wrong (a scenario file, or a folder
without any), before anything ran; 128 + N when signal N (SIGTERM, SIGINT)
stopped the run, after everything it started was stopped and the partial
report written.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tetherbed.simulator.reports import RunResult, overall_verdict
from tetherbed.simulator.reports.junit import write_junit
from tetherbed.simulator.reports.results import write_results
from tetherbed.simulator.reports.table import print_table
from tetherbed.simulator.reports.timeline.render import write_timeline
from tetherbed.simulator.runner import RunOutcome, replay_command, run_scenario
from tetherbed.simulator.scenario import Scenario, ScenarioError, load_all, shipped_scenarios
from tetherbed.simulator.stop_signals import StopSignals

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: Where the why-lines under a verdict line start.
_INDENT = " " * 11


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tetherbed run", description="Run scenarios and check their histories."
    )
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help="scenario files or folders; a name that does not exist here is looked up among "
        "the shipped scenarios (scenarios/, partition_race, ...)",
    )
    parser.add_argument("--shipped", action="store_true", help="every shipped scenario")
    parser.add_argument("--backend", default="sim", choices=["sim", "process", "docker"])
    parser.add_argument("--seed", type=int, default=None, help="default: each scenario's own")
    parser.add_argument("--report", type=Path, default=Path("reports"), help="report folder")
    parser.add_argument(
        "--keep", action="store_true", help="keep each run's working folder (and say where)"
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=None,
        help="log the hub's, agents' and runner's messages at this level to stderr",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="same as --log-level DEBUG")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.shipped:
        args.paths.append(shipped_scenarios())
    if not args.paths:
        parser.error("give scenario files or folders, or --shipped")
    _logging(args.log_level or ("DEBUG" if args.verbose else None))
    with StopSignals() as stop:
        try:
            scenarios = load_all(args.paths, args.backend)
        except ScenarioError as exc:
            print(f"tetherbed run: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"tetherbed run: {exc}", file=sys.stderr)
            return 2
        runnable = [s for s in scenarios if args.backend in s.backends]
        if not runnable:
            names = ", ".join(str(p) for p in args.paths)
            print(
                f"tetherbed run: no scenario in {names} runs on the {args.backend} backend",
                file=sys.stderr,
            )
            return 2
        results = _run_all(scenarios, args, stop)
        _write_reports(results, args.report)
        if stop.received is not None:
            print(
                f"tetherbed run: stopped by {stop.name}; everything the run started was "
                f"stopped, and the report holds what ran: {args.report}/",
                file=sys.stderr,
            )
            return 128 + stop.received
    return 0 if all(r.verdict == "pass" for r in results) else 1


def _logging(level: str | None) -> None:
    logger = logging.getLogger("tetherbed")
    if level is None:
        logger.setLevel(logging.CRITICAL)  # the parts' chatter would bury the verdicts
        return
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logger.setLevel(level)


def _run_all(scenarios: list[Scenario], args: argparse.Namespace, stop: StopSignals) -> list:
    args.report.mkdir(parents=True, exist_ok=True)
    results: list[RunResult] = []
    for scenario in scenarios:
        if stop.received is not None:
            break
        if args.backend not in scenario.backends:
            only = ", ".join(scenario.backends)
            print(f"  {'skip':<5} {'':12}{scenario.name} (runs on {only} only)", flush=True)
            continue
        if args.backend != "sim":  # real time: say what is running while it runs
            print(f"  {'run':<5} {'':12}{scenario.name} ...", flush=True)
        seed = scenario.seed if args.seed is None else args.seed
        workdir = Path(tempfile.mkdtemp(prefix=f"tetherbed-{_slug(scenario.name)}-"))
        try:
            outcome = run_scenario(scenario, args.backend, seed, workdir, stop)
        finally:
            if not args.keep:
                shutil.rmtree(workdir, ignore_errors=True)
        result = _report(outcome, args.report)
        results.append(result)
        print(f"  {result.verdict:<5} {result.seconds:8.2f} s  {scenario.name}", flush=True)
        for line in why(result):
            print(f"{_INDENT}{line}", flush=True)
        if args.keep:
            print(f"{_INDENT}kept {workdir}", flush=True)
    return results


def _write_reports(results: list[RunResult], report: Path) -> None:
    write_results(report / "results.json", results)
    write_junit(report / "junit.xml", results)
    if not results:
        return
    print()
    print_table(results)
    print(f"reports: {report}/ (results.json, junit.xml, */history.jsonl, */timeline.html)")
    shown = next((r for r in results if r.verdict != "pass"), results[-1])
    if shown.history_path:
        timeline = Path(shown.history_path).with_name("timeline.html")
        print(f"timeline: {timeline} (open it in a browser: {timeline.resolve().as_uri()})")


def why(result: RunResult) -> list[str]:
    """A few lines that say why a run did not pass, for the terminal."""
    lines: list[str] = []
    for verdict in result.crashed_checkers:
        lines.append(f"checker {verdict.name} crashed: {verdict.error}")
    if result.error is not None and not result.crashed_checkers:
        lines.append(_first_line(result.error))
    for verdict in result.failed_checkers:
        lines.append(f"{verdict.name}: {_cut(verdict.summary, 160)}")
        if verdict.evidence:
            lines.append(f"  evidence: {_evidence(verdict.evidence[0])}")
    return lines


def _evidence(entry: dict) -> str:
    """The first record a checker blames, as the history holds it."""
    time = entry.get("time")
    when = f"{time:.3f} s" if isinstance(time, int | float) else "?"
    what = f"#{entry.get('index')} {when} {entry.get('process')} {entry.get('type')} "
    what += str(entry.get("f"))
    if entry.get("role"):
        what += f" ({entry['role']})"
    value = json.dumps(entry.get("value"), sort_keys=True, ensure_ascii=False, default=str)
    return _cut(f"{what} {value}", 160)


def _first_line(text: str) -> str:
    stripped = text.strip().splitlines()
    return stripped[0] if stripped else "runner error"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _report(outcome: RunOutcome, report_dir: Path) -> RunResult:
    scenario = outcome.scenario
    folder = report_dir / f"{_slug(scenario.name)}-{outcome.backend}"
    folder.mkdir(parents=True, exist_ok=True)
    history_path = folder / "history.jsonl"
    outcome.history.write(history_path)
    error = outcome.error or outcome.step_failure
    verdict = overall_verdict(outcome.verdicts, error)
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
        replay=replay_command(scenario, outcome.backend, outcome.seed),
        history_path=str(history_path),
    )


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "scenario"
