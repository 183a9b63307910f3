"""`tetherbed load relay|storm|takeover|video`: Locust, headless, against any hub.

Each profile starts what it needs around the system under test (the target:
docs/targets.md), runs Locust in its own processes, and prints a summary; the
reports (Locust's CSV and HTML, a plot, summary.json) go to `--out`. The exit
status is 1 when a `--fail-if` condition holds or the run could not do what it
had to, 2 for bad options. docs/load.md has every option and figure.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from tetherbed.load.fail_if import Condition, ConditionError
from tetherbed.load.mix import DEFAULT_MIX, MixError, parse_mix
from tetherbed.load.plan import PROFILES
from tetherbed.simulator.targets import TargetError
from tetherbed.simulator.targets.arguments import add_target_arguments


def _positive(kind: type) -> object:
    def parse(text: str) -> object:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError("must be positive")
        return value

    return parse


def _not_negative(kind: type) -> object:
    def parse(text: str) -> object:
        value = kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError("must not be negative")
        return value

    return parse


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    run = common.add_argument_group("the run")
    run.add_argument("--duration", type=_positive(float), default=None, help="seconds of load")
    run.add_argument(
        "--spawn-rate", type=_positive(float), default=None, help="users started per second"
    )
    run.add_argument(
        "--out", type=Path, default=None, help="folder for the reports (default: ./load-results/…)"
    )
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    run.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="COND",
        help="exit 1 when this holds, e.g. 'p99>50ms', 'errors>0' (repeatable; docs/load.md)",
    )
    run.add_argument(
        "--hub", dest="hub_alias", metavar="URL", help="the same as --hub-url (a running hub)"
    )
    run.add_argument(
        "--hub-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an argument for Tetherbed's own hub when the run starts it (repeatable), "
        "e.g. --hub-arg=--request-timeout=5",
    )
    spread = common.add_argument_group("distribution (Locust's master and workers)")
    spread.add_argument(
        "--workers",
        type=_not_negative(int),
        default=0,
        help="Locust worker processes on this machine (its distributed mode; 0: one process)",
    )
    spread.add_argument(
        "--master",
        action="store_true",
        help="be Locust's master and wait for --expect-workers workers from other machines",
    )
    spread.add_argument("--expect-workers", type=_positive(int), default=1)
    spread.add_argument("--master-bind", default="*", help="where the master listens")
    spread.add_argument("--master-port", type=_positive(int), default=5557)
    spread.add_argument(
        "--worker",
        action="store_true",
        help="be only a worker of a master on another machine (--master-host); the master "
        "sends the plan",
    )
    spread.add_argument("--master-host", default="127.0.0.1")
    add_target_arguments(common)
    return common


def _clients(parser: argparse.ArgumentParser, users_help: str, users: int) -> None:
    group = parser.add_argument_group("clients")
    group.add_argument("--users", type=_positive(int), default=users, help=users_help)
    group.add_argument(
        "--mix",
        default=DEFAULT_MIX,
        help=f"request types and weights (default {DEFAULT_MIX})",
    )
    group.add_argument(
        "--in-flight",
        type=_positive(int),
        default=1,
        help="closed loop: requests each client keeps outstanding (default 1)",
    )
    group.add_argument(
        "--rate",
        type=_positive(float),
        default=None,
        help="open loop: requests per second over all clients, sent when due whatever comes "
        "back (latency counts from when a request was due)",
    )
    group.add_argument(
        "--max-outstanding",
        type=_positive(int),
        default=1000,
        help="open loop: a client with this many unanswered requests counts the next one "
        "failed instead of queueing it (default 1000)",
    )
    group.add_argument(
        "--request-timeout",
        type=_positive(float),
        default=30.0,
        help="seconds after which an unanswered request counts as lost (default 30)",
    )
    group.add_argument(
        "--answer-bytes",
        type=_not_negative(int),
        default=64,
        help="size of the load agents' answers (content, stdout; default 64)",
    )
    group.add_argument(
        "--service-ms",
        type=_not_negative(float),
        default=0.0,
        help="how long a load agent takes to answer (default 0)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tetherbed load", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    profiles = parser.add_subparsers(dest="profile", required=True)
    common = _common()

    relay = profiles.add_parser(
        "relay",
        parents=[common],
        help="relay capacity: load agents and clients through the hub",
        description="N load agents answer like agents; clients send a request mix through "
        "the hub. --step ramps the load and reports the knee.",
    )
    _clients(relay, "client users (default 20)", 20)
    agents = relay.add_argument_group("agents")
    agents.add_argument(
        "--agents", type=_not_negative(int), default=10, help="load agents (default 10)"
    )
    agents.add_argument(
        "--real-agents",
        type=_not_negative(int),
        default=0,
        help="real agent processes mixed in: Tetherbed's agent, or --agent-command",
    )
    agents.add_argument(
        "--agent-concurrency",
        type=_positive(int),
        default=16,
        help="requests a load agent runs at once; Tetherbed's hub is started with this "
        "--max-concurrent (default 16)",
    )
    step = relay.add_argument_group("steps")
    step.add_argument(
        "--step", action="store_true", help="ramp the load in steps and report the knee"
    )
    step.add_argument("--steps", type=_positive(int), default=6, help="how many steps (6)")
    step.add_argument(
        "--step-seconds", type=_positive(float), default=10.0, help="seconds per step (10)"
    )
    step.add_argument(
        "--p99-bound",
        type=_positive(float),
        default=50.0,
        help="the knee is the highest rate whose p99 stays under this many ms (50)",
    )
    step.add_argument(
        "--echo-seconds",
        type=_not_negative(float),
        default=5.0,
        help="seconds of the generator's baseline against a raw websockets echo, before and "
        "again after the run (0: none; default 5)",
    )

    storm = profiles.add_parser(
        "storm",
        parents=[common],
        help="reconnect storm: K agents dropped together; how fast the hub serves them again",
    )
    storm.add_argument("--users", type=_positive(int), default=200, help="agents (default 200)")
    storm.add_argument(
        "--drop",
        choices=["partition", "restart", "none"],
        default="partition",
        help="partition: the recorder cuts every connection and holds new ones for "
        "--drop-seconds; restart: the hub is killed and started again; none: only connect "
        "them, hold them idle for --drop-seconds and measure the hub's memory",
    )
    storm.add_argument("--drop-seconds", type=_not_negative(float), default=2.0)
    storm.add_argument(
        "--reconnect",
        choices=["spec", "immediate"],
        default="spec",
        help="how the load agents come back: the spec's backoff (default), or all at once",
    )
    storm.add_argument(
        "--recovery-timeout",
        type=_positive(float),
        default=120.0,
        help="seconds after the drop within which every session must be served again",
    )

    takeover = profiles.add_parser(
        "takeover",
        parents=[common],
        help="takeovers under load: owners replaced by the same machine, challenged by others",
    )
    _clients(takeover, "client users (default 8)", 8)
    owners = takeover.add_argument_group("sessions")
    owners.add_argument("--sessions", type=_positive(int), default=4, help="sessions (4)")
    owners.add_argument(
        "--challengers",
        type=_not_negative(int),
        default=2,
        help="other machines that keep claiming the sessions (2)",
    )
    owners.add_argument(
        "--takeover-every",
        type=_positive(float),
        default=2.0,
        help="seconds between a session's wake-ups (2)",
    )
    owners.add_argument(
        "--challenge-every",
        type=_positive(float),
        default=3.0,
        help="seconds between one challenger's claims (3)",
    )

    video = profiles.add_parser(
        "video",
        parents=[common],
        help="video backpressure: viewers of the native adapter that ack fast, slowly or never",
    )
    video.add_argument("--users", type=_positive(int), default=3, help="fast viewers (default 3)")
    video.add_argument("--slow", type=_not_negative(int), default=0, help="slow viewers (0)")
    video.add_argument(
        "--slow-ack-ms", type=_positive(float), default=200.0, help="a slow viewer's ack delay"
    )
    video.add_argument(
        "--size", default="1280x720", help="the Xvfb display's size (default 1280x720)"
    )
    video.add_argument(
        "--phase-seconds",
        type=_positive(float),
        default=8.0,
        help="seconds of each phase: without, then with a stalled viewer (8)",
    )
    video.add_argument("--quality", default="balanced", help="the adapter's video quality")
    return parser


def default_out(profile: str) -> Path:
    return Path("load-results") / f"{profile}-{time.strftime('%Y%m%d-%H%M%S')}"


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM unwinds like Ctrl-C: every process the run started is stopped."""
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    parser = build_parser()
    args = parser.parse_args(argv)
    assert args.profile in PROFILES
    try:
        args.conditions = [Condition.parse(text) for text in args.fail_if]
        if hasattr(args, "mix"):
            args.mix_weights = parse_mix(args.mix)
    except (ConditionError, MixError) as exc:
        parser.error(str(exc))
    if args.hub_alias:
        if args.hub_url and args.hub_url != args.hub_alias:
            parser.error("--hub and --hub-url name two hubs")
        args.hub_url = args.hub_alias
    if args.master and args.workers:
        parser.error("--master waits for workers on other machines; --workers forks them here")
    args.out = (args.out or default_out(args.profile)).resolve()
    if args.worker:
        from tetherbed.load.profiles.worker import run_worker

        return run_worker(args)
    from tetherbed.load.profiles import PROFILE_RUNNERS

    try:
        return PROFILE_RUNNERS[args.profile](args)
    except TargetError as exc:
        print(f"tetherbed load: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tetherbed load: interrupted; everything it started is stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
