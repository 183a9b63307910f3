"""Computer use end to end: a real hub and agent process driving a real Xvfb display."""

from __future__ import annotations

import asyncio
import base64
import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from tetherbed.agent.desktop.xvfb import XvfbDisplay
from tetherbed.client.sandbox import HubError, HubSandbox
from tetherbed.launch import HubProcess, ManagedProcess, start_agent, start_hub
from tetherbed.wire.messages import MessageType

from .conftest import ProbeApp

pytestmark = pytest.mark.xvfb


@pytest.fixture(scope="module")
def desktop_stack(
    xvfb: XvfbDisplay, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[HubProcess, ManagedProcess, str]]:
    base = tmp_path_factory.mktemp("hub-desktop")
    hub = start_hub(base / "state")
    root = base / "root"
    root.mkdir()
    client_token = hub.token("u", "client")
    os.environ["DISPLAY"] = xvfb.name  # inherited by the agent process
    try:
        agent = start_agent(
            hub.url,
            hub.token("u", "agent"),
            root,
            "desk",
            machine_id="desk-1",
            args=["--serial-port", "/dev/ttyTB0=Simulated Arduino"],
        )
    finally:
        del os.environ["DISPLAY"]
    try:
        hub.wait_connected(client_token, "desk")
        yield hub, agent, client_token
    finally:
        agent.stop()
        hub.stop()


async def test_screenshot_and_click_through_hub_and_agent(
    desktop_stack: tuple[HubProcess, ManagedProcess, str], probe_app: ProbeApp
) -> None:
    hub, _, token = desktop_stack
    async with HubSandbox.connect(hub.url, "desk", token, request_timeout=30) as sb:
        shot = await sb.request(MessageType.SCREENSHOT_REQUEST, {"format": "png", "monitor": 0})
        image = Image.open(io.BytesIO(base64.b64decode(shot.payload.image_base64)))
        assert image.size == (1920, 1080)
        mark = probe_app.events.mark()
        x, y = probe_app.center("button")
        await sb.request(MessageType.INPUT_ACTION, {"action": "left_click", "coordinate": [x, y]})
        event = await asyncio.to_thread(
            probe_app.events.wait_for,
            lambda e: e["type"] == "button_command",
            timeout=10,
            since=mark,
        )
        assert event["type"] == "button_command"
        with pytest.raises(HubError) as outside:
            await sb.request(
                MessageType.INPUT_ACTION, {"action": "left_click", "coordinate": [5000, 5]}
            )
        assert outside.value.code == "INPUT_OUT_OF_BOUNDS"


def test_hello_advertised_computer_use_and_the_serial_port(
    desktop_stack: tuple[HubProcess, ManagedProcess, str], tmp_path: Path
) -> None:
    _, agent, _ = desktop_stack
    granted = next(line for line in agent.log_tail if "granted" in line)
    assert "computer_use" in granted and "hardware_serial" in granted
