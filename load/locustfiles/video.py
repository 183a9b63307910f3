"""video: viewers of the native adapter's video listener that ack fast, slowly or never.

Run by `tetherbed load video` (docs/load.md): first only the fast (and slow)
viewers, then the same with one stalled viewer added; the summary compares
the fast viewers' frame rate in the two phases.
"""

from __future__ import annotations

from typing import Any

from locust import constant, events, task
from locust.runners import WorkerRunner

from tetherbed.load.users import planned_shape, viewers, wiring
from tetherbed.load.users.plan_option import plan_of

wiring.install(events)


class FastViewer(viewers.ViewerUser):
    wait_time = constant(0)
    fixed_count = 1
    kind = "fast"

    @task
    def frames(self) -> None:
        self.watch()


class SlowViewer(viewers.ViewerUser):
    wait_time = constant(0)
    fixed_count = 0
    kind = "slow"

    def ack_delay(self) -> float | None:
        return self.plan.slow_ack_seconds

    @task
    def frames(self) -> None:
        self.watch()


class StalledViewer(viewers.ViewerUser):
    # Weighted, not fixed: Locust's dispatcher adds no fixed-count user when a
    # shape's stage brings a new class in, but gives it the stage's one spare user.
    wait_time = constant(0)
    kind = "stalled"

    def ack_delay(self) -> float | None:
        return None

    @task
    def frames(self) -> None:
        self.watch()


class Stages(planned_shape.PlannedShape):
    pass


@events.init.add_listener
def _counts(environment: Any, **_: Any) -> None:
    if not isinstance(environment.runner, WorkerRunner):
        plan = plan_of(environment)
        FastViewer.fixed_count = plan.fast_viewers
        SlowViewer.fixed_count = plan.slow_viewers
