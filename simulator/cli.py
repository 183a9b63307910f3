"""`tetherbed run PATH... [--backend sim|process|docker] [--seed N] [--report DIR]`.

On the process and docker backends, `--schedule [BOUND]` makes the agents'
proxies release every WebSocket message in an order drawn from the seed and
write a decision log; `--replay DECISIONS [--times N]` replays one and says
how often the failure came back (docs/explore.md).

Runs every scenario against the target — Tetherbed's own parts, or an agent
command, a hub URL or command and their adapters (docs/targets.md) — prints
one line each (verdict, seconds, scenario, and which checkers had no evidence
or which reference-only steps did not apply) and, for one that did not pass,
why: each failing checker's summary and first piece of evidence, or the
error's message. Then a table (scenario, backend, verdict, seconds, seed),
the exact command that replays each failure, and where the reports are: per
scenario `history.jsonl` and `timeline.html`, for the whole run
`results.json` and `junit.xml`.

With `--seeds 1..500` (or `7`, `1,5,9`) each scenario runs once per seed
instead (`simulator/explore/seeds.py`): it prints the distinct interleavings
the seeds explored, every seed whose verdict was not pass with the command
that replays it, and a table over the scenarios (`--json`: the same as JSON);
a failing seed's history is written under the report folder.

Exit status: 0 every scenario passed (or did not apply to the target: a
third-party part did not negotiate an extension the scenario needs, which is
reported as `n/a`, neither a pass nor a failure); 1 one failed or could not be judged
(its verdict says which; with `--strict`, a checker without evidence fails);
2 the input is wrong (a scenario file, a folder without any, or the target),
before anything ran; 128 + N when signal N (SIGTERM, SIGINT) stopped the run,
after everything it started was stopped and the partial report written.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tetherbed.simulator.explore.reproduce import ReplayRun, failure_signature, reproduce
from tetherbed.simulator.proxy.scheduler import DecisionLogError
from tetherbed.simulator.proxy.scheduler.arguments import (
    DEFAULT_TIMES,
    add_schedule_arguments,
    check_schedule_arguments,
    schedule_from_arguments,
)
from tetherbed.simulator.reports import RunResult
from tetherbed.simulator.reports.junit import write_junit
from tetherbed.simulator.reports.results import write_results
from tetherbed.simulator.reports.table import print_table
from tetherbed.simulator.reports.timeline.render import write_timeline
from tetherbed.simulator.runner import RunOutcome, replay_command, run_scenario
from tetherbed.simulator.scenario import Scenario, ScenarioError, load_all, shipped_scenarios
from tetherbed.simulator.scenario.dsh import reference_parts_only
from tetherbed.simulator.stop_signals import StopSignals
from tetherbed.simulator.targets import Target, TargetError
from tetherbed.simulator.targets.arguments import add_target_arguments, target_from_arguments

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: Where the why-lines under a verdict line start.
_INDENT = " " * 11
#: A verdict as the one-line result shows it (the table spells it out).
_LABELS = {"not_applicable": "n/a"}


def build_parser() -> argparse.ArgumentParser:
    from tetherbed.simulator.explore import seeds_command  # --seeds (its own module)

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
    seeds_command.add_seed_arguments(parser)
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
    parser.add_argument(
        "--strict", action="store_true", help="a checker without evidence (unknown) fails the run"
    )
    add_target_arguments(parser)
    add_schedule_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.shipped:
        args.paths.append(shipped_scenarios())
    if not args.paths:
        parser.error("give scenario files or folders, or --shipped")
    from tetherbed.simulator.explore import seeds_command
    from tetherbed.simulator.explore.seeds import SeedsError

    try:
        seeds = seeds_command.seeds_from_arguments(args)
    except SeedsError as exc:
        print(f"tetherbed run: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        parser.error(str(exc))
    _logging(args.log_level or ("DEBUG" if args.verbose else None))
    with StopSignals() as stop:
        try:
            scenarios = load_all(args.paths, args.backend)
            target = target_from_arguments(args)
        except (ScenarioError, TargetError) as exc:
            print(f"tetherbed run: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"tetherbed run: {exc}", file=sys.stderr)
            return 2
        if seeds is not None and any(args.backend in s.backends for s in scenarios):
            refusal = _unsupported(target, args.backend) or check_schedule_arguments(
                args, args.backend
            )
            if refusal is None and args.replay is not None:
                refusal = "--seeds explores seeds and --replay replays one log: give one of them"
            if refusal is not None:
                print(f"tetherbed run: {refusal}", file=sys.stderr)
                return 2
            if not target.is_reference and not args.json:
                print(f"target: {target.describe()}", flush=True)
            return seeds_command.run_seeds(
                scenarios, seeds, args, stop, target=target, replay_options=_replay_options
            )
        runnable = [s for s in scenarios if args.backend in s.backends]
        if not runnable:
            names = ", ".join(str(p) for p in args.paths)
            print(
                f"tetherbed run: no scenario in {names} runs on the {args.backend} backend",
                file=sys.stderr,
            )
            return 2
        refusal = _unsupported(target, args.backend) or check_schedule_arguments(args, args.backend)
        if refusal is None and args.replay is not None and len(runnable) != 1:
            refusal = "--replay replays one scenario: give exactly one"
        if refusal is not None:
            print(f"tetherbed run: {refusal}", file=sys.stderr)
            return 2
        if not target.is_reference:
            print(f"target: {target.describe()}", flush=True)
        if args.replay is not None:
            try:
                return _replay(runnable[0], args, stop, target)
            except DecisionLogError as exc:
                print(f"tetherbed run: {exc}", file=sys.stderr)
                return 2
        results = _run_all(scenarios, args, stop, target)
        _write_reports(results, args.report)
        if stop.received is not None:
            print(
                f"tetherbed run: stopped by {stop.name}; everything the run started was "
                f"stopped, and the report holds what ran: {args.report}/",
                file=sys.stderr,
            )
            return 128 + stop.received
    return 0 if all(r.verdict in ("pass", "not_applicable") for r in results) else 1


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


def _unsupported(target: Target, backend: str) -> str | None:
    """Why `backend` cannot run this target (None: it can)."""
    if target.is_reference:
        return None
    if backend == "sim":
        return (
            "the sim backend runs only Tetherbed's own parts (virtual time); "
            "use --backend process for a third-party target"
        )
    if backend == "docker" and not target.hub.is_reference:
        return (
            "the docker backend runs Tetherbed's hub in a container; "
            "test a third-party hub with --backend process"
        )
    return None


def _run_all(
    scenarios: list[Scenario], args: argparse.Namespace, stop: StopSignals, target: Target
) -> list:
    args.report.mkdir(parents=True, exist_ok=True)
    results: list[RunResult] = []
    for scenario in scenarios:
        if stop.received is not None:
            break
        if args.backend not in scenario.backends:
            only = ", ".join(scenario.backends)
            print(f"  {'skip':<5} {'':12}{scenario.name} (runs on {only} only)", flush=True)
            continue
        needs = reference_parts_only(
            scenario.topology,
            hub_is_reference=target.hub.is_reference,
            agent_is_reference=target.agent.is_reference,
        )
        if needs is not None:
            print(f"  {'skip':<5} {'':12}{scenario.name} ({needs})", flush=True)
            continue
        if args.backend != "sim":  # real time: say what is running while it runs
            print(f"  {'run':<5} {'':12}{scenario.name} ...", flush=True)
        seed = scenario.seed if args.seed is None else args.seed
        workdir = Path(tempfile.mkdtemp(prefix=f"tetherbed-{_slug(scenario.name)}-"))
        decisions = args.report / f"{_slug(scenario.name)}-{args.backend}" / "decisions.jsonl"
        schedule = schedule_from_arguments(args, decisions=decisions)
        try:
            outcome = run_scenario(
                scenario,
                args.backend,
                seed,
                workdir,
                stop,
                target=target,
                strict=args.strict,
                schedule=schedule,
            )
        finally:
            if not args.keep:
                shutil.rmtree(workdir, ignore_errors=True)
        result = _report(outcome, args.report, _replay_options(args))
        results.append(result)
        label = _LABELS.get(result.verdict, result.verdict)
        print(
            f"  {label:<5} {result.seconds:8.2f} s  {scenario.name}{_notes(result)}",
            flush=True,
        )
        for line in why(result):
            print(f"{_INDENT}{line}", flush=True)
        if schedule is not None:
            _print_decisions(outcome, decisions, args, scenario)
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
    shown = next((r for r in results if r.verdict not in ("pass", "not_applicable")), results[-1])
    if shown.history_path:
        timeline = Path(shown.history_path).with_name("timeline.html")
        print(f"timeline: {timeline} (open it in a browser: {timeline.resolve().as_uri()})")


def why(result: RunResult) -> list[str]:
    """A few lines that say why a run did not pass, for the terminal."""
    lines: list[str] = []
    if result.verdict == "not_applicable" and result.inapplicable:
        lines.append(f"not applicable: {_first_line(result.inapplicable)}")
    for verdict in result.crashed_checkers:
        lines.append(f"checker {verdict.name} crashed: {verdict.error}")
    if result.error is not None and not result.crashed_checkers:
        lines.append(_first_line(result.error))
    if result.failure is not None:
        lines.append(_first_line(result.failure))
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
    if getattr(args, "schedule", None) is not None:
        options += ["--schedule", args.schedule] if args.schedule else ["--schedule"]
    return options


def _print_decisions(outcome: RunOutcome, decisions: Path, args: argparse.Namespace, scenario):
    """Where the frame scheduler's decision log is, and the command that replays it."""
    released = (outcome.schedule or {}).get("released", 0)
    print(f"{_INDENT}frames scheduled: {released}; decisions: {decisions}", flush=True)
    if outcome.verdict == "fail":
        path = str(scenario.path) if scenario.path else scenario.name
        options = _replay_options(args)[: -2 if args.schedule else -1]  # not --schedule
        command = [
            "tetherbed", "run", path, "--backend", args.backend, "--replay", str(decisions),
            "--times", str(DEFAULT_TIMES), *options,
        ]  # fmt: skip
        print(f"{_INDENT}replay: {shlex.join(command)}", flush=True)


