"""What every profile's orchestration shares: target, folder, distribution, topology."""

from __future__ import annotations

import argparse
import contextlib
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetherbed.load.fail_if import Condition
from tetherbed.load.locust_process import Distribution
from tetherbed.load.plan import Plan
from tetherbed.load.topology import Topology, TopologyError
from tetherbed.simulator.targets import HubAccess, Target
from tetherbed.simulator.targets.arguments import target_from_arguments


@dataclass
class Context:
    args: argparse.Namespace
    target: Target
    folder: Path
    distribution: Distribution
    topology: Topology
    #: Names this run's sessions and machines apart from any earlier run's.
    prefix: str

    @property
    def conditions(self) -> list[Condition]:
        return self.args.conditions

    @property
    def workers(self) -> int:
        if self.distribution.workers:
            return self.distribution.workers
        return self.distribution.expect_workers or 1

    def describe_target(self) -> str:
        return self.target.describe()

    def plan(self, profile: str, access: HubAccess, *, agent_url: str, **fields: Any) -> Plan:
        """A plan acting as the run's user on the hub, with its tokens; the
        Locust side's output in `locust/`."""
        user = self.topology.user
        return Plan(
            profile=profile,
            agent_url=agent_url,
            client_url=fields.pop("client_url", access.url),
            user=user,
            agent_token=access.tokens.get(user, "agent"),
            client_token=access.tokens.get(user, "client"),
            session_prefix=self.prefix,
            out_dir=str(self.folder / "locust"),
            **fields,
        )


def distribution_of(args: argparse.Namespace) -> Distribution:
    return Distribution(
        workers=args.workers,
        expect_workers=args.expect_workers if args.master else 0,
        master_bind=args.master_bind,
        master_port=args.master_port,
    )


@contextlib.contextmanager
def context(args: argparse.Namespace) -> Iterator[Context]:
    """The run's context; every process it starts is stopped on the way out."""
    target = target_from_arguments(args)
    folder: Path = args.out
    folder.mkdir(parents=True, exist_ok=True)
    topology = Topology(folder, target, hub_args=list(args.hub_arg))
    try:
        yield Context(
            args,
            target,
            folder,
            distribution_of(args),
            topology,
            prefix=f"{args.profile}-{uuid.uuid4().hex[:6]}",
        )
    finally:
        topology.close()


def run_profile(args: argparse.Namespace, body: Callable[[Context], int]) -> int:
    """`body` in the run's context; a part that cannot start is a clear failure."""
    with context(args) as ctx:
        try:
            return body(ctx)
        except TopologyError as exc:
            return fail(str(exc))


def fail(message: str) -> int:
    print(f"tetherbed load: {message}", file=sys.stderr)
    return 1


__all__ = ["Context", "TopologyError", "context", "distribution_of", "fail", "run_profile"]
