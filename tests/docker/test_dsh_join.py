"""The dsh-computers one-line installer for real: `curl … | sh` inside a machine
container of the Docker bed, against the hub container.

The machine runs Debian's own /usr/bin/python3 (PATH without the image's
Tetherbed venv), so what runs is the agent.pyz that join.sh downloaded from
the hub — nothing installed beforehand. The container has no systemd, so the
installer takes the spec's fallback (a nohup'd `run`).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.docker.conftest import Stack
from tetherbed.client.dsh import ComputerSettings, ComputerTools

pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("docker"), pytest.mark.timeout(1800)]

SYSTEM_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


async def _online(settings: ComputerSettings, name: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for computer in (await settings.state())["computers"]:
            if computer["name"] == name and computer["online"]:
                return computer
        await asyncio.sleep(0.2)
    raise AssertionError(f"{name} did not come online within {timeout} s")


async def test_curl_join_sh_pipe_sh_enrolls_a_machine_and_it_comes_online(stack: Stack) -> None:
    async with ComputerSettings(stack.hub_http, stack.client_token) as settings:
        created = await settings.create_key("linux")
        # The hub's configured public URL, not the address this test used.
        assert created["serverUrl"] == "http://hub:8765"
        command = created["command"]
        assert command.startswith("curl -fsSL 'http://hub:8765/api/dsh-computers/join.sh?key=")
        started = time.monotonic()
        joined = await asyncio.to_thread(
            stack.run,
            "exec",
            "-T",
            "machine-1",
            "env",
            SYSTEM_PATH,
            "sh",
            "-c",
            command,
            timeout=180,
        )
        assert joined.returncode == 0, joined.stdout + joined.stderr
        assert "This computer is connected to http://hub:8765" in joined.stdout
        assert "started in the background with nohup" in joined.stdout
        computer = await _online(settings, "machine-1")
        print(f"join.sh: machine-1 online {time.monotonic() - started:.1f} s after the command")
        status = (await settings.key_status(created["key"]))["status"]
        assert status == "connected"
        assert computer["agentVersion"].startswith("1.3.0+tetherbed.")

    # the agent is the downloaded file, on the system's Python
    ps = stack.run("exec", "-T", "machine-1", "ps", "-eo", "args")
    agents = [line for line in ps.stdout.splitlines() if "agent.pyz run" in line]
    assert agents == [
        "/usr/bin/python3 /root/.dsh-computers/agent.pyz run --log-file "
        "/root/.dsh-computers/agent.log"
    ], ps.stdout

    async with ComputerTools(stack.hub_http, stack.client_token, timeout=60) as tools:
        result = await tools.exec(
            "machine-1", "hostname; python3 -c 'import sys; print(sys.prefix)'"
        )
    assert result.value["stdout"] == "machine-1\n/usr\n"
