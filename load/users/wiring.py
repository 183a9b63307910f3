"""What every locustfile installs: the plan option, slots, the timeline, draining.

A locustfile calls `install(events)` once at import; the rest happens on
Locust's `init` (when the runner exists) and at the end of the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from locust.env import Environment
from locust.event import Events
from locust.runners import WorkerRunner

from tetherbed.load.users import draining, slots, timeline
from tetherbed.load.users.plan_option import add_option, plan_of
from tetherbed.load.users.roles import close_legs

#: Longest wait for unanswered requests at the end of a run.
DRAIN_SECONDS = 10.0


def install(events: Events) -> None:
    events.init_command_line_parser.add_listener(add_option)

    def on_init(environment: Environment, **_: Any) -> None:
        slots.install(environment)
        out_dir = None
        if not isinstance(environment.runner, WorkerRunner):
            out_dir = Path(plan_of(environment).out_dir)
        timeline.install(environment, out_dir)

    def on_stopping(environment: Environment, **_: Any) -> None:
        # The master has no client of its own: for it this returns at once.
        draining.drain(min(plan_of(environment).request_timeout, DRAIN_SECONDS))

    events.init.add_listener(on_init)
    events.test_stopping.add_listener(on_stopping)
    events.quitting.add_listener(lambda **_: close_legs())
