"""SCREENSHOT_REQUEST: capture, encode, size check on the raw bytes, then base64.

The raw image is checked against max_file_size_bytes before base64 (spec), and
also against what base64 can carry inside one 16 MiB frame, so an oversized
capture is FILE_TOO_LARGE instead of an envelope the relay would refuse.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

from tetherbed.agent.computer_use.bounds import (
    check_region,
    clip_to_screen,
    monitor_at,
    out_of_bounds,
)
from tetherbed.agent.config import Limits
from tetherbed.agent.desktop.capture import ALL_MONITORS, Monitor, bounding_box
from tetherbed.agent.desktop.encode import to_jpeg, to_png
from tetherbed.agent.desktop.session import DesktopSession
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.limits import ENVELOPE_HEADROOM_BYTES, FRAME_LIMIT_BYTES
from tetherbed.wire.messages import ScreenshotMeta, ScreenshotRequest, ScreenshotResponse

#: Largest raw image whose base64 still fits one frame with its envelope.
FRAME_SAFE_RAW_BYTES = (FRAME_LIMIT_BYTES - ENVELOPE_HEADROOM_BYTES) // 4 * 3

#: Resolves a minted window id to display-global (x, y, width, height); raises WINDOW_STALE.
WindowBounds = Callable[[str], tuple[int, int, int, int]]


def raw_image_limit(limits: Limits) -> int:
    return min(limits.max_file_size_bytes, FRAME_SAFE_RAW_BYTES)


def take_screenshot(
    request: ScreenshotRequest,
    session: DesktopSession,
    limits: Limits,
    window_bounds: WindowBounds,
) -> ScreenshotResponse:
    """Blocking: run it in a worker thread."""
    if request.region is not None and request.window_id is not None:
        raise ProtocolError(
            ExtensionCode.INVALID_MESSAGE, "region and window_id are mutually exclusive"
        )
    monitors = session.capture.monitors()
    area, display_id = _area(request, monitors, window_bounds)
    frame = session.capture.grab(region=area, cursor=request.include_cursor)
    if request.format == "png":
        image, mime = to_png(frame), "image/png"
    else:
        image, mime = to_jpeg(frame, request.quality), "image/jpeg"
    limit = raw_image_limit(limits)
    if len(image.data) > limit:
        raise ProtocolError(
            ErrorCode.FILE_TOO_LARGE,
            f"the {request.format} screenshot is {len(image.data)} bytes; the limit is {limit}",
            details={"size_bytes": len(image.data), "max_file_size_bytes": limit},
        )
    return ScreenshotResponse(
        image_base64=base64.b64encode(image.data).decode("ascii"),
        mime_type=mime,
        width=image.width,
        height=image.height,
        monitor=request.monitor,
        region=request.region,
        display_scale=1.0,
        logical_size=[image.width, image.height],
        meta=ScreenshotMeta(origin=[frame.left, frame.top], display_id=display_id),
    )


def _area(
    request: ScreenshotRequest, monitors: list[Monitor], window_bounds: WindowBounds
) -> tuple[tuple[int, int, int, int], int]:
    """The display-global (x, y, w, h) to grab, and the display id to report."""
    if request.region is not None:
        area = check_region(monitors, request.region)
        return area, _display_of(monitors, area)
    if request.window_id is not None:
        bounds = window_bounds(request.window_id)
        area = clip_to_screen(monitors, bounds)
        if area is None:
            raise out_of_bounds(
                f"window {request.window_id} is entirely off screen",
                monitors,
                window_id=request.window_id,
            )
        return area, _display_of(monitors, area)
    if request.monitor == ALL_MONITORS:
        return bounding_box(monitors), ALL_MONITORS
    if not 0 <= request.monitor < len(monitors):
        raise out_of_bounds(
            f"no monitor {request.monitor}; this display has {len(monitors)}",
            monitors,
            monitor=request.monitor,
        )
    m = monitors[request.monitor]
    return (m.left, m.top, m.width, m.height), m.index


def _display_of(monitors: list[Monitor], area: tuple[int, int, int, int]) -> int:
    found = monitor_at(monitors, area[0], area[1])
    return found.index if found is not None else 0
