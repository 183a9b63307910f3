"""The agent suite: any local-executor agent, driven by a scripted platform.

    tetherbed conform agent [--profile P ...] [--report DIR] -- CMD ARGS...

CMD ARGS is the agent's command template (docs/targets.md: {hub_url}
{token} {session} {root} {machine} {state} {shell_flag} {max_concurrent}
{protocol_version}); without one, Tetherbed's own agent is the target.
Every module of this package is a family of cases.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tetherbed.simulator.conformance.registry import Suite, register_suite
from tetherbed.simulator.targets import AgentTarget, Target


def add_arguments(group: Any) -> None:
    group.add_argument("--target", type=Path, help="a target file whose `agent` to test")
    group.add_argument(
        "--control-command",
        help="the agent's control-mode command template (no {session}); control cases need it",
    )
    group.add_argument("--display", help="an X display for the agent (computer use cases)")
    group.add_argument(
        "--xvfb", action="store_true", help="start a private Xvfb display for the agent"
    )


def environment(args: argparse.Namespace) -> Any:
    from tetherbed.simulator.conformance.agent.environment import (
        REFERENCE_CONTROL,
        REFERENCE_DATA,
        AgentEnvironment,
    )

    if args.command and args.target:
        raise ValueError("give the agent after `--` or in --target, not both")
    if args.target:
        agent = Target.read(args.target).agent
        if agent.is_reference:
            agent = AgentTarget.from_command(list(REFERENCE_DATA))
    elif args.command:
        agent = AgentTarget.from_command(args.command, "the agent command")
    else:
        agent = AgentTarget.from_command(list(REFERENCE_DATA))
    reference = tuple(agent.command or ()) == REFERENCE_DATA
    if args.control_command:
        control: AgentTarget | None = AgentTarget.from_command(
            args.control_command, "--control-command"
        )
    elif reference:
        control = AgentTarget.from_command(list(REFERENCE_CONTROL))
    else:
        control = None
    return AgentEnvironment(
        agent, control, display=args.display, xvfb=args.xvfb, reference=reference
    )


SUITE = register_suite(
    Suite(
        name="agent",
        prefix="LE",
        spec="local-executor protocol, draft v0.1 (wire version 1.1)",
        description="a local-executor agent (shim), driven by a scripted platform",
        add_arguments=add_arguments,
        environment=environment,
        concurrency=6,
    )
)
