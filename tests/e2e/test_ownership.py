"""Session ownership, revocation and shutdown with real hub and agent processes."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from pathlib import Path

import pytest

from tetherbed.agent.backoff import Backoff
from tetherbed.client.admin import HubAdmin
from tetherbed.client.sandbox import HubSandbox, PermissionDeniedError
from tetherbed.launch import start_agent, start_hub

pytestmark = pytest.mark.e2e

SESSION = "owned"


@pytest.fixture
def hub(tmp_path: Path):
    hub = start_hub(
        tmp_path / "hub",
        args=["--retry-window", "2", "--ping-interval", "1", "--pong-timeout", "1"],
    )
    yield hub
    hub.stop()


def _root(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    root.mkdir()
    return root


async def test_different_machine_is_refused_with_4427_and_never_reconnects(
    hub, tmp_path: Path
) -> None:
    agent_token, client_token = hub.token("u", "agent"), hub.token("u", "client")
    owner = start_agent(hub.url, agent_token, _root(tmp_path, "a"), SESSION, machine_id="laptop-a")
    intruder = None
    try:
        hub.wait_connected(client_token, SESSION, machine_id="laptop-a")
        intruder = start_agent(
            hub.url, agent_token, _root(tmp_path, "b"), SESSION, machine_id="laptop-b"
        )
        assert intruder.wait(20) == 27  # SESSION_TAKEN_OVER: fatal, no reconnect
        assert "4427" in intruder.log()
        assert "reconnecting" not in intruder.log()
        (tmp_path / "a" / "still.txt").write_text("mine")
        async with HubSandbox.connect(hub.url, SESSION, client_token) as sb:
            assert await sb.files.read("still.txt") == "mine"  # the owner keeps working
        assert owner.alive()
    finally:
        owner.stop()
        if intruder is not None:
            intruder.stop()


async def test_same_machine_takes_over_old_is_revoked(hub, tmp_path: Path) -> None:
    agent_token, client_token = hub.token("u", "agent"), hub.token("u", "client")
    old = start_agent(hub.url, agent_token, _root(tmp_path, "old"), SESSION, machine_id="laptop")
    new = None
    try:
        hub.wait_connected(client_token, SESSION)
        new = start_agent(
            hub.url, agent_token, _root(tmp_path, "new"), SESSION, machine_id="laptop"
        )
        # SESSION_REVOKED arrives first: the old agent closes with 4428 and stops for good
        assert old.wait(20) == 28
        assert "another_shim_connected" in old.log()
        (tmp_path / "new" / "here.txt").write_text("new one")
        async with HubSandbox.connect(hub.url, SESSION, client_token) as sb:
            assert await sb.files.read("here.txt") == "new one"
        assert new.alive()
    finally:
        old.stop()
        if new is not None:
            new.stop()


async def test_user_revocation_closes_4428_through_api_and_cli(hub, tmp_path: Path) -> None:
    agent_token, client_token = hub.token("u", "agent"), hub.token("u", "client")
    first = start_agent(hub.url, agent_token, _root(tmp_path, "r1"), "rev-1", machine_id="m")
    second = start_agent(hub.url, agent_token, _root(tmp_path, "r2"), "rev-2", machine_id="m")
    try:
        hub.wait_connected(client_token, "rev-1")
        hub.wait_connected(client_token, "rev-2")
        async with HubAdmin(hub.url, client_token) as admin:
            assert (await admin.revoke("rev-1"))["agent_closed"]
        assert first.wait(20) == 28
        assert "user_revoked" in first.log()
        process = await asyncio.create_subprocess_exec(
            str(Path(__import__("sys").executable)),
            "-m",
            "tetherbed",
            "hub",
            "session",
            "revoke",
            "--hub",
            hub.url,
            "--token",
            client_token,
            "rev-2",
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await process.communicate()
        assert process.returncode == 0 and b"4428" in out
        assert second.wait(20) == 28
    finally:
        first.stop()
        second.stop()


async def test_a_revoked_session_is_refused_to_every_new_agent_and_client(
    hub, tmp_path: Path
) -> None:
    """Before: admission never read the revoke flag; a new agent connected to
    the revoked session and served a client's command."""
    agent_token, client_token = hub.token("u", "agent"), hub.token("u", "client")
    first = start_agent(hub.url, agent_token, _root(tmp_path, "r1"), "gone", machine_id="m1")
    second = None
    try:
        hub.wait_connected(client_token, "gone")
        async with HubAdmin(hub.url, client_token) as admin:
            await admin.revoke("gone")
        assert first.wait(20) == 28
        root = _root(tmp_path, "r2")
        second = start_agent(hub.url, agent_token, root, "gone", machine_id="m2", enable_shell=True)
        assert second.wait(20) == 4  # refused like a bad token: stops for good
        with pytest.raises(PermissionDeniedError) as refused:
            await HubSandbox.connect(hub.url, "gone", client_token)
        assert refused.value.code == "SESSION_REVOKED"
        assert not [s for s in hub.sessions(client_token) if s["connected"]]
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_hub_shutdown_sends_4429_and_agents_stop(tmp_path: Path) -> None:
    hub = start_hub(tmp_path / "hub")
    agent_token, client_token = hub.token("u", "agent"), hub.token("u", "client")
    agents = [
        start_agent(hub.url, agent_token, _root(tmp_path, f"s{i}"), f"sd-{i}", machine_id=f"m{i}")
        for i in range(2)
    ]
    try:
        for i in range(2):
            hub.wait_connected(client_token, f"sd-{i}")
        assert hub.stop() == 0
        for agent in agents:
            assert agent.wait(20) == 29
            assert "4429" in agent.log()
    finally:
        for agent in agents:
            agent.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_DELAY = re.compile(r"reconnecting in ([0-9.]+) s \(attempt (\d+)\)")


def test_hub_crash_and_restart_agent_reconnects_on_schedule(tmp_path: Path) -> None:
    port = _free_port()
    state = tmp_path / "hub"
    hub = start_hub(state, listen=f"127.0.0.1:{port}")
    agent_token, client_token = hub.token("u", "agent"), hub.token("u", "client")
    agent = start_agent(hub.url, agent_token, _root(tmp_path, "w"), "crash", machine_id="m")
    try:
        hub.wait_connected(client_token, "crash")
        hub.process.signal(9)  # a crash: no 4429, so the agent must reconnect
        hub.process.wait(10)
        # let the agent fail twice against the dead port before the hub returns
        deadline = time.monotonic() + 30
        while len(_DELAY.findall(agent.log())) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        hub = start_hub(state, listen=f"127.0.0.1:{port}")
        hub.wait_connected(client_token, "crash", timeout=30)
        delays = [(float(d), int(n)) for d, n in _DELAY.findall(agent.log())]
        assert len(delays) >= 2
        bounds = Backoff()
        for delay, attempt in delays:
            low, high = bounds.bounds(attempt - 1)
            assert low <= delay <= high, (delay, attempt)
        assert agent.alive()
    finally:
        agent.stop()
        hub.stop()
