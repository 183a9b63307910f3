"""The command-line options that turn the frame scheduler on, for any command.

`tetherbed run` takes them, and so can any command that runs scenarios on the
process or docker backend (`tetherbed explore`):

    add_schedule_arguments(parser)
    options = schedule_from_arguments(args, decisions=folder / "decisions.jsonl")

`--schedule [BOUND]` explores (the run's `--seed` draws the holds),
`--replay DECISIONS [--times N]` replays a decision log.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tetherbed.simulator.proxy.scheduler.bound import ScheduleBound
from tetherbed.simulator.proxy.scheduler.options import ScheduleOptions
from tetherbed.simulator.proxy.scheduler.replay import DEFAULT_WAIT_S

DEFAULT_TIMES = 10


def add_schedule_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "frame scheduling (process and docker backends; docs/explore.md)"
    )
    group.add_argument(
        "--schedule",
        nargs="?",
        const="",
        default=None,
        metavar="BOUND",
        help="the agents' proxies hold every WebSocket message and release it in an order "
        "drawn from --seed, each held at most BOUND (TIME[,COUNT], default "
        f"{ScheduleBound()}); writes a decision log beside the report",
    )
    group.add_argument(
        "--replay",
        type=Path,
        default=None,
        metavar="DECISIONS",
        help="replay a decision log's frame order (its seed unless --seed) and report how "
        "often the recorded failure reproduces",
    )
    group.add_argument(
        "--times",
        type=int,
        default=None,
        metavar="N",
        help=f"with --replay: how many runs (default {DEFAULT_TIMES})",
    )
    group.add_argument(
        "--replay-wait",
        type=float,
        default=DEFAULT_WAIT_S,
        metavar="SECONDS",
        help="with --replay: how long to wait for a frame the log names, beyond its recorded "
        f"gap, before giving up on it (default {DEFAULT_WAIT_S})",
    )


def check_schedule_arguments(args: argparse.Namespace, backend: str) -> str | None:
    """Why these options cannot be used together or on `backend` (None: they can)."""
    if args.schedule is None and args.replay is None:
        if args.times is not None:
            return "--times goes with --replay"
        return None
    if args.schedule is not None and args.replay is not None:
        return "--schedule explores and --replay replays: give one of them"
    if backend == "sim":
        return (
            "--schedule and --replay schedule real processes' frames (process and docker "
            "backends); on the sim backend --seed alone picks the interleaving"
        )
    if args.schedule is not None:
        try:
            ScheduleBound.parse(args.schedule)
        except ValueError as exc:
            return str(exc)
    if args.times is not None and args.times < 1:
        return "--times must be at least 1"
    return None


def schedule_from_arguments(
    args: argparse.Namespace, *, decisions: Path | None = None
) -> ScheduleOptions | None:
    """The scheduling the options ask for (None: off). `--replay` raises
    `DecisionLogError` for a file that is not a decision log."""
    if args.replay is not None:
        return ScheduleOptions.replaying(args.replay, decisions=decisions, wait=args.replay_wait)
    if args.schedule is not None:
        return ScheduleOptions.explore(args.schedule, decisions=decisions)
    return None
