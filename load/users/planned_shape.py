"""The run's stages as a Locust `LoadTestShape`: users per stage, then the end.

Every run has stages (the plan's): one for a plain run, one per step of
`--step`, one per phase of a profile. The shape runs on the master (or the
lone local runner); it writes `stages.json` — each stage with the wall-clock
second it began — so that the analysis can cut the timeline at the same
places. A stage may name the user classes it runs (the video profile adds a
stalled viewer only in its second phase).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from locust import LoadTestShape

from tetherbed.load.plan import Plan
from tetherbed.load.users.plan_option import plan_of

FILE = "stages.json"


class PlannedShape(LoadTestShape):
    def __init__(self) -> None:
        super().__init__()
        self._plan: Plan | None = None
        self._started: list[dict[str, Any]] = []
        self._current = -1

    def _load(self) -> Plan:
        if self._plan is None:
            assert self.runner is not None
            self._plan = plan_of(self.runner.environment)
        return self._plan

    def tick(self) -> tuple[Any, ...] | None:
        plan = self._load()
        elapsed = self.get_run_time()
        end = 0.0
        for index, stage in enumerate(plan.stages):
            end += stage.seconds
            if elapsed < end:
                if index != self._current:
                    self._current = index
                    self._started.append(
                        {
                            "name": stage.name,
                            "users": stage.users,
                            "seconds": stage.seconds,
                            "start": time.time(),
                        }
                    )
                    self._write(plan)
                if stage.classes is None:
                    return stage.users, plan.spawn_rate
                classes = [self._class(name) for name in stage.classes]
                return stage.users, plan.spawn_rate, classes
        self._write(plan, ended=time.time())
        return None

    def _class(self, name: str) -> Any:
        assert self.runner is not None
        return self.runner.environment.user_classes_by_name[name]

    def _write(self, plan: Plan, ended: float | None = None) -> None:
        folder = Path(plan.out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        document = {"stages": self._started, "ended": ended}
        (folder / FILE).write_text(json.dumps(document, indent=1), encoding="utf-8")
