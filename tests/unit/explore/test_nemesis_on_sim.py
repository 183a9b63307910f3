"""Every nemesis kind the sim backend can do shows in the recording; the one it
cannot (`loss`) is refused at load."""

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


def test_every_kind_shows_in_the_recording(tmp_path: Path) -> None:
    scenario = coverage_scenario("sim")
    kinds = kinds_for("sim")
    seed = seed_firing_all(scenario, kinds)
    outcome = run_scenario(scenario, "sim", seed, tmp_path)
    assert outcome.error is None, outcome.error
    missing = [
        kind for kind, ok in shown(outcome.history, kinds, wire_effects=True).items() if not ok
    ]
    assert missing == []


def test_loss_is_refused_on_sim() -> None:
    document = coverage_scenario("docker").document
    assert document is not None
    with pytest.raises(ScenarioError, match="loss: not supported on the sim backend"):
        parse(document, None, "sim")
