"""Fixtures for the desktop core and computer use: a real Xvfb and the probe app.

Each test module gets its own Xvfb (and probe app), started here and stopped
by PID. Nothing is skipped: without Xvfb these tests fail with XvfbError's
message, because `make test` installs it. Tests wait for the probe app's
reports with deadlines instead of sleeping.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.desktop.xvfb import XvfbDisplay, XvfbError
from tetherbed.simulator.peripherals.probe_app import ProbeEvents

#: Seconds a probe app may take to show its window on a loaded machine.
PROBE_START_TIMEOUT_S = 30.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep each module on one xdist worker: its tests share one display and app."""
    here = Path(__file__).parent
    for item in items:
        path = Path(str(item.fspath))
        if here in path.parents:
            item.add_marker(pytest.mark.xdist_group(f"desktop-{path.stem}"))


@pytest.fixture(scope="module")
def xvfb() -> Iterator[XvfbDisplay]:
    display = XvfbDisplay(1920, 1080, 24)
    try:
        display.start()
    except XvfbError as exc:
        pytest.fail(f"cannot start Xvfb for the desktop tests: {exc}", pytrace=False)
    try:
        yield display
    finally:
        display.stop()


@dataclass
class ProbeApp:
    """A running probe app: its process, its event reader and the rects it reported."""

    proc: subprocess.Popen[bytes]
    events: ProbeEvents
    ready: dict[str, Any]

    def rect(self, name: str) -> tuple[int, int, int, int]:
        x, y, w, h = self.ready[name]
        return x, y, w, h

    def center(self, name: str) -> tuple[int, int]:
        x, y, w, h = self.rect(name)
        return x + w // 2, y + h // 2

    @property
    def window_xid(self) -> int:
        return int(self.ready["window_id"], 16)

    def stop(self) -> None:
        stop_process(self.proc)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM by PID, then SIGKILL."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)


def start_probe_app(
    display: str, events_file: Path, *, title: str = "Tetherbed Probe", geometry: str | None = None
) -> ProbeApp:
    args = [
        sys.executable,
        "-m",
        "tetherbed.simulator.peripherals.probe_app",
        "--display",
        display,
        "--events",
        str(events_file),
        "--title",
        title,
    ]
    if geometry:
        args += ["--geometry", geometry]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, start_new_session=True)
    events = ProbeEvents(events_file)
    try:
        ready = events.wait_for(lambda e: e["type"] == "ready", timeout=PROBE_START_TIMEOUT_S)
    except TimeoutError:
        stop_process(proc)
        pytest.fail(f"the probe app did not show its window on {display}", pytrace=False)
    return ProbeApp(proc, events, ready)


@pytest.fixture(scope="module")
def probe_app(xvfb: XvfbDisplay, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeApp]:
    app = start_probe_app(xvfb.name, tmp_path_factory.mktemp("probe") / "events.jsonl")
    try:
        yield app
    finally:
        app.stop()


@pytest.fixture
async def computer_use(xvfb: XvfbDisplay) -> AsyncIterator[Any]:
    """A ComputerUse on the module's display, with every feature and default limits."""
    from tetherbed.agent.computer_use.service import ComputerUse
    from tetherbed.runtime.clock import SystemClock

    cu = ComputerUse(xvfb.name, clock=SystemClock(), include_desktop_files=False)
    try:
        yield cu
    finally:
        await cu.close()
