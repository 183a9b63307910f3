"""ScreenCapture on a real display: monitors, regions, pixels where the probe app drew them."""

from __future__ import annotations

import threading

import pytest

from tests.desktop.conftest import ProbeApp
from tetherbed.agent.desktop.capture import ALL_MONITORS, CaptureError, Frame, ScreenCapture
from tetherbed.agent.desktop.xvfb import XvfbDisplay

pytestmark = pytest.mark.xvfb


def pixel(frame: Frame, x: int, y: int) -> tuple[int, int, int]:
    """(r, g, b) at display-global (x, y)."""
    at = ((y - frame.top) * frame.width + (x - frame.left)) * 4
    b, g, r = frame.data[at : at + 3]
    return r, g, b


def test_one_primary_monitor(xvfb: XvfbDisplay) -> None:
    with ScreenCapture(xvfb.name) as capture:
        [monitor] = capture.monitors()
    assert (monitor.index, monitor.primary) == (0, True)
    assert (monitor.left, monitor.top, monitor.width, monitor.height) == (0, 0, 1920, 1080)


def test_full_grab_is_tightly_packed_bgra(xvfb: XvfbDisplay) -> None:
    with ScreenCapture(xvfb.name) as capture:
        frame = capture.grab()
        stitched = capture.grab(ALL_MONITORS)
    assert (frame.width, frame.height, frame.left, frame.top) == (1920, 1080, 0, 0)
    assert len(frame.data) == 1920 * 1080 * 4 == frame.stride * frame.height
    assert (stitched.width, stitched.height) == (1920, 1080)


def test_region_is_display_global(xvfb: XvfbDisplay, probe_app: ProbeApp) -> None:
    x, y, _, _ = probe_app.rect("canvas")  # white canvas
    with ScreenCapture(xvfb.name) as capture:
        frame = capture.grab(region=(x + 10, y + 20, 50, 30))
        outside = capture.grab(region=(0, 0, 20, 20))  # bare root window: black
    assert (frame.left, frame.top, frame.width, frame.height) == (x + 10, y + 20, 50, 30)
    assert pixel(frame, x + 30, y + 40) == (255, 255, 255)
    assert pixel(outside, 5, 5) == (0, 0, 0)


def test_bad_monitor_and_empty_region_are_errors(xvfb: XvfbDisplay) -> None:
    with ScreenCapture(xvfb.name) as capture:
        with pytest.raises(CaptureError, match="no monitor 2"):
            capture.grab(2)
        with pytest.raises(CaptureError, match="empty region"):
            capture.grab(region=(0, 0, 0, 10))


def test_grabs_from_many_threads(xvfb: XvfbDisplay) -> None:
    """mss instances are per thread; the capture object is shared."""
    sizes: list[int] = []
    errors: list[BaseException] = []
    with ScreenCapture(xvfb.name) as capture:

        def work() -> None:
            try:
                for _ in range(5):
                    sizes.append(len(capture.grab(region=(0, 0, 64, 64)).data))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert not errors
    assert sizes == [64 * 64 * 4] * 20


def test_cursor_overlay_changes_pixels_under_the_pointer(
    xvfb: XvfbDisplay, probe_app: ProbeApp
) -> None:
    from tetherbed.agent.desktop.input import InputDriver

    x, y = probe_app.center("canvas")
    with InputDriver(xvfb.name) as driver, ScreenCapture(xvfb.name) as capture:
        driver.move(x, y)
        plain = capture.grab(region=(x - 16, y - 16, 32, 32))
        with_cursor = capture.grab(region=(x - 16, y - 16, 32, 32), cursor=True)
    assert plain.data != with_cursor.data
