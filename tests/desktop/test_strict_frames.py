"""Every computer-use frame the agent can produce passes the strict schema of the spec.

The data-plane frames without a desktop are in tests/unit/agent/
test_strict_frames.py; here the agent runtime drives a real Xvfb display (and
the probe app's window) for a scripted platform, and every frame it sent is
checked against `wire/strict.py`, HELLO with its `computer_use_features` too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.agent.platform_double import Platform
from tests.unit.agent.test_strict_frames import check_every_frame
from tetherbed.agent.config import AgentConfig
from tetherbed.agent.desktop.xvfb import XvfbDisplay
from tetherbed.wire.messages import MessageType as T

from .conftest import ProbeApp

pytestmark = pytest.mark.xvfb

FRAMES = {
    T.HELLO,
    T.STATUS,
    T.ERROR,
    T.ACK,
    T.SCREENSHOT_RESPONSE,
    T.CURSOR_POSITION_RESPONSE,
    T.DISPLAY_INFO_RESPONSE,
    T.WINDOW_LIST_RESPONSE,
    T.APP_LIST_RESPONSE,
    T.CLIPBOARD_READ_RESPONSE,
    T.PERMISSIONS_CHECK_RESPONSE,
}


async def test_every_computer_use_frame_is_strict(
    xvfb: XvfbDisplay, probe_app: ProbeApp, tmp_path: Path
) -> None:
    root = Path(os.path.realpath(tmp_path)) / "root"
    root.mkdir()
    config = AgentConfig(
        hub_url="ws://hub",
        token="t",
        root=str(root),
        session_id="s1",
        machine_id="m1",
        display=xvfb.name,
        clipboard_read_own=True,
        state_dir=str(tmp_path / "state"),
    )
    async with Platform.serve(config) as platform:
        hello = await platform.wire.wait_for(lambda f: f["type"] == "HELLO")
        assert "computer_use" in hello["payload"]["capabilities"]
        assert "screenshot" in hello["payload"]["computer_use_features"]

        async def expect(kind: str, payload: dict, answer: str, code: str | None = None) -> dict:
            got = await platform.call(kind, payload)
            assert got["type"] == answer, (kind, payload, got)
            if code is not None:
                assert got["payload"]["code"] == code, got
            return got

        await expect(
            "SCREENSHOT_REQUEST",
            {
                "monitor": 0,
                "quality": 75,
                "region": None,
                "window_id": None,
                "format": "jpeg",
                "include_cursor": True,
            },
            "SCREENSHOT_RESPONSE",
        )
        await expect(
            "SCREENSHOT_REQUEST",
            {"region": [10, 10, 110, 60], "format": "png"},
            "SCREENSHOT_RESPONSE",
        )
        await expect("SCREENSHOT_REQUEST", {"region": [10, 10, 10, 20]}, "ERROR", "INTERNAL_ERROR")
        await expect(
            "SCREENSHOT_REQUEST", {"region": [0, 0, 5000, 20]}, "ERROR", "INPUT_OUT_OF_BOUNDS"
        )
        await expect("INPUT_ACTION", {"action": "mouse_move", "coordinate": [500, 300]}, "ACK")
        await expect(
            "INPUT_ACTION",
            {"action": "left_click", "coordinate": [99999, 1]},
            "ERROR",
            "INPUT_OUT_OF_BOUNDS",
        )
        await expect("INPUT_ACTION", {"action": "type", "text": "a\x07"}, "ERROR", "INTERNAL_ERROR")
        await expect("CURSOR_POSITION_REQUEST", {}, "CURSOR_POSITION_RESPONSE")
        await expect("DISPLAY_INFO_REQUEST", {}, "DISPLAY_INFO_RESPONSE")
        windows = await expect("WINDOW_LIST_REQUEST", {}, "WINDOW_LIST_RESPONSE")
        window_id = windows["payload"]["windows"][0]["window_id"]
        await expect("WINDOW_FOCUS", {"window_id": window_id}, "ACK")
        await expect("WINDOW_FOCUS", {"window_id": "win_unknown"}, "ERROR", "WINDOW_STALE")
        await expect("APP_LIST_REQUEST", {}, "APP_LIST_RESPONSE")
        await expect("APP_LAUNCH", {"app": "no-such-app"}, "ERROR", "DEPENDENCY_MISSING")
        await expect("CLIPBOARD_READ", {}, "ERROR", "CLIPBOARD_CONCEALED")
        await expect("CLIPBOARD_WRITE", {"text": "strict"}, "ACK")
        await expect("CLIPBOARD_READ", {}, "CLIPBOARD_READ_RESPONSE")
        await expect("PERMISSIONS_CHECK_REQUEST", {}, "PERMISSIONS_CHECK_RESPONSE")
        frames = list(platform.wire.frames)
    assert check_every_frame(frames) == FRAMES
