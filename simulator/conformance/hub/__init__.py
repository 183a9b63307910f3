"""The hub suite: any local-executor platform, driven from the agent side.

    tetherbed conform hub (--url URL | --command CMD) --tokens FILE
                          [--client-adapter M:C] [--admin-adapter M:C]

Tetherbed's raw agents speak to the hub as shims would; relay, retry and
admin cases go through the target's client and admin adapters
(docs/targets.md). Without --url or --command, Tetherbed's own hub is
started and judged. Every module of this package is a family of cases.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tetherbed.simulator.conformance.registry import Suite, register_suite
from tetherbed.simulator.targets import Target


def add_arguments(group: Any) -> None:
    group.add_argument("--url", help="a running hub's base URL (ws:// or wss://)")
    group.add_argument(
        "--command", dest="hub_command", help="a command that starts the hub ({port} {state} ...)"
    )
    group.add_argument("--tokens", type=Path, help="the hub's tokens file (YAML or JSON)")
    group.add_argument("--client-adapter", help="MODULE:CLASS for the hub's client API")
    group.add_argument("--admin-adapter", help="MODULE:CLASS for the hub's admin API")
    group.add_argument("--target", type=Path, help="a target file (docs/targets.md)")
    group.add_argument("--hub-ca", type=Path, help="CA bundle to verify a wss:// hub with")
    group.add_argument("--insecure", action="store_true", help="do not verify a wss:// hub")
    group.add_argument(
        "--users", help="the two users of the tokens file to use, A,B (default alice,bob)"
    )
    group.add_argument(
        "--hub-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a hub option: given to a hub Tetherbed starts ({options}), and the timing cases "
        "judge by (ping_interval, pong_timeout, request_timeout, command_slack, retry_window)",
    )
    group.add_argument(
        "--hub-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="an extra flag for Tetherbed's own hub (e.g. --hub-arg=--ownership=evict-old)",
    )


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def environment(args: argparse.Namespace) -> Any:
    from tetherbed.simulator.conformance.hub.environment import HubEnvironment, build_timings

    if args.command:
        raise ValueError("the hub suite takes no command after `--`: use --command or --url")
    target = Target.read(args.target) if args.target else Target.reference()
    target = target.with_options(
        hub_url=args.url,
        hub_command=args.hub_command,
        hub_tokens=args.tokens,
        client_adapter=args.client_adapter,
        admin_adapter=args.admin_adapter,
        hub_ca=args.hub_ca,
        insecure=args.insecure,
    )
    if args.hub_arg and not target.hub.is_reference:
        raise ValueError("--hub-arg is for Tetherbed's own hub; put your hub's flags in --command")
    options: dict[str, Any] = {}
    for item in args.hub_option:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--hub-option {item!r}: expected NAME=VALUE")
        options[name.strip()] = _value(value.strip())
    timing_names = ("ping_interval", "pong_timeout", "request_timeout", "command_slack",
                    "retry_window")  # fmt: skip
    overrides = {k: float(v) for k, v in options.items() if k in timing_names}
    timings, started_options = build_timings(target.hub.startable, overrides)
    started_options.update(options)
    users = [u.strip() for u in args.users.split(",")] if args.users else None
    return HubEnvironment(
        target,
        options=started_options,
        timings=timings,
        users=users,
        reference_args=list(args.hub_arg),
    )


SUITE = register_suite(
    Suite(
        name="hub",
        prefix="LE",
        spec="local-executor protocol, draft v0.1 (wire version 1.1)",
        description="a local-executor platform (hub), driven by raw agents and clients",
        add_arguments=add_arguments,
        environment=environment,
        concurrency=8,
    )
)
