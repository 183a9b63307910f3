"""Real hub and agent processes on loopback, started per test module and stopped by PID."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tetherbed.launch import HubProcess, ManagedProcess, start_agent, start_hub


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "hub_args(*args): extra `tetherbed hub` arguments")
    config.addinivalue_line("markers", "peer_args(*args): extra arguments of the strict peer")


@dataclass
class Stack:
    hub: HubProcess
    agent_token: str
    client_token: str
    root: Path
    session_id: str
    agent: ManagedProcess


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    base = tmp_path_factory.mktemp("stack")
    hub = start_hub(base / "state", args=["--max-concurrent", "16", "--retry-window", "3"])
    agent = None
    try:
        agent_token = hub.token("alice", "agent")
        client_token = hub.token("alice", "client")
        root = base / "root"
        root.mkdir()
        agent = start_agent(
            hub.url,
            agent_token,
            root,
            "sess-main",
            enable_shell=True,
            machine_id="machine-a",
            args=["--max-concurrent", "16"],
        )
        hub.wait_connected(client_token, "sess-main")
        yield Stack(hub, agent_token, client_token, root, "sess-main", agent)
    finally:
        if agent is not None:
            agent.stop()
        hub.stop()
