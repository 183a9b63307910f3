"""Each planted defect of the dsh hub fails the shipped scenarios and checkers meant for it.

The defects are switches of the reference hub (`hub/dsh/config.py`,
`hub.options.dsh.defects` in a scenario). Every dsh scenario passes without
them (test_every_shipped_scenario_passes_on_sim); here each defect is switched
on in the scenarios that target it, on the sim backend, and the run must fail
— by a checker judging the wire, or by a step that states the property — and
say which. The table is docs/scenarios.md's "dsh-computers defects".

`make dsh-defects` runs the same on the process backend too (real hub and
agent processes, a minute or two): `TETHERBED_DSH_DEFECT_BACKENDS=sim,process`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tetherbed.hub.dsh.config import DSH_HUB_DEFECTS
from tetherbed.simulator.runner import RunOutcome, run_scenario
from tetherbed.simulator.scenario import load

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
BACKENDS = os.environ.get("TETHERBED_DSH_DEFECT_BACKENDS", "sim").split(",")

#: defect → (scenario, checkers that fail, the failing step's text or None)
CAUGHT = [
    ("reusable_key", "dsh_key_used_twice", {"dsh_single_use_keys"}, "409"),
    ("reusable_key", "dsh_install_url_not_forwarded", {"dsh_single_use_keys"}, "409"),
    ("token_in_clear", "dsh_key_used_twice", set(), "the hub stores in clear: token"),
    ("presence_from_heartbeat", "dsh_killed_agent_offline", {"dsh_presence"}, "online=False"),
    ("presence_from_heartbeat", "dsh_presence_flapping", {"dsh_presence"}, "online=False"),
    ("chunks_out_of_order", "dsh_chunks_out_of_order", {"dsh_chunk_order"}, None),
    (
        "install_url_from_forwarded_header",
        "dsh_install_url_not_forwarded",
        {"dsh_install_url"},
        None,
    ),
]


def run(
    tmp_path: Path,
    name: str,
    defect: str | None = None,
    seed: int | None = None,
    backend: str = "sim",
) -> RunOutcome:
    scenario = load(SCENARIOS / f"{name}.yaml", backend)
    if defect is not None:
        scenario.topology.hub.options.setdefault("dsh", {})["defects"] = [defect]
    workdir = tmp_path / f"{name}-{defect}-{seed}-{len(list(tmp_path.iterdir()))}"
    workdir.mkdir()
    return run_scenario(scenario, backend, scenario.seed if seed is None else seed, workdir)


def test_every_defect_is_caught_by_some_scenario() -> None:
    assert {defect for defect, *_ in CAUGHT} == DSH_HUB_DEFECTS


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("defect", "scenario", "checkers", "step"),
    CAUGHT,
    ids=[f"{d}-{s}" for d, s, *_ in CAUGHT],
)
def test_the_defect_fails_the_scenario(  # noqa: PLR0917 - pytest passes parameters by name
    tmp_path: Path, defect: str, scenario: str, checkers: set[str], step: str | None, backend: str
) -> None:
    outcome = run(tmp_path, scenario, defect, backend=backend)
    assert outcome.error is None, outcome.error
    assert outcome.verdict == "fail"
    failed = {v.name for v in outcome.verdicts if v.status == "fail"}
    assert failed == checkers, [v.to_dict() for v in outcome.verdicts if v.status != "pass"]
    for verdict in outcome.verdicts:
        if verdict.status == "fail":
            assert verdict.evidence, verdict.name  # it names the records that show it
    if step is None:
        assert outcome.step_failure is None, outcome.step_failure
    else:
        assert outcome.step_failure is not None and step in outcome.step_failure


def test_one_seed_gives_the_same_dsh_history_byte_for_byte(tmp_path: Path) -> None:
    first = run(tmp_path, "dsh_shared_token", seed=7)
    second = run(tmp_path, "dsh_shared_token", seed=7)
    assert first.verdict == second.verdict == "pass"
    lines = [[r.to_json() for r in o.history.records] for o in (first, second)]
    assert lines[0] == lines[1]
    other = run(tmp_path, "dsh_shared_token", seed=8)
    assert [r.to_json() for r in other.history.records] != lines[0]
