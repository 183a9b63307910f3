"""Every nemesis kind on the docker backend, `loss` included (iptables in the
agent's namespace), shows in the recording of one generated run."""

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

pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("docker"), pytest.mark.timeout(900)]


@pytest.fixture(autouse=True)
def built_images(images: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("TETHERBED_HUB_IMAGE", "TETHERBED_MACHINE_IMAGE"):
        monkeypatch.setenv(key, images[key])


def test_every_kind_shows_in_the_recording(tmp_path: Path) -> None:
    scenario = coverage_scenario("docker", duration=12.0)
    kinds = kinds_for("docker")
    assert "loss" in kinds
    seed = seed_firing_all(scenario, kinds)
    outcome = run_scenario(scenario, "docker", seed, tmp_path)
    assert outcome.error is None, outcome.error
    missing = [kind for kind, ok in shown(outcome.history, kinds).items() if not ok]
    assert missing == []
