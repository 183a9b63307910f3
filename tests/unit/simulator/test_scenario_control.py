"""Control-mode agents in scenario files: checked at load, refused where they cannot run."""

from __future__ import annotations

import pytest

from tetherbed.simulator.scenario import ScenarioError, parse

TOPOLOGY = {
    "agents": {"desk": {"machine": "m1", "control": {"browse": ["projects"]}}},
    "clients": {"platform": {"api": "machine", "machine": "m1"}, "alice": {"session": "s1"}},
}


def scenario(*steps: dict, topology: dict | None = None) -> dict:
    return {"name": "t", "topology": topology or TOPOLOGY, "steps": [{"start": "hub"}, *steps]}


def test_a_control_agent_and_a_machine_client_load_with_their_steps() -> None:
    loaded = parse(
        scenario(
            {"browse": {"client": "platform", "id": "b"}},
            {"attach": {"client": "platform", "id": "a", "session": "s1", "from": "b"}},
            {"activate": {"client": "platform", "id": "v", "session": "s1", "from": "a"}},
            {"restore": {"client": "platform", "id": "r", "session": "s1", "from": "a"}},
            {"detach": {"client": "platform", "id": "d", "session": "s1"}},
        ),
        backend="sim",
    )
    desk = loaded.topology.agents["desk"]
    assert desk.session is None and desk.control == {
        "browse": ["projects"],
        "child_idle_exit": 600.0,
    }
    assert loaded.topology.clients["platform"].machine == "m1"


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        (
            scenario(topology={"agents": {"desk": {"machine": "m1"}}}),
            "`session` is required (or `control:`",
        ),
        (
            scenario(topology={"agents": {"d": {"session": "s", "control": {}}}}),
            "`session` and `control` exclude each other",
        ),
        (
            scenario({"activate": {"client": "platform", "id": "v", "session": "s1", "from": "x"}}),
            "no earlier control step has id 'x'",
        ),
        (
            scenario(
                {"browse": {"client": "platform", "id": "b"}},
                {"activate": {"client": "platform", "id": "v", "session": "s1", "from": "b"}},
            ),
            "activate takes its input from a attach or restore step",
        ),
        (
            scenario({"browse": {"client": "alice", "id": "b"}}),
            "no machine client (api: machine) 'alice'",
        ),
    ],
)
def test_mistakes_are_refused_at_load(document: dict, fragment: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse(document)
    assert fragment in str(caught.value)


def test_docker_refuses_control_agents_and_machine_clients_at_load() -> None:
    with pytest.raises(ScenarioError, match="not supported on the docker backend"):
        parse(scenario(), backend="docker")
