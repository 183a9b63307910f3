"""The compose stack end to end: a hub and two machines, driven through the hub."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request

import pytest

from tests.docker.conftest import Stack
from tetherbed.client.sandbox import HubSandbox
from tetherbed.wire.messages import MessageType

# One xdist worker runs them all: they share one stack (and one image build).
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("docker"), pytest.mark.timeout(1800)]

SERIAL = "python -m tetherbed.simulator.peripherals.serial_device"


async def shell(stack: Stack, session_id: str, command: str) -> str:
    async with HubSandbox.connect(
        stack.hub_url, session_id, stack.client_token, request_timeout=60
    ) as sandbox:
        result = await sandbox.commands.run(command, timeout=30)
    return result.stdout


def test_the_stack_is_healthy_within_a_minute(stack: Stack) -> None:
    assert stack.healthy_after < 60, f"healthy only after {stack.healthy_after:.1f} s"


async def test_a_shell_command_runs_on_machine_2_through_the_hub(stack: Stack) -> None:
    out = await shell(stack, "session-2", "echo hello from $(hostname) in $(pwd)")
    assert out == "hello from machine-2 in /workspace\n"


async def test_a_screenshot_of_machine_2_through_the_hub(stack: Stack) -> None:
    async with HubSandbox.connect(
        stack.hub_url, "session-2", stack.client_token, request_timeout=60
    ) as sandbox:
        shot = await sandbox.request(MessageType.SCREENSHOT_REQUEST, {"format": "png"})
    image = base64.b64decode(shot.payload.image_base64)
    assert image.startswith(b"\x89PNG\r\n\x1a\n")
    assert (shot.payload.width, shot.payload.height) == (1280, 800)  # machine-2's Xvfb


@pytest.mark.parametrize("n", [1, 2])
async def test_each_machine_has_its_own_hostname_display_and_serial_ports(
    stack: Stack, n: int
) -> None:
    out = await shell(
        stack,
        f"session-{n}",
        # The agent hides its own environment from commands (no $DISPLAY), so
        # look for the display's socket.
        "hostname; ls /tmp/.X11-unix; ls /dev/ttyTB*; "
        f"{SERIAL} ask /dev/ttyTB0 PING 'ID?'; {SERIAL} ask /dev/ttyTB1 'ID?' 'ECHO ok'; "
        "cat /run/tetherbed/serial/ports.json",
    )
    lines = out.splitlines()
    assert lines[:9] == [
        f"machine-{n}",
        f"X{n}",
        "/dev/ttyTB0",
        "/dev/ttyTB1",
        "PONG",
        f"tetherbed,sim-arduino,machine-{n}-ttyTB0,1.0.0",
        f"tetherbed,sim-arduino,machine-{n}-ttyTB1,1.0.0",
        "ok",
        lines[8],
    ]
    ports = json.loads(lines[8])
    assert [(p["type"], p["port"]) for p in ports] == [
        ("serial", "/dev/ttyTB0"),
        ("serial", "/dev/ttyTB1"),
    ]
    assert all(f"machine-{n}" in p["desc"] for p in ports)


async def test_pid_1_is_tini_and_orphans_are_reaped(stack: Stack) -> None:
    # Orphans of a command (here: backgrounded sleeps) are re-parented to
    # PID 1, which must reap them or they pile up as zombies.
    await shell(stack, "session-1", "for i in 1 2 3; do (sleep 0.2 &); done")
    await asyncio.sleep(1.0)
    out = await shell(stack, "session-1", "cat /proc/1/comm; ps -eo stat= | grep -c '^Z' || true")
    assert out.split() == ["tini", "0"]


def test_both_machines_keep_a_control_connection(stack: Stack) -> None:
    request = urllib.request.Request(
        f"{stack.hub_http}/v1/machines",
        headers={"Authorization": f"Bearer {stack.client_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        machines = json.load(response)["machines"]
    assert sorted(m["machine_id"] for m in machines) == ["machine-1", "machine-2"]


def test_sessions_are_held_by_their_own_machines(stack: Stack) -> None:
    request = urllib.request.Request(
        f"{stack.hub_http}/v1/sessions",
        headers={"Authorization": f"Bearer {stack.client_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        sessions = {s["session_id"]: s for s in json.load(response)["sessions"]}
    for n in (1, 2):
        assert sessions[f"session-{n}"]["connected"] is True
        assert sessions[f"session-{n}"]["machine_id"] == f"machine-{n}"


async def test_serial_io_through_the_hub_to_a_simulated_device(stack: Stack) -> None:
    """The serial extension on the Docker bed: the platform opens machine-1's
    /dev/ttyTB0 through the hub, writes to the simulated device and reads its
    replies; a wrong baud rate on ttyTB1 (its device runs at the default) still
    talks, unknown ports are typed errors."""
    async with HubSandbox.connect(
        stack.hub_url, "session-1", stack.client_token, request_timeout=60
    ) as sandbox:
        opened = await sandbox.request("SERIAL_OPEN", {"port": "/dev/ttyTB0", "baud_rate": 9600})
        assert opened.type == "SERIAL_OPENED" and opened.payload["port"] == "/dev/ttyTB0"
        written = await sandbox.request(
            "SERIAL_WRITE", {"port": "/dev/ttyTB0", "data": "PING\nID?\n"}
        )
        assert written.payload["bytes_written"] == 9
        read = {"port": "/dev/ttyTB0", "until": "\r\n", "timeout_ms": 5000}
        assert (await sandbox.request("SERIAL_READ", read)).payload["data"] == "PONG\r\n"
        ident = (await sandbox.request("SERIAL_READ", read)).payload["data"]
        assert ident == "tetherbed,sim-arduino,machine-1-ttyTB0,1.0.0\r\n"
        closed = await sandbox.request("SERIAL_CLOSE", {"port": "/dev/ttyTB0"})
        assert closed.type == "ACK"
        with pytest.raises(Exception) as unknown:
            await sandbox.request("SERIAL_OPEN", {"port": "/dev/ttyS0"})
        assert getattr(unknown.value, "code", None) == "SERIAL_PORT_UNKNOWN"


async def test_the_local_llm_container_serves_machine_2_through_the_hub(stack: Stack) -> None:
    async with HubSandbox.connect(
        stack.hub_url, "session-2", stack.client_token, request_timeout=60
    ) as sandbox:
        payload = {
            "model": "llama3.2:3b",
            "messages": [{"role": "user", "content": "echo: hello from the bed"}],
        }
        frames = []
        async with sandbox.stream("LOCAL_LLM_COMPLETION", payload) as stream:
            async for frame in stream:
                frames.append(frame)
    chunks, final = frames[:-1], frames[-1]
    assert final.type == "LOCAL_LLM_COMPLETION_RESPONSE"
    assert final.payload.content == "hello from the bed"
    assert [c.payload.finish_reason for c in chunks] == [None] * 4 + ["stop"]