def _replay(scenario: Scenario, args: argparse.Namespace, stop: StopSignals, target: Target) -> int:
    """`--replay DECISIONS --times N`: how often the recorded failure comes back."""
    times = args.times or DEFAULT_TIMES
    folder = args.report / f"{_slug(scenario.name)}-{args.backend}-replay"
    folder.mkdir(parents=True, exist_ok=True)
    print(f"  replaying {args.replay} {times} time(s) on {args.backend}: {scenario.name}")

    def said(run: ReplayRun) -> None:
        outcome = run.outcome
        divergence = run.divergence
        kept = (
            f"followed {divergence.get('followed', 0)} of {divergence.get('decisions', 0)} "
            f"decisions, {divergence.get('unexpected', 0)} unexpected, "
            f"{divergence.get('missing', 0)} missing"
        )
        mark = "reproduced" if run.reproduced else "not reproduced"
        failed = ", ".join(failure_signature(outcome)) or "-"
        print(
            f"  {run.index:>3}  {outcome.verdict:<5} {outcome.seconds:7.2f} s  {mark:<15} "
            f"failed: {failed}; {kept}",
            flush=True,
        )

    result = reproduce(
        scenario,
        args.backend,
        args.replay,
        times,
        target=target,
        seed=args.seed,
        wait=args.replay_wait,
        stop=stop,
        decisions_folder=folder,
        keep=args.keep,
        on_run=said,
    )
    print(result.summary())
    print(f"decision logs of the replays: {folder}/")
    if stop.received is not None:
        return 128 + stop.received
    return 0 if result.reproduced else 1


def _report(outcome: RunOutcome, report_dir: Path, replay_options: list[str]) -> RunResult:
    scenario = outcome.scenario
    folder = report_dir / f"{_slug(scenario.name)}-{outcome.backend}"
    folder.mkdir(parents=True, exist_ok=True)
    history_path = folder / "history.jsonl"
    outcome.history.write(history_path)
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
        error=outcome.run_error,
        failure=outcome.failure,
        replay=shlex.join(
            [*shlex.split(replay_command(scenario, outcome.backend, outcome.seed)), *replay_options]
        ),
        history_path=str(history_path),
        not_applicable=len(outcome.not_applicable),
        strict=outcome.strict,
        inapplicable=outcome.inapplicable,
    )


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "scenario"
