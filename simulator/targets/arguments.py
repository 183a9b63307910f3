"""The command-line face of a target, shared by every command that takes one.

    tetherbed run scenarios/ --backend process --agent-command "my-shim --url {hub_url} ..."
    tetherbed run scenarios/ --backend process --target my-target.yaml

`add_target_arguments` declares the options on a parser; `target_from_arguments`
turns the parsed options into a `Target` (the file first, then each option).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tetherbed.simulator.targets.target import Target


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "target", "what to run against (docs/targets.md); default: Tetherbed's own hub and agent"
    )
    group.add_argument("--target", type=Path, help="a target file (YAML)")
    group.add_argument(
        "--agent-command",
        help="the agent to test, a command template: {hub_url} {token} {session} {root} "
        "{machine} {name} {state} {shell_flag} {max_concurrent} {protocol_version}",
    )
    group.add_argument("--hub-url", help="a running hub to test (ws:// or wss:// base URL)")
    group.add_argument(
        "--hub-command", help="a command that starts the hub to test ({host} {port} {state} ...)"
    )
    group.add_argument("--hub-tokens", type=Path, help="the hub's tokens file (YAML or JSON)")
    group.add_argument("--client-adapter", help="MODULE:CLASS for the hub's client API")
    group.add_argument("--admin-adapter", help="MODULE:CLASS for the hub's admin API")
    group.add_argument("--hub-ca", type=Path, help="CA bundle to verify a wss:// hub with")
    group.add_argument("--insecure", action="store_true", help="do not verify a wss:// hub")
    group.add_argument(
        "--recorder-cert", type=Path, help="certificate the recorder presents to agents (wss)"
    )
    group.add_argument("--recorder-key", type=Path, help="its private key")


def target_from_arguments(args: argparse.Namespace) -> Target:
    """Raises TargetError with the option or file at fault."""
    target = Target.read(args.target) if args.target else Target.reference()
    return target.with_options(
        agent_command=args.agent_command,
        hub_url=args.hub_url,
        hub_command=args.hub_command,
        hub_tokens=args.hub_tokens,
        client_adapter=args.client_adapter,
        admin_adapter=args.admin_adapter,
        hub_ca=args.hub_ca,
        insecure=args.insecure,
        recorder_cert=args.recorder_cert,
        recorder_key=args.recorder_key,
    )
