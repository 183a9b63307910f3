"""Fixtures for the native adapter: an Xvfb display, a device registry, adapter processes.

Desktop tests are marked `xvfb`. A missing Xvfb makes them fail loudly (the desktop
core raises XvfbError); they are never skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.native.harness import NativeProcess
from tetherbed.agent.desktop.xvfb import XvfbDisplay
from tetherbed.agent.native.devices import register_device


@pytest.fixture(scope="module")
def xvfb() -> Iterator[XvfbDisplay]:
    with XvfbDisplay(1920, 1080, 24) as display:
        yield display


@pytest.fixture(scope="module")
def device(xvfb: XvfbDisplay, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    registry = tmp_path_factory.mktemp("registry") / "devices.json"
    device_id, password = register_device(registry, xvfb.name)
    return registry, device_id, password


@pytest.fixture
def start_native(
    device: tuple[Path, str, str], tmp_path: Path
) -> Iterator[Callable[..., NativeProcess]]:
    registry, _, default_password = device
    started: list[NativeProcess] = []

    def start(
        *args: str, password: str | None = None, use_default: bool = True, **kw: object
    ) -> NativeProcess:
        secret = password if password is not None else (default_password if use_default else None)
        process = NativeProcess(
            password=secret,
            registry=registry,
            args=list(args),
            stderr_path=tmp_path / f"native-{len(started)}.stderr",
            **kw,  # type: ignore[arg-type]
        )
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def connected(
    start_native: Callable[..., NativeProcess], device: tuple[Path, str, str]
) -> Callable[..., NativeProcess]:
    """Start an adapter, connect it to the test display and wait for `ready`."""
    _, device_id, _ = device

    def make(*args: str, mode: str = "control", **connect: object) -> NativeProcess:
        process = start_native(*args)
        result = process.result("connect", device=device_id, mode=mode, display=0, **connect)
        assert result["state"] in ("connecting", "ready")
        process.wait_ready()
        return process

    return make
