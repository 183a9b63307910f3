"""Every nemesis kind on the process backend shows in the recording (real
processes, the fault proxy in front of each agent); `loss` is refused at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetherbed.simulator.explore.coverage import (
    coverage_scenario,
    kinds_for,
    seed_firing_all,
    shown,
)
from tetherbed.simulator.runner import run_scenario
from tetherbed.simulator.scenario import ScenarioError, parse

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_every_kind_shows_in_the_recording(tmp_path: Path) -> None:
    scenario = coverage_scenario("process")
    kinds = kinds_for("process")
    seed = seed_firing_all(scenario, kinds)
    outcome = run_scenario(scenario, "process", seed, tmp_path)
    assert outcome.error is None, outcome.error
    missing = [kind for kind, ok in shown(outcome.history, kinds).items() if not ok]
    assert missing == []


def test_loss_is_refused_on_process() -> None:
    document = coverage_scenario("docker").document
    assert document is not None
    with pytest.raises(ScenarioError, match="loss: not supported on the process backend"):
        parse(document, None, "process")
