"""takeover: sessions whose owner is replaced by its own machine and challenged by others,
under request load; judged from the recording by `tetherbed load takeover`.
"""

from __future__ import annotations

from typing import Any

from locust import constant, events, task
from locust.runners import WorkerRunner

from tetherbed.load.users import planned_shape, roles, takeovers, wiring
from tetherbed.load.users.plan_option import plan_of

wiring.install(events)


class SessionOwner(takeovers.OwnerUser):
    wait_time = constant(0)
    fixed_count = 1  # the plan's sessions, set on init


class Challenger(takeovers.ChallengerUser):
    wait_time = constant(0)
    fixed_count = 1  # set on init

    @task
    def claim(self) -> None:
        self.challenge()


class Client(roles.ClientUser):
    wait_time = constant(0)


class Stages(planned_shape.PlannedShape):
    pass


@events.init.add_listener
def _counts(environment: Any, **_: Any) -> None:
    if not isinstance(environment.runner, WorkerRunner):
        plan = plan_of(environment)
        SessionOwner.fixed_count = plan.load_agents
        Challenger.fixed_count = plan.challengers
