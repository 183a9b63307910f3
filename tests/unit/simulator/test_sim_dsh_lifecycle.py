"""SSE agents through the hub's and the network's whole lifecycle on the sim backend."""

from __future__ import annotations

from pathlib import Path

from tetherbed.simulator.runner import run_scenario
from tetherbed.simulator.scenario import load

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "dsh_lifecycle.yaml"


def test_hub_restart_partition_pause_and_crash(tmp_path: Path) -> None:
    scenario = load(FIXTURE, "sim")
    outcome = run_scenario(scenario, "sim", 1, tmp_path)
    assert outcome.error is None and outcome.step_failure is None, (
        outcome.error or outcome.step_failure
    )
    assert {v.name: v.status for v in outcome.verdicts} == {
        "dsh_presence": "pass",
        "dsh_one_stream": "pass",
        "dsh_exec_answers": "pass",
        "exactly_one_answer": "pass",
    }
    # The hub found the partitioned stream itself: its end reached the agent
    # as a reset once the partition healed, not as a FIN the agent sent.
    ends = [r.value.get("how") for r in outcome.history.events("sse_end", "wire:desk")]
    assert "reset" in ends
