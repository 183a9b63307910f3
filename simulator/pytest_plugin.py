"""The Tetherbed pytest plugin: `topology`, `hub` and `agent` fixtures.

Registered as the `tetherbed` entry point of `pytest11`, so installing the
package makes the fixtures available in any suite. The backend is chosen on
the command line (`--tetherbed-backend sim|process|docker`, default sim):

    def test_second_machine_is_refused(topology, hub, agent):
        topology.client("alice", session="chat")
        agent("laptop-a", machine="a", session="chat")
        agent("laptop-b", machine="b", session="chat", wait=False)
        hub.expect(agent="laptop-b", exit_code=27)
        assert hub.request("alice", "FILE_LIST", {"path": "."}).type == "ok"
        assert all(v.ok for v in hub.check())

- `topology`: declares clients (and hub options, before the hub starts: from a
  test, set them with `@pytest.mark.tetherbed(hub={"ping_interval": 5})`, or
  override the `topology` fixture).
- `hub`: the running test bed, with the hub started (a `Testbed`: every step
  of the scenario format is a method: pause, partition, fault, expect, ...).
- `agent`: a factory that adds an agent, starts it and (by default) waits
  until it is connected; returns its name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tetherbed.simulator.scenario import (
    AgentSpec,
    ClientSpec,
    HubSpec,
    ScenarioError,
    Topology,
    check_agent_options,
    check_hub_options,
)
from tetherbed.simulator.testbed import Testbed
from tetherbed.simulator.validation import Where


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "tetherbed(hub={...}): hub options for the Tetherbed fixtures' topology"
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tetherbed")
    group.addoption(
        "--tetherbed-backend",
        default="sim",
        choices=["sim", "process", "docker"],
        help="backend for the topology/hub/agent fixtures (default: sim)",
    )
    group.addoption("--tetherbed-seed", type=int, default=1, help="seed for the sim backend")


class TopologyBuilder:
    """What a test declares before the hub starts (and clients at any time).

    Every option is checked as in a scenario file: an unknown one is an error
    naming the test and the key, never silently ignored.
    """

    def __init__(self, test: str = "topology") -> None:
        self.test = test
        self.hub_options: dict[str, Any] = {}
        self.agents: dict[str, AgentSpec] = {}
        self.clients: dict[str, ClientSpec] = {}
        self._testbed: Testbed | None = None

    def hub(self, **options: Any) -> TopologyBuilder:
        if self._testbed is not None:
            raise RuntimeError("hub options must be set before the hub fixture starts it")
        where = Where(self.test).key("topology.hub").key("options")
        self.hub_options.update(check_hub_options({**self.hub_options, **options}, where))
        return self

    def client(self, name: str, *, session: str, user: str = "alice") -> TopologyBuilder:
        spec = ClientSpec(name, session, user)
        self.clients[name] = spec
        if self._testbed is not None:
            self._testbed.add_client(spec)
        return self

    def build(self) -> Topology:
        return Topology(HubSpec(options=dict(self.hub_options)), self.agents, self.clients)


#: What `@pytest.mark.tetherbed(...)` takes.
MARKER_KEYS = ("hub",)


@pytest.fixture
def topology(request: pytest.FixtureRequest) -> TopologyBuilder:
    builder = TopologyBuilder(request.node.nodeid)
    for marker in request.node.iter_markers("tetherbed"):
        where = Where(request.node.nodeid).key("@pytest.mark.tetherbed")
        if marker.args:
            raise ScenarioError(where, "takes keywords only: hub={...}")
        for key in marker.kwargs:
            if key not in MARKER_KEYS:
                raise ScenarioError(where, f"unknown keyword {key!r}; allowed: hub")
        hub = marker.kwargs.get("hub", {})
        if not isinstance(hub, dict):
            raise ScenarioError(where.key("hub"), f"expected a mapping of options, got {hub!r}")
        builder.hub(**hub)
    return builder


@pytest.fixture
def hub(
    topology: TopologyBuilder, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Testbed]:
    config = request.config
    testbed = Testbed(
        topology.build(),
        backend=config.getoption("--tetherbed-backend"),
        seed=config.getoption("--tetherbed-seed"),
        workdir=tmp_path / "testbed",
        name=request.node.name,
    )
    topology._testbed = testbed
    try:
        testbed.start("hub")
        yield testbed
    finally:
        testbed.close()


@pytest.fixture
def agent(hub: Testbed) -> Callable[..., str]:
    def start_agent(
        name: str,
        *,
        session: str,
        machine: str | None = None,
        user: str = "alice",
        wait: bool = True,
        **options: Any,
    ) -> str:
        where = Where(hub.scenario.name).key(f"agent({name!r})").key("options")
        spec = AgentSpec(
            name=name,
            machine=machine or name,
            session=session,
            user=user,
            root=machine or name,
            options=check_agent_options(options, where),
        )
        hub.add_agent(spec)
        hub.start(name)
        if wait:
            hub.expect(agent=name, state="connected")
        return name

    return start_agent
