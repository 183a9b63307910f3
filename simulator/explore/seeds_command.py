"""`tetherbed run ... --seeds`: the arguments and the output of a seed sweep.

The run command (`simulator/cli.py`) hands over here when `--seeds` is given;
the sweep itself is `seeds.sweep`, what it prints is `seeds.render` and
`seeds.summary`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from tetherbed.simulator.explore.seeds import (
    SeedRun,
    SeedSweep,
    parse_seeds,
    render,
    summary,
    sweep,
)
from tetherbed.simulator.proxy.scheduler.arguments import schedule_from_arguments
from tetherbed.simulator.scenario import Scenario
from tetherbed.simulator.scenario.dsh import reference_parts_only
from tetherbed.simulator.stop_signals import StopSignals
from tetherbed.simulator.targets import Target


def add_seed_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seeds",
        default=None,
        help="run each scenario once per seed (1..500, 7, 1,5,9) and report the distinct "
        "interleavings explored and each failing seed's replay command",
    )
    parser.add_argument("--json", action="store_true", help="with --seeds: print the sweep as JSON")
    parser.add_argument(
        "--interleavings",
        action="store_true",
        help="with --seeds: print each distinct interleaving (the first in full, the "
        "others as a diff against it)",
    )


def seeds_from_arguments(args: argparse.Namespace) -> list[int] | None:
    """The seeds `--seeds` names (None: not given). Raises SeedsError on bad input,
    ValueError when options that do not go together are given."""
    if args.seeds is None:
        if args.json or args.interleavings:
            raise ValueError("--json and --interleavings go with --seeds")
        return None
    if args.seed is not None:
        raise ValueError("give --seed or --seeds, not both")
    return parse_seeds(args.seeds)


def run_seeds(
    scenarios: Sequence[Scenario],
    seeds: list[int],
    args: argparse.Namespace,
    stop: StopSignals,
    *,
    target: Target,
    replay_options: Callable[[argparse.Namespace], list[str]],
) -> int:
    """Every scenario across the seeds; 0 when every seed passed, 1 when any did not."""
    args.report.mkdir(parents=True, exist_ok=True)
    sweeps: list[SeedSweep] = []
    for scenario in scenarios:
        if stop.received is not None:
            break
        if args.backend not in scenario.backends:
            continue
        if reference_parts_only(
            scenario.topology,
            hub_is_reference=target.hub.is_reference,
            agent_is_reference=target.agent.is_reference,
        ):
            continue

        def progress(run: SeedRun, scenario: Scenario = scenario) -> None:
            if not args.json and (run.failed or args.backend != "sim"):  # real time: say it
                print(
                    f"  {run.verdict:<5} {run.seconds:8.2f} s  {scenario.name} seed {run.seed}"
                    f"  {run.interleaving}",
                    flush=True,
                )

        found = sweep(
            scenario,
            seeds,
            args.backend,
            target=target,
            strict=args.strict,
            stop=stop,
            replay_options=replay_options(args),
            report=args.report,
            progress=progress,
            schedule=schedule_from_arguments(args),
        )
        sweeps.append(found)
        if not args.json:
            print(render(found, show_interleavings=args.interleavings), flush=True)
    document = json.dumps([s.to_json() for s in sweeps], indent=2, sort_keys=True)
    (args.report / "seeds.json").write_text(document + "\n", encoding="utf-8")
    if args.json:
        print(document)
    else:
        print(summary(sweeps), end="")
        print(f"report: {args.report}/seeds.json")
    if stop.received is not None:
        print(f"tetherbed run: stopped by {stop.name}", file=sys.stderr)
        return 128 + stop.received
    return 0 if all(s.ok for s in sweeps) else 1
