"""SCREENSHOT_REQUEST through ComputerUse: formats, regions, windows, limits, errors."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from tests.desktop.conftest import ProbeApp
from tetherbed.agent.computer_use.screenshot import FRAME_SAFE_RAW_BYTES
from tetherbed.agent.computer_use.service import ComputerUse
from tetherbed.agent.config import Limits
from tetherbed.agent.desktop.xvfb import XvfbDisplay
from tetherbed.runtime.clock import SystemClock
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Empty, MessageType, ScreenshotRequest, ScreenshotResponse

pytestmark = pytest.mark.xvfb

ROOT_RECT = {"index": 0, "primary": True, "rect": [0, 0, 1920, 1080]}


async def shoot(cu: ComputerUse, **fields: object) -> ScreenshotResponse:
    kind, response = await cu.run(MessageType.SCREENSHOT_REQUEST, ScreenshotRequest(**fields))
    assert kind is MessageType.SCREENSHOT_RESPONSE
    assert isinstance(response, ScreenshotResponse)
    return response


def decode(response: ScreenshotResponse) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(response.image_base64)))


async def test_default_is_a_full_jpeg(computer_use: ComputerUse, probe_app: ProbeApp) -> None:
    response = await shoot(computer_use)
    image = decode(response)
    assert (response.mime_type, image.format) == ("image/jpeg", "JPEG")
    assert (response.width, response.height) == image.size == (1920, 1080)
    assert response.logical_size == [1920, 1080] and response.display_scale == 1.0
    assert (response.monitor, response.region) == (0, None)
    assert (response.meta.origin, response.meta.display_id) == ([0, 0], 0)


async def test_region_png_is_exact(computer_use: ComputerUse, probe_app: ProbeApp) -> None:
    x, y, _, _ = probe_app.rect("canvas")
    region = [x + 10, y + 10, x + 110, y + 60]
    response = await shoot(computer_use, region=region, format="png", include_cursor=False)
    image = decode(response).convert("RGB")
    assert (response.mime_type, image.size) == ("image/png", (100, 50))
    assert response.region == region and response.meta.origin == [x + 10, y + 10]
    assert image.getpixel((50, 25)) == (255, 255, 255)  # the white canvas


async def test_quality_changes_the_size(computer_use: ComputerUse, probe_app: ProbeApp) -> None:
    low = await shoot(computer_use, quality=5)
    high = await shoot(computer_use, quality=95)
    assert len(low.image_base64) < len(high.image_base64)


async def test_window_capture(computer_use: ComputerUse, probe_app: ProbeApp) -> None:
    _, listing = await computer_use.run(MessageType.WINDOW_LIST_REQUEST, Empty())
    [probe] = [w for w in listing.windows if w.pid == probe_app.proc.pid]  # type: ignore[attr-defined]
    response = await shoot(computer_use, window_id=probe.window_id, format="png")
    x, y, w, h = probe_app.rect("window")
    assert (response.width, response.height) == (w, h)
    assert response.meta.origin == [x, y]


async def test_all_monitors(computer_use: ComputerUse) -> None:
    response = await shoot(computer_use, monitor=-1)
    assert (response.width, response.height, response.monitor) == (1920, 1080, -1)
    assert response.meta.display_id == -1


@pytest.mark.parametrize(
    ("fields", "code", "detail"),
    [
        ({"region": [0, 0, 1921, 10]}, "INPUT_OUT_OF_BOUNDS", {"region": [0, 0, 1921, 10]}),
        ({"region": [-5, 0, 10, 10]}, "INPUT_OUT_OF_BOUNDS", {"region": [-5, 0, 10, 10]}),
        ({"monitor": 1}, "INPUT_OUT_OF_BOUNDS", {"monitor": 1}),
        ({"region": [10, 10, 10, 20]}, "INVALID_MESSAGE", None),
        ({"region": [0, 0, 5, 5], "window_id": "win_x"}, "INVALID_MESSAGE", None),
        ({"window_id": "win_never-minted"}, "WINDOW_STALE", {"window_id": "win_never-minted"}),
    ],
)
async def test_bad_requests(
    computer_use: ComputerUse, fields: dict, code: str, detail: dict | None
) -> None:
    with pytest.raises(ProtocolError) as caught:
        await shoot(computer_use, **fields)
    assert caught.value.code == code
    if code == "INPUT_OUT_OF_BOUNDS":
        assert caught.value.details == {**(detail or {}), "displays": [ROOT_RECT]}
    elif detail:
        assert caught.value.details == detail


async def test_file_too_large_is_checked_on_raw_bytes(xvfb: XvfbDisplay) -> None:
    limits = Limits(max_file_size_bytes=20_000)
    cu = ComputerUse(xvfb.name, clock=SystemClock(), limits_provider=lambda: limits)
    try:
        small = await shoot(cu, region=[0, 0, 50, 50], format="png")
        assert len(base64.b64decode(small.image_base64)) <= 20_000
        with pytest.raises(ProtocolError) as caught:
            await shoot(cu, format="png", quality=100)
    finally:
        await cu.close()
    error = caught.value
    assert error.code == "FILE_TOO_LARGE"
    assert error.details is not None
    assert error.details["max_file_size_bytes"] == 20_000
    assert error.details["size_bytes"] > 20_000


def test_frame_limit_caps_the_raw_image() -> None:
    """base64 of the largest raw image still fits one 16 MiB frame with its envelope."""
    assert FRAME_SAFE_RAW_BYTES * 4 / 3 < 16 * 1024 * 1024 - 60_000


async def test_features_gate_regions(xvfb: XvfbDisplay) -> None:
    cu = ComputerUse(xvfb.name, clock=SystemClock(), features=["screenshot"])
    try:
        await shoot(cu, region=None)
        with pytest.raises(ProtocolError) as caught:
            await shoot(cu, region=[0, 0, 10, 10])
    finally:
        await cu.close()
    assert caught.value.code == "FEATURE_NOT_SUPPORTED"
    assert caught.value.details == {"feature": "screenshot.region"}
