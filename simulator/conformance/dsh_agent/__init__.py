"""The dsh-agent suite: any dsh-computers agent, driven by a scripted hub.

    tetherbed conform dsh-agent [--run-arg FLAG ...] -- CMD ARGS...

CMD ARGS is the agent's program (§6's `dsh-computers-agent`: `node
agent.mjs`, `python3 agent.pyz`, ...); the suite runs `CMD enroll --server
URL --key KEY` with a key its scripted hub created, then `CMD run`. Without a
command, Tetherbed's own agent (`tetherbed agent --transport sse`) is the
target. Every module of this package is a family of cases.
"""

from __future__ import annotations

import argparse
from typing import Any

from tetherbed.simulator.conformance.registry import Suite, register_suite


def add_arguments(group: Any) -> None:
    group.add_argument(
        "--run-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="an extra argument after `run` (e.g. --run-arg=--defect=ignore_cancel)",
    )


def environment(args: argparse.Namespace) -> Any:
    from tetherbed.simulator.conformance.dsh_agent.environment import (
        REFERENCE,
        DshAgentEnvironment,
    )

    command = list(args.command) if args.command else list(REFERENCE)
    return DshAgentEnvironment(command, list(args.run_arg), reference=tuple(command) == REFERENCE)


SUITE = register_suite(
    Suite(
        name="dsh-agent",
        prefix="DSH",
        spec="dsh-computers contract v1 (npm dsh-computers 1.3.0)",
        description="a dsh-computers agent, driven by a scripted hub",
        add_arguments=add_arguments,
        environment=environment,
        concurrency=6,
    )
)
