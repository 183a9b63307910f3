"""The sim backend's speed where exploration needs it.

Two figures, each against a baseline measured in the same run:

* **storm**: `--agents` agents (default 1,000 and 10,000) connect, the hub is
  killed, stays down 40 s (virtual) and comes back: every agent reconnects at
  once. The seconds of the whole run, wall clock and this process's CPU
  time (the machines here are shared: CPU time is the steadier figure), and
  the ratio of the large run to the small one. The goal is linear cost:
  10,000 agents in at most 10x the 1,000-agent time.
* **seeds per minute**: a two-agent scenario (`different_machine_split_brain`)
  run across `--seeds` seeds through the same sweep `tetherbed run --seeds`
  uses, and how many distinct interleavings those seeds explored. Goal:
  at least 100 seeds a minute.

Printed, never enforced: a missed goal prints MISS and the exit status stays 0.

    .venv/bin/python bench/explore.py [--agents 1000,10000] [--seeds 100] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tetherbed.simulator.explore.seeds import sweep
from tetherbed.simulator.runner import run_scenario
from tetherbed.simulator.scenario import Scenario
from tetherbed.simulator.scenario.loader import parse, shipped_scenarios

#: How long the hub stays down before the storm (virtual seconds).
OUTAGE = 40
#: The two-agent scenario the seeds-per-minute figure explores.
TWO_AGENTS = "different_machine_split_brain.yaml"
#: The goals of issue 14, printed next to the figures.
RATIO_GOAL = 10.0
SEEDS_PER_MINUTE_GOAL = 100.0


def storm_scenario(agents: int) -> Scenario:
    """N agents on N machines and sessions; the hub dies, stays away, comes back."""
    names = [f"a{i}" for i in range(agents)]
    steps: list[Any] = [{"start": "hub"}]
    steps += [{"start": name} for name in names]
    steps += [{"expect": {"agent": name, "state": "connected", "within": 60}} for name in names]
    steps += [{"kill": "hub"}, {"wait": OUTAGE}, {"start": "hub"}]
    steps += [{"expect": {"agent": name, "state": "connected", "within": 120}} for name in names]
    return parse(
        {
            "name": f"reconnect storm of {agents} agents",
            "checkers": ["single_owner"],
            "timeout": 3600,
            "topology": {
                "agents": {name: {"machine": f"m-{name}", "session": f"s-{name}"} for name in names}
            },
            "steps": steps,
        }
    )


def run_storm(agents: int, seed: int) -> dict[str, Any]:
    scenario = storm_scenario(agents)
    workdir = Path(tempfile.mkdtemp(prefix="tetherbed-bench-storm-"))
    try:
        started, cpu = time.perf_counter(), time.process_time()
        outcome = run_scenario(scenario, "sim", seed, workdir)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "agents": agents,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "verdict": outcome.verdict,
        "records": len(outcome.history),
        "error": (outcome.run_error or outcome.failure or "").splitlines()[:1],
    }


def run_seeds(count: int) -> dict[str, Any]:
    path = shipped_scenarios() / TWO_AGENTS
    started, cpu = time.perf_counter(), time.process_time()
    result = sweep(path, list(range(1, count + 1)), "sim")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "scenario": TWO_AGENTS,
        "seeds": count,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "seeds_per_minute": round(count * 60 / seconds, 1),
        "seeds_per_cpu_minute": round(count * 60 / cpu, 1),
        "interleavings": len(result.interleavings),
        "failures": len(result.failures),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="1000,10000", help="comma-separated agent counts")
    parser.add_argument("--seeds", type=int, default=100, help="seeds for the seeds-per-minute")
    parser.add_argument("--seed", type=int, default=1, help="the storm runs' seed")
    parser.add_argument("--skip-storm", action="store_true")
    parser.add_argument("--skip-seeds", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.getLogger("tetherbed").setLevel(logging.CRITICAL)  # thousands of "lost" lines
    counts = [int(part) for part in args.agents.split(",") if part.strip()]
    report: dict[str, Any] = {"storm": [], "seeds": None}
    if not args.skip_storm:
        for count in counts:
            run = run_storm(count, args.seed)
            report["storm"].append(run)
            if not args.json:
                print(
                    f"storm  {count:>6} agents  {run['seconds']:9.2f} s wall  "
                    f"{run['cpu_seconds']:9.2f} s CPU  {run['records']:>8} records  "
                    f"{run['verdict']}",
                    flush=True,
                )
        if len(report["storm"]) >= 2:
            small, large = report["storm"][0], report["storm"][-1]
            ratio = large["cpu_seconds"] / max(small["cpu_seconds"], 1e-9)
            wall = large["seconds"] / max(small["seconds"], 1e-9)
            scale = large["agents"] / small["agents"]
            report["ratio"] = round(ratio, 2)
            report["wall_ratio"] = round(wall, 2)
            report["agents_ratio"] = scale
            if not args.json:
                mark = "ok" if ratio <= scale else "MISS"
                print(
                    f"ratio  {large['agents']}/{small['agents']} agents: {ratio:.2f}x the CPU "
                    f"time, {wall:.2f}x the wall time (goal <= {scale:.0f}x, linear)  {mark}"
                )
    if not args.skip_seeds:
        seeds = report["seeds"] = run_seeds(args.seeds)
        if not args.json:
            mark = "ok" if seeds["seeds_per_minute"] >= SEEDS_PER_MINUTE_GOAL else "MISS"
            print(
                f"seeds  {seeds['scenario']}: {seeds['seeds']} seeds in {seeds['seconds']:.2f} s "
                f"wall ({seeds['cpu_seconds']:.2f} s CPU) = {seeds['seeds_per_minute']:.0f} "
                f"seeds/min ({seeds['seeds_per_cpu_minute']:.0f} per CPU minute; goal >= "
                f"{SEEDS_PER_MINUTE_GOAL:.0f})  {mark}; {seeds['interleavings']} distinct "
                f"interleavings, {seeds['failures']} failures"
            )
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
