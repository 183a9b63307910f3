"""The generator and nemesis: the seed draws a plan, the plan is a step list."""

from __future__ import annotations

from pathlib import Path

from tetherbed.simulator.explore.generator import generated_scenario, plan_for
from tetherbed.simulator.explore.plan import OPERATION
from tetherbed.simulator.scenario import load, parse

EXPLORE = Path(__file__).parents[3] / "scenarios" / "explore"


def test_the_same_seed_draws_the_same_plan_and_another_seed_another() -> None:
    scenario = load(EXPLORE / "two_machines.yaml")
    first, again, other = plan_for(scenario, 7), plan_for(scenario, 7), plan_for(scenario, 8)
    assert first.steps() == again.steps()
    assert first.steps() != other.steps()
    assert first.operations > 10 and first.faults > 0


def test_a_plan_compiles_to_a_plain_scenario_that_loads_strictly() -> None:
    scenario = load(EXPLORE / "two_machines.yaml")
    plan = plan_for(scenario, 3)
    document = plan.document()
    assert "generate" not in document and "nemesis" not in document
    assert document["seed"] == 3
    steps = document["steps"]
    assert steps[0] == {"start": "hub"}
    assert steps[-3:] == [{"heal": "all"}, {"clear": "all"}, {"wait": 15.0}]
    assert all(s["wait"] > 0 for s in steps if "wait" in s)
    plain = parse(document, None, "sim")
    assert not plain.generated and len(plain.steps) == len(steps)
    # What `tetherbed run` does with the generated file: the same steps.
    assert generated_scenario(scenario, 3, "sim").steps == plain.steps


def test_faults_respect_the_model_of_the_run() -> None:
    """A pause only hits a running agent, and each pause is undone before the
    same agent's lifecycle is touched again."""
    scenario = load(EXPLORE / "two_machines.yaml")
    for seed in range(1, 30):
        plan = plan_for(scenario, seed)
        busy: dict[str, float] = {}
        for item in plan.items:
            if item.kind in ("pause", "kill"):
                (agent,) = item.agents
                assert busy.get(agent, 0.0) <= item.at
                busy[agent] = item.end
            if item.kind == "pause":
                assert [next(iter(s)) for _, s in item.steps] == ["pause", "resume"]


def test_operations_carry_payloads_the_agent_can_run() -> None:
    scenario = load(EXPLORE / "two_machines.yaml")
    plan = plan_for(scenario, 5)
    kinds = set()
    for item in plan.items:
        if item.kind != OPERATION:
            continue
        send = item.steps[0][1]["send"]
        kinds.add(send["type"])
        if send["type"] == "EXECUTE_COMMAND":
            assert send["payload"]["command"].startswith(f"echo {send['id']} >> ran.log")
        else:
            assert send["payload"]["path"]
    assert kinds == {"EXECUTE_COMMAND", "FILE_WRITE", "FILE_READ"}
