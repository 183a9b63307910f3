"""A connection killed under a request: EXECUTE_COMMAND is never re-run, FILE_READ is retried.

The agent reaches the hub through the fault proxy, so the test can cut its
connection (RST) or drop one message without touching either process.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from tetherbed.client.sandbox import HubSandbox, OutcomeUnknownError
from tetherbed.launch import start_agent, start_hub
from tetherbed.simulator.proxy import ProxyRegistry

pytestmark = pytest.mark.e2e


async def _wait_connections(agent, count: int) -> None:
    """Until the agent's log shows `count` completed handshakes."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if agent.log().count("connected to ws://") >= count:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"agent did not reach {count} connections:\n{agent.log()}")


async def test_killed_connection_never_reruns_a_command_but_retries_a_read(
    tmp_path: Path,
) -> None:
    hub = start_hub(tmp_path / "hub", args=["--retry-window", "30"])
    registry = ProxyRegistry(random.Random(1))
    hub_port = hub.url.rsplit(":", 1)[1]
    proxy = await registry.create("agent-link", "127.0.0.1:0", f"127.0.0.1:{hub_port}")
    agent_token, client_token = hub.token("u", "agent"), hub.token("u", "client")
    root = tmp_path / "root"
    root.mkdir()
    (root / "data.txt").write_text("the same bytes\n")
    agent = start_agent(
        f"ws://{proxy.listen}", agent_token, root, "drops", machine_id="m", enable_shell=True
    )
    try:
        await asyncio.to_thread(hub.wait_connected, client_token, "drops")
        async with HubSandbox.connect(hub.url, "drops", client_token) as sb:
            # 1. A command in flight when the connection dies: OUTCOME_UNKNOWN, run once.
            command = asyncio.ensure_future(sb.commands.run("echo ran >> marker; sleep 2"))
            while not (root / "marker").exists():
                await asyncio.sleep(0.02)
            assert proxy.reset_connections() >= 1
            with pytest.raises(OutcomeUnknownError):
                await asyncio.wait_for(command, 10)
            await _wait_connections(agent, 2)
            await asyncio.sleep(3.0)  # time for any (wrong) re-execution to happen
            assert (root / "marker").read_text() == "ran\n"

            # 2. A read whose answer is lost with the connection: retried transparently.
            proxy.add_rule("drop", stream="upstream", type="FILE_CONTENTS", count=1)
            reading = asyncio.ensure_future(sb.files.read("data.txt"))
            await asyncio.sleep(0.5)  # the answer was dropped; the read is in flight
            assert not reading.done()
            proxy.reset_connections()
            assert await asyncio.wait_for(reading, 30) == "the same bytes\n"
    finally:
        agent.stop()
        hub.stop()
        await registry.close()
    assert "reconnecting in" in agent.log()
