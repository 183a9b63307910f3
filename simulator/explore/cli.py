"""`tetherbed explore SCENARIO --seeds N [--backend ...] [target options] [--export FILE]`.

Runs the scenario's generated histories (`generate:` and `nemesis:`, see
docs/explore.md) for each seed against the target — Tetherbed's own parts,
or an agent command, a hub URL or command and their adapters
(docs/targets.md) — and judges each with the scenario's checkers. Prints one
line per seed (verdict, seconds, interleaving, operations and faults, why it
failed), then the number of distinct interleavings, the failing seeds with
the command that replays each, and — unless `--no-shrink` — the first
failure shrunk to fewer operations, faults, agents and seconds. `--export
FILE` writes the shrunk run as a plain step-list scenario that `tetherbed
run FILE` replays.

Exit status: 0 every seed passed; 1 a seed failed or could not be judged;
2 the input is wrong (the scenario, the seeds, the target), before anything
ran; 128 + N when signal N stopped it (everything it started is stopped).
"""

from __future__ import annotations

import argparse
import copy
import logging
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from tetherbed.hub.config import HUB_DEFECTS
from tetherbed.simulator.explore.explorer import Explorer, SeedResult
from tetherbed.simulator.explore.export import exported_document, write_scenario
from tetherbed.simulator.explore.plan import Plan
from tetherbed.simulator.explore.shrink import DEFAULT_BUDGET
from tetherbed.simulator.proxy.scheduler.arguments import (
    add_schedule_arguments,
    check_schedule_arguments,
    schedule_from_arguments,
)
from tetherbed.simulator.scenario import Scenario, ScenarioError, load, parse
from tetherbed.simulator.scenario.loader import resolve
from tetherbed.simulator.stop_signals import StopSignals
from tetherbed.simulator.targets import TargetError
from tetherbed.simulator.targets.arguments import add_target_arguments, target_from_arguments

#: Target options a replay command repeats.
_TARGET_OPTIONS = (
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
)


def seed_range(text: str) -> range:
    """`N` (seeds 1..N) or `A..B` (both included)."""
    try:
        if ".." in text:
            low, high = (int(part) for part in text.split("..", 1))
        else:
            low, high = 1, int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or A..B, got {text!r}") from None
    if high < low or low < 0:
        raise argparse.ArgumentTypeError(f"an empty or negative range: {text!r}")
    return range(low, high + 1)


def with_hub_defects(scenario: Scenario, defects: list[str], backend: str) -> Scenario:
    """The scenario with these defects planted in Tetherbed's hub."""
    document = copy.deepcopy(scenario.document or {})
    hub = document.setdefault("topology", {}).setdefault("hub", None) or {}
    options = hub.setdefault("options", None) or {}
    options["defects"] = sorted({*(options.get("defects") or []), *defects})
    hub["options"] = options
    document["topology"]["hub"] = hub
    return parse(document, scenario.path, backend)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tetherbed explore",
        description="Run a scenario's generated histories (generate: and nemesis:) across "
        "seeds, check each, shrink the first failure and export it as a scenario.",
    )
    parser.add_argument("scenario", type=Path, help="a scenario with generate: (and nemesis:)")
    parser.add_argument(
        "--seeds", type=seed_range, default=range(1, 21), help="N (1..N) or A..B; default 20"
    )
    parser.add_argument("--backend", default="sim", choices=["sim", "process", "docker"])
    parser.add_argument("--export", type=Path, help="write the shrunk failure here (YAML)")
    parser.add_argument("--no-shrink", action="store_true", help="report failures as found")
    parser.add_argument(
        "--shrink-budget",
        type=int,
        default=DEFAULT_BUDGET,
        help=f"runs the shrinker may spend (default {DEFAULT_BUDGET})",
    )
    parser.add_argument(
        "--stop-at-first", action="store_true", help="stop at the first failing seed"
    )
    parser.add_argument(
        "--strict", action="store_true", help="a checker without evidence (unknown) fails"
    )
    parser.add_argument(
        "--hub-defect",
        action="append",
        default=[],
        choices=sorted(HUB_DEFECTS),
        help="plant a deliberate bug in Tetherbed's hub (hub.options.defects), to see "
        "exploration find it (docs/explore.md)",
    )
    add_target_arguments(parser)
    add_schedule_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.getLogger("tetherbed").setLevel(logging.CRITICAL)
    try:
        scenario = load(resolve(args.scenario), args.backend)
        if args.hub_defect:
            scenario = with_hub_defects(scenario, args.hub_defect, args.backend)
        target = target_from_arguments(args)
    except (ScenarioError, TargetError, OSError) as exc:
        print(f"tetherbed explore: {exc}", file=sys.stderr)
        return 2
    if not scenario.generated:
        print(
            f"tetherbed explore: {args.scenario}: no `generate:` to explore (a step-list "
            "scenario runs with tetherbed run)",
            file=sys.stderr,
        )
        return 2
    if args.backend not in scenario.backends:
        print(
            f"tetherbed explore: {scenario.name} does not run on the {args.backend} backend",
            file=sys.stderr,
        )
        return 2
    if args.backend == "sim" and not target.is_reference:
        print(
            "tetherbed explore: the sim backend runs only Tetherbed's own parts; use "
            "--backend process for a third-party target",
            file=sys.stderr,
        )
        return 2
    if args.backend == "docker" and not target.hub.is_reference:
        print(
            "tetherbed explore: the docker backend runs Tetherbed's hub in a container; "
            "explore a third-party hub with --backend process",
            file=sys.stderr,
        )
        return 2
    refusal = check_schedule_arguments(args, args.backend)
    if refusal is None and args.replay is not None:
        refusal = "--replay replays one decision log: use tetherbed run SCENARIO --replay"
    if refusal is not None:
        print(f"tetherbed explore: {refusal}", file=sys.stderr)
        return 2
    with StopSignals() as stop:
        explorer = Explorer(
            scenario, args.backend, target, args.strict, stop, schedule_from_arguments(args)
        )
        status = _explore(explorer, args)
        if stop.received is not None:
            print(f"tetherbed explore: stopped by {stop.name}", file=sys.stderr)
            return 128 + stop.received
    return status


