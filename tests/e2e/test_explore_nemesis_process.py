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


THIRD_PARTY = """
name: a third-party agent under takeovers and partitions
checkers: [single_owner, exactly_one_answer, no_double_execution, no_crossed_answers]
topology:
  hub: {options: {request_timeout: 5}}
  agents:
    w1: {machine: m, session: s, options: {shell: true}}
    w2: {machine: m, session: s, options: {shell: true}}
  clients:
    alice: {session: s}
generate:
  duration: 5
  start: [w1]
  clients:
    alice: {rate: 2, mix: {EXECUTE_COMMAND: 1, FILE_WRITE: 1, FILE_READ: 1}}
  command_seconds: [0, 0.5]
  settle: 2
nemesis:
  takeover_same_machine: {rate: 0.3}
  partition: {rate: 0.2, duration: [0.3, 1]}
"""


def test_explore_drives_a_third_party_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tetherbed explore --agent-command` on real processes: the independent
    minimal agent of tests/third_party, judged from the wire, its frames
    scheduled by the proxy under the seed."""
    from tests.third_party.targets import MINIMAL_AGENT
    from tetherbed.simulator.explore.cli import main

    topology = tmp_path / "third_party.yaml"
    topology.write_text(THIRD_PARTY, encoding="utf-8")
    status = main(
        [
            *(str(topology), "--backend", "process", "--seeds", "1"),
            *("--agent-command", MINIMAL_AGENT, "--schedule", "200ms"),
        ]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert "1 seed(s): 1 passed, 0 did not; 1 distinct interleaving(s)" in out
