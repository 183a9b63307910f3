"""XvfbDisplay: a free display number, a server that accepts clients, stop by PID."""

from __future__ import annotations

import os

import pytest

from tetherbed.agent.desktop.xdisplay import open_display
from tetherbed.agent.desktop.xvfb import XvfbDisplay, XvfbError

pytestmark = pytest.mark.xvfb


def test_starts_accepts_and_stops() -> None:
    with XvfbDisplay(640, 480, 24) as xvfb:
        assert xvfb.name.startswith(":")
        connection = open_display(xvfb.name)
        try:
            screen = connection.screen()
            assert (screen.width_in_pixels, screen.height_in_pixels) == (640, 480)
        finally:
            connection.close()
        pid = xvfb.pid
        assert pid is not None
    assert not xvfb.running()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_two_displays_get_different_numbers() -> None:
    with XvfbDisplay(320, 240) as a, XvfbDisplay(320, 240) as b:
        assert a.name != b.name


def test_missing_xvfb_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(XvfbError, match="Debian package `xvfb`"):
        XvfbDisplay().start()