def _explore(explorer: Explorer, args: argparse.Namespace) -> int:
    target_options = _replay_options(args)
    print(f"exploring {explorer.scenario.name} on {args.backend}, seeds {_seeds(args.seeds)}")
    failures: list[SeedResult] = []
    plans: dict[int, Plan] = {}

    def report(result: SeedResult) -> None:
        size = result.size
        print(
            f"  seed {result.seed:<5} {result.verdict:<5} {result.seconds:7.2f} s  "
            f"interleaving {result.interleaving}  "
            f"{size['operations']} ops, {size['faults']} faults",
            flush=True,
        )
        for name, why in result.failed:
            print(f"{'':14}{name}: {why}", flush=True)
        if result.error:
            print(f"{'':14}error: {result.error}", flush=True)

    for seed in args.seeds:
        if explorer.stop is not None and explorer.stop.received is not None:
            break
        result, _, plan = explorer.run_seed(seed)
        report(result)
        if result.verdict != "pass":
            failures.append(result)
            plans[seed] = plan
            if args.stop_at_first:
                break
    _summary(explorer, args, failures, target_options)
    if failures and not args.no_shrink:
        first = next((f for f in failures if f.verdict == "fail"), None)
        if first is None:
            print("nothing to shrink: the failing seeds were errors, not failures")
        else:
            _shrink(explorer, args, first, plans[first.seed], target_options)
    return 1 if failures else 0


def _summary(
    explorer: Explorer,
    args: argparse.Namespace,
    failures: list[SeedResult],
    target_options: list[str],
) -> None:
    seen = explorer.seen_interleavings
    print()
    print(
        f"{explorer.runs} seed(s): {explorer.runs - len(failures)} passed, {len(failures)} "
        f"did not; {len(seen)} distinct interleaving(s)"
    )
    for result in failures:
        names = ", ".join(name for name, _ in result.failed) or result.error or result.verdict
        print(f"  seed {result.seed}: {result.verdict} ({names})")
        replay = [
            "tetherbed",
            "explore",
            str(args.scenario),
            "--seeds",
            f"{result.seed}..{result.seed}",
            "--backend",
            args.backend,
            *target_options,
        ]
        print(f"    replay: {shlex.join(replay)}")


def _shrink(
    explorer: Explorer,
    args: argparse.Namespace,
    first: SeedResult,
    plan: Plan,
    target_options: list[str],
) -> None:
    print()
    print(f"shrinking seed {first.seed} (failed: {', '.join(sorted(first.failed_names))}) ...")
    shrunk = explorer.shrink(plan, first.failed_names, args.shrink_budget)
    before, after = shrunk.original.size(), shrunk.plan.size()
    for key in ("operations", "faults", "agents", "steps", "seconds"):
        print(f"  {key:<11} {before[key]:>8g} -> {after[key]:g}")
    print(f"  {shrunk.runs} run(s); it still fails: {', '.join(sorted(shrunk.failed)) or '?'}")
    if args.export is None:
        print("  (give --export FILE to write it as a scenario)")
        return
    command = [
        "tetherbed",
        "explore",
        str(args.scenario),
        "--seeds",
        f"{first.seed}..{first.seed}",
        "--backend",
        args.backend,
        *target_options,
    ]
    found = f"Found by `{shlex.join(command)}` ({', '.join(sorted(first.failed_names))})"
    document = exported_document(shrunk.plan, found=found, original=before)
    write_scenario(args.export, document)
    # The exported file carries the planted defects in its topology.
    options = [o for o in target_options if o != "--hub-defect" and o not in args.hub_defect]
    replay = ["tetherbed", "run", str(args.export), "--backend", args.backend, *options]
    print(f"  exported: {args.export}")
    print(f"  replay:   {shlex.join(replay)}")


def _replay_options(args: argparse.Namespace) -> list[str]:
    options: list[str] = []
    for name in _TARGET_OPTIONS:
        value = getattr(args, name, None)
        if value is not None:
            options += ["--" + name.replace("_", "-"), str(value)]
    for flag in ("insecure", "strict"):
        if getattr(args, flag, False):
            options.append("--" + flag)
    for defect in getattr(args, "hub_defect", []):
        options += ["--hub-defect", defect]
    if getattr(args, "schedule", None) is not None:
        options += ["--schedule", args.schedule] if args.schedule else ["--schedule"]
    return options


def _seeds(seeds: range) -> str:
    return f"{seeds.start}..{seeds.stop - 1}"
