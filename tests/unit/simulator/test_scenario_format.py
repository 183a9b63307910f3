"""Scenario files: everything is validated up front, with the place and the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tetherbed.simulator.scenario import DEFAULT_CHECKERS, ScenarioError, load, load_all, parse

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"

BASE = {
    "name": "t",
    "topology": {"agents": {"a": {"session": "s"}}, "clients": {"c": {"session": "s"}}},
    "steps": [{"start": "hub"}],
}


def with_steps(*steps: object) -> dict:
    return {**BASE, "steps": [{"start": "hub"}, *steps]}


def test_every_shipped_scenario_parses() -> None:
    scenarios = load_all([SCENARIOS])
    assert len(scenarios) >= 10
    assert len({s.name for s in scenarios}) == len(scenarios)
    for scenario in scenarios:
        assert scenario.description, scenario.name
        assert scenario.steps


def test_defaults() -> None:
    scenario = parse(BASE)
    assert scenario.checkers == DEFAULT_CHECKERS
    agent = scenario.topology.agents["a"]
    assert (agent.machine, agent.root, agent.user, agent.shell) == ("a", "a", "alice", False)


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({**BASE, "colour": "red"}, "unknown key 'colour'"),
        ({**BASE, "steps": []}, "steps: expected a non-empty list"),
        (with_steps({"teleport": "a"}), "step 2: unknown step 'teleport'"),
        (with_steps({"start": "nobody"}), "step 2 (start): no node (the hub or a declared agent)"),
        (with_steps({"send": {"client": "c", "id": "x", "type": "NOPE"}}), "type: unknown value"),
        (with_steps({"send": {"client": "c", "type": "PING"}}), "`id` is required"),
        (with_steps({"expect": {"agent": "ghost", "state": "exited"}}), "no declared agent"),
        (with_steps({"fault": {"agent": "a"}}), "step 2 (fault): `kind` is required"),
        (with_steps({"wait": -1}), "step 2 (wait): must be at least 0"),
        ({**BASE, "topology": {"agents": {"a": {}}}}, "topology.agents.a: `session` is required"),
        (
            {**BASE, "topology": {"hub": {"options": {"max_concurrent": "4"}}}},
            "topology.hub.options.max_concurrent: expected an integer",
        ),
        (
            {**BASE, "topology": {"hub": {"options": {"turbo": True}}}},
            "topology.hub.options: unknown key 'turbo'",
        ),
    ],
)
def test_bad_scenarios_say_where_and_why(document: dict, fragment: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse(document)
    assert fragment in str(caught.value)


def test_yaml_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError) as caught:
        load(bad)
    assert "broken.yaml" in str(caught.value)
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(BASE))
    assert load(good).path == good
