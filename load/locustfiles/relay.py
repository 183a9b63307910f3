"""relay: load agents answering like agents, and clients sending a request mix through the hub.

Run by `tetherbed load relay` (docs/load.md), which writes the plan: how many
load agents (a fixed count of `RelayAgent`), which sessions real agent
processes serve, the mix, closed or open loop, and the stages.
"""

from __future__ import annotations

from typing import Any

from locust import constant, events
from locust.runners import WorkerRunner

from tetherbed.load.users import planned_shape, roles, wiring
from tetherbed.load.users.plan_option import plan_of

wiring.install(events)


class RelayAgent(roles.AgentUser):
    wait_time = constant(0)
    fixed_count = 1  # the plan's load_agents, set on init


class RelayClient(roles.ClientUser):
    wait_time = constant(0)


class Stages(planned_shape.PlannedShape):
    pass


@events.init.add_listener
def _agent_count(environment: Any, **_: Any) -> None:
    if not isinstance(environment.runner, WorkerRunner):
        RelayAgent.fixed_count = plan_of(environment).load_agents
