"""storm: K load agents, all connected, then dropped together; they come back on their backoff.

Run by `tetherbed load storm` (docs/load.md), which puts the recorder between
the agents and the hub, drops them (a partition at the recorder, or a hub
restart) once every session is served, and judges the hub from the recording.
Each agent reports every connection attempt (`connect`, then `reconnect`)
with the time the hub took to answer it.
"""

from __future__ import annotations

from typing import Any

from locust import constant, events
from locust.runners import WorkerRunner

from tetherbed.load.users import planned_shape, roles, wiring
from tetherbed.load.users.plan_option import plan_of

wiring.install(events)


class StormAgent(roles.AgentUser):
    wait_time = constant(0)
    fixed_count = 1  # the plan's load_agents, set on init


class Stages(planned_shape.PlannedShape):
    pass


@events.init.add_listener
def _agent_count(environment: Any, **_: Any) -> None:
    if not isinstance(environment.runner, WorkerRunner):
        StormAgent.fixed_count = plan_of(environment).load_agents
