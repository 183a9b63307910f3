"""probe(): what a display lets the agent advertise; refused and missing displays."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest

from tetherbed.agent.computer_use.service import ALL_FEATURES, ComputerUse, probe
from tetherbed.agent.desktop.xvfb import XvfbDisplay
from tetherbed.runtime.clock import SystemClock
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import MessageType, ScreenshotRequest

pytestmark = pytest.mark.xvfb


def test_a_working_display(xvfb: XvfbDisplay) -> None:
    info = probe(xvfb.name)
    assert info is not None
    assert (info.display, info.screen_resolution, info.monitors) == (xvfb.name, [1920, 1080], 1)
    assert info.features == ALL_FEATURES


def test_no_display_means_no_computer_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    assert probe() is None
    assert probe(":4242") is None


def _xauthority(path: Path) -> None:
    """A cookie file for Xvfb -auth; the client below never gets the cookie."""

    def field(b: bytes) -> bytes:
        return struct.pack(">H", len(b)) + b

    host = socket.gethostname().encode()
    cookie = field(b"MIT-MAGIC-COOKIE-1") + field(os.urandom(16))
    path.write_bytes(struct.pack(">H", 256) + field(host) + field(b"") + cookie)


async def test_a_refusing_display_is_permission_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _xauthority(tmp_path / "server.auth")
    monkeypatch.setenv("XAUTHORITY", str(tmp_path / "none"))
    extra = ["-auth", str(tmp_path / "server.auth")]
    with XvfbDisplay(320, 240, access_control=True, extra_args=extra) as locked:
        assert probe(locked.name) is None
        cu = ComputerUse(locked.name, clock=SystemClock())
        try:
            with pytest.raises(ProtocolError) as caught:
                await cu.run(MessageType.SCREENSHOT_REQUEST, ScreenshotRequest())
        finally:
            await cu.close()
    assert caught.value.code == "PERMISSION_PENDING"


async def test_a_vanished_display_is_feature_not_supported() -> None:
    with XvfbDisplay(320, 240) as gone:
        cu = ComputerUse(gone.name, clock=SystemClock())
    try:
        with pytest.raises(ProtocolError) as caught:
            await cu.run(MessageType.SCREENSHOT_REQUEST, ScreenshotRequest())
    finally:
        await cu.close()
    assert caught.value.code == "FEATURE_NOT_SUPPORTED"
    assert caught.value.details == {"reason": "display_unavailable"}
