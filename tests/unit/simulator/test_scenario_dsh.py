"""The dsh-computers part of the scenario format: strict at load, like every other key."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tetherbed.simulator.scenario import ScenarioError, load_all, parse, shipped_scenarios

BASE: dict[str, Any] = {
    "name": "dsh",
    "topology": {
        "agents": {
            "laptop": {"session": "s"},
            "desk": {"transport": "sse"},
            "twin": {"transport": "sse", "token_of": "desk"},
        },
        "clients": {"alice": {"api": "dsh"}, "bob": {"session": "s"}},
    },
    "steps": [
        {"start": "hub"},
        {"create_key": {"client": "alice", "id": "k1"}},
        {"enroll": {"agent": "desk", "key": "k1"}},
        {"start": "desk"},
    ],
}


def with_steps(*steps: dict[str, Any], **topology: Any) -> dict[str, Any]:
    document = copy.deepcopy(BASE)
    document["steps"] += list(steps)
    for path, value in topology.items():
        node = document["topology"]
        *parents, last = path.split("__")
        for key in parents:
            node = node[key]
        node[last] = value
    return document


def test_a_topology_holds_sse_agents_next_to_websocket_agents() -> None:
    scenario = parse(
        with_steps(
            {"expect": {"computer": "desk", "online": True}},
            {"exec": {"client": "alice", "id": "e1", "computer": "twin", "command": "true"}},
            {"fault": {"agent": "desk", "kind": "http_drop", "path": "/agent/results"}},
            {"fault": {"agent": "desk", "kind": "latency", "latency_ms": 50}},
            {"fault": {"agent": "laptop", "kind": "drop", "types": ["PONG"]}},
            {"assert": {"credentials_stored": "digests_only", "reference_only": True}},
        ),
        backend="sim",
    )
    agents = scenario.topology.agents
    assert agents["desk"].sse and agents["desk"].session is None
    assert agents["twin"].token_of == "desk"
    assert not agents["laptop"].sse and agents["laptop"].session == "s"
    assert scenario.topology.clients["alice"].dsh
    assert scenario.topology.sessions() == ["s"]
    fault = scenario.steps[6].args
    assert fault == {
        "kind": "http_drop",
        "agent": "desk",
        "path": "/agent/results",
        "what": "response",
        "method": "POST",
        "count": 1,
    }


MISTAKES = [
    pytest.param(
        with_steps({"send": {"client": "alice", "id": "r1", "type": "FILE_READ"}}),
        "step 5 (send): client: no declared client 'alice'; known: bob",
        id="send-through-a-dsh-client",
    ),
    pytest.param(
        with_steps({"enroll": {"agent": "laptop", "key": "k1"}}),
        "step 5 (enroll): agent: no SSE agent (transport: sse) 'laptop'",
        id="enroll-a-websocket-agent",
    ),
    pytest.param(
        with_steps({"enroll": {"agent": "desk", "key": "k2"}}),
        "step 5 (enroll): key: no key (the id of a create_key step) 'k2'",
        id="unknown-key",
    ),
    pytest.param(
        with_steps(
            {"enroll": {"agent": "twin", "key": "k9"}},
            {"create_key": {"client": "alice", "id": "k9"}},
        ),
        "step 5 (enroll): key: key 'k9' is used before it is created",
        id="key-used-before-it-is-created",
    ),
    pytest.param(
        with_steps({"create_key": {"client": "alice", "id": "k1"}}),
        "step 5 (create_key): id: key 'k1' is created twice",
        id="key-created-twice",
    ),
    pytest.param(
        with_steps({"fault": {"agent": "desk", "kind": "drop", "types": ["PONG"]}}),
        "step 5 (fault): kind: a drop fault cannot act on desk's sse link",
        id="message-fault-on-an-http-link",
    ),
    pytest.param(
        with_steps(
            {"fault": {"agent": "laptop", "kind": "http_replay", "path": "/a", "delay_ms": 1}}
        ),
        "step 5 (fault): kind: a http_replay fault cannot act on laptop's websocket link",
        id="http-fault-on-a-websocket-link",
    ),
    pytest.param(
        with_steps({"fault": {"agent": "desk", "kind": "http_drop", "path": "agent/results"}}),
        "step 5 (fault): path: expected a request path starting with /",
        id="http-path-without-a-slash",
    ),
    pytest.param(
        with_steps(agents__twin={"transport": "sse", "token_of": "laptop"}),
        "topology.agents.twin.token_of: 'laptop' is not another SSE agent",
        id="token-of-a-websocket-agent",
    ),
    pytest.param(
        with_steps(agents__desk={"transport": "sse", "session": "s"}),
        "topology.agents.desk: unknown key 'session'",
        id="sse-agent-with-a-session",
    ),
    pytest.param(
        with_steps(agents__desk={"transport": "grpc"}),
        "topology.agents.desk.transport: unknown transport 'grpc'",
        id="unknown-transport",
    ),
    pytest.param(
        with_steps(agents__desk={"transport": "sse", "options": {"defects": ["reusable_key"]}}),
        "topology.agents.desk.options.defects.0: unknown value 'reusable_key'",
        id="hub-defect-on-an-agent",
    ),
    pytest.param(
        with_steps(hub={"options": {"dsh": {"defects": ["reusable_keys"]}}}),
        "topology.hub.options.dsh.defects.0: unknown value 'reusable_keys' (did you mean "
        "'reusable_key'?)",
        id="misspelt-hub-defect",
    ),
    pytest.param(
        with_steps(
            {"expect": {"computer": "desk", "online": True}},
            clients={"alice": {"api": "dsh"}, "carol": {"api": "dsh"}},
        ),
        "step 5 (expect): expect {computer: desk} needs `via:`",
        id="presence-reader-ambiguous",
    ),
    pytest.param(
        with_steps({"expect": {"computer": "desk", "online": "yes"}}),
        "step 5 (expect): online: expected true or false",
        id="presence-not-a-boolean",
    ),
]


@pytest.mark.parametrize(("document", "message"), MISTAKES)
def test_each_dsh_mistake_is_refused_at_load(document: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse(document, Path("mistake.yaml"), "sim")
    assert message in str(caught.value), str(caught.value)


def test_sse_agents_are_refused_on_docker_but_dsh_scenarios_are_skipped_there() -> None:
    with pytest.raises(ScenarioError, match="not supported on the docker backend"):
        parse(with_steps(), Path("x.yaml"), "docker")
    shipped = [s for s in load_all([shipped_scenarios()], "docker") if s.name.startswith("dsh ")]
    assert len(shipped) >= 5
    assert all("docker" not in s.backends for s in shipped)
