"""The dsh-hub suite: any dsh-computers hub, driven from the agent side.

    tetherbed conform dsh-hub [--url URL --tokens FILE --adapter M:C] [--hub-arg FLAG]

Tetherbed's raw SSE agents enroll, stream and post results as agents do;
the browser routes (§4) go through the host request gate with the headers
the adapter gives, and commands are dispatched through the adapter's
`computer_exec` (the spec dispatches only through model tools; see
dsh_hub/adapter.py and docs/conformance.md). Without --url or --command,
Tetherbed's own hub is started and judged. Every module of this package is a
family of cases.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tetherbed.simulator.conformance.registry import Suite, register_suite
from tetherbed.simulator.targets import Target


def add_arguments(group: Any) -> None:
    group.add_argument("--url", help="a running hub's base URL (http:// or https://)")
    group.add_argument(
        "--command", dest="hub_command", help="a command that starts the hub ({port} {state} ...)"
    )
    group.add_argument("--tokens", type=Path, help="the hub's tokens file (users' client tokens)")
    group.add_argument(
        "--adapter",
        help="MODULE:CLASS: the browser gate's headers and computer_exec "
        "(default: Tetherbed's hub, dsh_hub/adapter.py)",
    )
    group.add_argument("--target", type=Path, help="a target file (docs/targets.md)")
    group.add_argument(
        "--hub-state", type=Path, help="the hub's storage folder, for the token-at-rest case"
    )
    group.add_argument(
        "--hub-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="the hub's heartbeat_ms and key_ttl_minutes, which the timing cases judge by "
        "(a hub Tetherbed starts is given them: 2000 ms and 0.1 min)",
    )
    group.add_argument(
        "--hub-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="an extra flag for Tetherbed's own hub (e.g. --hub-arg=--dsh-defect=reusable_key)",
    )


def environment(args: argparse.Namespace) -> Any:
    from tetherbed.simulator.conformance.dsh_hub.environment import (
        DEFAULT_ADAPTER,
        SHORT,
        SPEC,
        DshHubEnvironment,
    )

    if args.command:
        raise ValueError("the dsh-hub suite takes no command after `--`: use --command or --url")
    url = args.url
    if url is not None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--url {url!r}: give the hub's http:// or https:// base")
        url = "ws" + url[4:]
    target = Target.read(args.target) if args.target else Target.reference()
    target = target.with_options(hub_url=url, hub_command=args.hub_command, hub_tokens=args.tokens)
    if args.hub_arg and not target.hub.is_reference:
        raise ValueError("--hub-arg is for Tetherbed's own hub; put your hub's flags in --command")
    timings = dict(SHORT if target.hub.startable else SPEC)
    for item in args.hub_option:
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in timings:
            raise ValueError(f"--hub-option {item!r}: expected heartbeat_ms=N or key_ttl_minutes=N")
        try:
            timings[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--hub-option {item!r}: not a number") from None
    return DshHubEnvironment(
        target,
        adapter=args.adapter or DEFAULT_ADAPTER,
        timings=timings,
        reference_args=list(args.hub_arg),
        state_dir=args.hub_state,
    )


SUITE = register_suite(
    Suite(
        name="dsh-hub",
        prefix="DSH",
        spec="dsh-computers contract v1 (npm dsh-computers 1.3.0)",
        description="a dsh-computers hub, driven by raw SSE agents, a browser and an adapter",
        add_arguments=add_arguments,
        environment=environment,
        concurrency=8,
    )
)
