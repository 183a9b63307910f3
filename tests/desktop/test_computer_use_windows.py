"""WINDOW_LIST / WINDOW_FOCUS / APP_LIST / APP_LAUNCH: minted ids, WINDOW_STALE, launching."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from Xlib import X

from tests.desktop.conftest import ProbeApp, start_probe_app
from tetherbed.agent.computer_use.service import ComputerUse
from tetherbed.agent.desktop.apps import AppEntry
from tetherbed.agent.desktop.xdisplay import open_display
from tetherbed.agent.desktop.xvfb import XvfbDisplay
from tetherbed.runtime.clock import SystemClock
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import (
    Ack,
    AppLaunch,
    Empty,
    MessageType,
    ScreenshotRequest,
    WindowDescription,
    WindowFocus,
)

pytestmark = pytest.mark.xvfb


class ScratchWindow:
    """A plain X window created by the test, so that it can vanish on cue."""

    def __init__(self, display: str, title: str) -> None:
        self._x = open_display(display)
        root = self._x.screen().root
        self.window = root.create_window(1200, 100, 200, 150, 0, X.CopyFromParent)
        self.window.set_wm_name(title)
        self.window.set_wm_class("scratch", "Scratch")
        self.window.map()
        self._x.sync()

    def destroy(self) -> None:
        self.window.destroy()
        self._x.sync()

    def close(self) -> None:
        self._x.close()


@pytest.fixture
def scratch(xvfb: XvfbDisplay) -> Iterator[ScratchWindow]:
    window = ScratchWindow(xvfb.name, "scratch window")
    yield window
    window.close()


async def windows(cu: ComputerUse) -> list[WindowDescription]:
    kind, response = await cu.run(MessageType.WINDOW_LIST_REQUEST, Empty())
    assert kind is MessageType.WINDOW_LIST_RESPONSE
    return response.windows  # type: ignore[attr-defined]


def by_title(listing: list[WindowDescription], title: str) -> WindowDescription:
    [found] = [w for w in listing if w.title == title]
    return found


async def test_lists_the_probe_app(computer_use: ComputerUse, probe_app: ProbeApp) -> None:
    probe = by_title(await windows(computer_use), "Tetherbed Probe")
    x, y, w, h = probe_app.rect("window")
    assert probe.window_id.startswith("win_")
    assert probe.pid == probe_app.proc.pid  # from X-Resource: Tk sets no _NET_WM_PID
    assert probe.app == "Tetherbedprobe"
    assert probe.bounds == [x, y, x + w, y + h]


async def test_ids_are_stable_while_a_window_lives(
    computer_use: ComputerUse, probe_app: ProbeApp
) -> None:
    first = {w.title: w.window_id for w in await windows(computer_use)}
    second = {w.title: w.window_id for w in await windows(computer_use)}
    assert first == second
    assert len(set(first.values())) == len(first)


async def test_a_closed_window_is_stale_forever(
    computer_use: ComputerUse, scratch: ScratchWindow
) -> None:
    window_id = by_title(await windows(computer_use), "scratch window").window_id
    assert await computer_use.run(MessageType.WINDOW_FOCUS, WindowFocus(window_id=window_id)) == (
        MessageType.ACK,
        Ack(ok=True),
    )
    scratch.destroy()
    for request in (
        (MessageType.WINDOW_FOCUS, WindowFocus(window_id=window_id)),
        (MessageType.SCREENSHOT_REQUEST, ScreenshotRequest(window_id=window_id)),
    ):
        with pytest.raises(ProtocolError) as caught:
            await computer_use.run(*request)
        assert caught.value.code == "WINDOW_STALE"
        assert caught.value.details == {"window_id": window_id}
    assert window_id not in {w.window_id for w in await windows(computer_use)}


async def test_a_new_window_never_reuses_an_id(
    xvfb: XvfbDisplay, computer_use: ComputerUse
) -> None:
    seen: set[str] = set()
    for round_ in range(3):
        window = ScratchWindow(xvfb.name, f"round {round_}")
        try:
            minted = by_title(await windows(computer_use), f"round {round_}").window_id
            assert minted not in seen
            seen.add(minted)
            window.destroy()
        finally:
            window.close()


async def test_focus_moves_the_input_focus(
    xvfb: XvfbDisplay, computer_use: ComputerUse, probe_app: ProbeApp, tmp_path: Path
) -> None:
    other = start_probe_app(
        xvfb.name, tmp_path / "other.jsonl", title="Other Probe", geometry="300x200+1000+600"
    )
    try:
        listing = await windows(computer_use)
        for title in ("Other Probe", "Tetherbed Probe"):
            window_id = by_title(listing, title).window_id
            await computer_use.run(MessageType.WINDOW_FOCUS, WindowFocus(window_id=window_id))
            focused = [w.title for w in await windows(computer_use) if w.focused]
            assert focused == [title]
    finally:
        other.stop()


async def test_unknown_window_id_is_stale(computer_use: ComputerUse) -> None:
    with pytest.raises(ProtocolError) as caught:
        await computer_use.run(MessageType.WINDOW_FOCUS, WindowFocus(window_id="win_unknown"))
    assert caught.value.code == "WINDOW_STALE"


async def test_app_list_and_launch(xvfb: XvfbDisplay, tmp_path: Path) -> None:
    events = tmp_path / "launched.jsonl"
    probe = AppEntry(
        name="Probe",
        app_id="tetherbed-probe",
        argv=(
            sys.executable,
            "-m",
            "tetherbed.simulator.peripherals.probe_app",
            "--title",
            "Launched Probe",
            "--geometry",
            "300x200+1400+700",
        ),
    )
    cu = ComputerUse(xvfb.name, clock=SystemClock(), apps=[probe], include_desktop_files=False)
    try:
        _, listing = await cu.run(MessageType.APP_LIST_REQUEST, Empty())
        assert [a.name for a in listing.apps] == ["Probe"]  # type: ignore[attr-defined]
        assert listing.apps[0].exec.endswith("300x200+1400+700")  # type: ignore[attr-defined]
        kind, ack = await cu.run(
            MessageType.APP_LAUNCH, AppLaunch(app="probe", args=["--events", str(events)])
        )
        assert kind is MessageType.ACK and isinstance(ack, Ack) and ack.pid
        from tetherbed.simulator.peripherals.probe_app import ProbeEvents

        ready = ProbeEvents(events).wait_for(lambda e: e["type"] == "ready", timeout=30)
        assert ready["pid"] == ack.pid
        launched = by_title(await windows(cu), "Launched Probe")
        assert launched.pid == ack.pid
        with pytest.raises(ProtocolError) as caught:
            await cu.run(MessageType.APP_LAUNCH, AppLaunch(app="rm -rf /"))
        assert caught.value.code == "DEPENDENCY_MISSING"
        assert caught.value.details == {"app": "rm -rf /", "available": ["Probe"]}
    finally:
        import os
        import signal

        if "ack" in locals() and getattr(ack, "pid", None):
            os.kill(ack.pid, signal.SIGTERM)
        await cu.close()
