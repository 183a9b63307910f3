"""`tetherbed proxy`: run fault proxies with a Toxiproxy-compatible HTTP API.

Prints `tetherbed proxy API listening on http://HOST:PORT` once the API listens,
then one `tetherbed proxy NAME listening on LISTEN -> UPSTREAM` line for each
proxy given with --proxy (with the port actually bound when LISTEN used port 0).
Exits 0 on SIGTERM or SIGINT after closing every proxy.

`--schedule BOUND --schedule-seed N` (or `--replay DECISIONS`) puts every
proxy's WebSocket messages under one frame scheduler and `--decisions FILE`
writes its decision log (docs/explore.md): this is how the docker backend
schedules the proxy beside each agent. `--schedule-as PROXY=LINK` names a
proxy's frames in the log (the process backend's `agent-NAME`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from tetherbed.runtime import event_loop
from tetherbed.runtime.event_log import EventLog
from tetherbed.simulator.proxy import errors
from tetherbed.simulator.proxy.addresses import parse_address
from tetherbed.simulator.proxy.registry import ProxyRegistry
from tetherbed.simulator.proxy.scheduler import (
    BoundError,
    DecisionLogError,
    FrameScheduler,
    ScheduleOptions,
)
from tetherbed.simulator.proxy.server import DEFAULT_API, ApiServer
from tetherbed.simulator.wiretap.log import WireLog
from tetherbed.simulator.wiretap.records import file_sink


def _api_address(text: str) -> tuple[str, int]:
    try:
        return parse_address(text, "--api")
    except errors.ProxyError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _proxy_spec(text: str) -> tuple[str, str, str]:
    parts = text.split("=")
    if len(parts) != 3 or not all(parts):
        raise argparse.ArgumentTypeError(f"expected NAME=LISTEN=UPSTREAM, got {text!r}")
    name, listen, upstream = parts
    for field, value in (("LISTEN", listen), ("UPSTREAM", upstream)):
        try:
            parse_address(value, field)
        except errors.ProxyError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None
    return name, listen, upstream


def _record_spec(text: str) -> tuple[str, str, str]:
    name, node, path = [*text.split("=", 2), "", ""][:3]
    if not name or not node or not path:
        raise argparse.ArgumentTypeError(f"expected PROXY=NODE=FILE, got {text!r}")
    return name, node, path


def _link_spec(text: str) -> tuple[str, str]:
    name, _, link = text.partition("=")
    if not name or not link:
        raise argparse.ArgumentTypeError(f"expected PROXY=LINK, got {text!r}")
    return name, link


def build_parser(prog: str = "tetherbed proxy") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--api",
        type=_api_address,
        default=DEFAULT_API,
        metavar="HOST:PORT",
        help="where the HTTP API listens (default 127.0.0.1:8474, as Toxiproxy)",
    )
    parser.add_argument(
        "--proxy",
        type=_proxy_spec,
        action="append",
        default=[],
        metavar="NAME=LISTEN=UPSTREAM",
        help="create this proxy at start (repeatable), e.g. hub=127.0.0.1:18765=127.0.0.1:8765",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed for every random choice")
    parser.add_argument(
        "--record",
        action="append",
        default=[],
        type=_record_spec,
        metavar="PROXY=NODE=FILE",
        help="record what crosses PROXY, seen from its connecting side NODE, as JSON lines "
        "in FILE (the wire recorder; repeatable)",
    )
    parser.add_argument(
        "--no-websocket", action="store_true", help="never parse WebSocket frames (pure TCP)"
    )
    parser.add_argument(
        "--keep-extensions",
        action="store_true",
        help="let permessage-deflate be negotiated (message rules then cannot read messages)",
    )
    parser.add_argument(
        "--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    schedule = parser.add_argument_group("frame scheduling (docs/explore.md)")
    schedule.add_argument(
        "--schedule", metavar="BOUND", help="hold WebSocket messages (TIME[,COUNT], e.g. 200ms)"
    )
    schedule.add_argument(
        "--schedule-seed", type=int, default=0, help="the seed that draws the holds (default 0)"
    )
    schedule.add_argument("--replay", type=Path, metavar="DECISIONS", help="replay a decision log")
    schedule.add_argument(
        "--replay-wait", type=float, default=None, metavar="SECONDS", help="patience per frame"
    )
    schedule.add_argument("--decisions", type=Path, metavar="FILE", help="write the decision log")
    schedule.add_argument(
        "--schedule-as",
        type=_link_spec,
        action="append",
        default=[],
        metavar="PROXY=LINK",
        help="the name of PROXY's frames in the decision log (default: PROXY)",
    )
    return parser


def _scheduler(args: argparse.Namespace) -> FrameScheduler | None:
    """The frame scheduler the options ask for; BoundError/DecisionLogError if they are wrong."""
    links = dict(args.schedule_as)
    if args.replay is not None:
        options = ScheduleOptions.replaying(args.replay, decisions=args.decisions)
        if args.replay_wait is not None:
            options = replace(options, wait=args.replay_wait)
    elif args.schedule is not None:
        options = ScheduleOptions.explore(args.schedule, decisions=args.decisions)
    else:
        return None
    names = {links.get(name, name) for name, _, _ in args.proxy}
    return options.build(args.schedule_seed, {"proxies": sorted(names)}, links=names)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return event_loop.run(_serve(args))


async def _serve(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed) if args.seed is not None else None
    try:
        scheduler = _scheduler(args)
    except (BoundError, DecisionLogError) as exc:
        print(f"tetherbed proxy: {exc}", file=sys.stderr)
        return 2
    links = dict(args.schedule_as)
    registry = ProxyRegistry(
        rng,
        websocket=not args.no_websocket,
        strip_extensions=not args.keep_extensions,
        scheduler=scheduler,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    api = ApiServer(registry, *args.api)
    logs = {name: (node, EventLog(path, time.time)) for name, node, path in args.record}
    try:
        for name, listen, upstream in args.proxy:
            recorded: dict[str, object] = {}
            if name in logs:
                node, log = logs[name]
                recorded = {"wire": WireLog(node, file_sink(log)), "wire_clock": time.time}
            recorded["schedule_link"] = links.get(name, name)
            await registry.create(name, listen, upstream, **recorded)
        address = await api.start()
    except (errors.ProxyError, OSError) as exc:
        print(f"tetherbed proxy: {getattr(exc, 'message', exc)}", file=sys.stderr)
        await registry.close()
        return 1
    print(f"tetherbed proxy API listening on http://{address}", flush=True)
    for proxy in registry:
        print(
            f"tetherbed proxy {proxy.name} listening on {proxy.listen} -> {proxy.upstream}",
            flush=True,
        )
    try:
        await stop.wait()
    finally:
        await api.stop()
        await registry.close()
        if scheduler is not None:
            scheduler.close()
        for _, log in logs.values():
            log.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
