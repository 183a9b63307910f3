"""Display-global geometry checks for computer use, with the spec's error details.

Every coordinate on the wire is a display-global, unscaled, top-left-origin
pixel. A point must fall inside some monitor; a screenshot region must lie
inside the screen's bounding box. Rects on the wire are [x1, y1, x2, y2] with
x2/y2 exclusive, the same shape as SCREENSHOT_REQUEST.region.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tetherbed.agent.desktop.capture import Monitor, bounding_box
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError


def rect_of(monitor: Monitor) -> list[int]:
    return [monitor.left, monitor.top, monitor.right, monitor.bottom]


def displays_detail(monitors: Sequence[Monitor]) -> list[dict[str, Any]]:
    """The valid display rects, as INPUT_OUT_OF_BOUNDS details carry them."""
    return [{"index": m.index, "primary": m.primary, "rect": rect_of(m)} for m in monitors]


def out_of_bounds(message: str, monitors: Sequence[Monitor], **details: Any) -> ProtocolError:
    return ProtocolError(
        ErrorCode.INPUT_OUT_OF_BOUNDS,
        message,
        details={**details, "displays": displays_detail(monitors)},
    )


def monitor_at(monitors: Sequence[Monitor], x: int, y: int) -> Monitor | None:
    return next((m for m in monitors if m.contains(x, y)), None)


def check_point(monitors: Sequence[Monitor], point: Sequence[int]) -> tuple[int, int]:
    """(x, y) if inside some monitor, else INPUT_OUT_OF_BOUNDS."""
    x, y = int(point[0]), int(point[1])
    if monitor_at(monitors, x, y) is None:
        raise out_of_bounds(f"({x}, {y}) is outside every display", monitors, coordinate=[x, y])
    return x, y


def check_region(monitors: Sequence[Monitor], region: Sequence[int]) -> tuple[int, int, int, int]:
    """[x1, y1, x2, y2] -> (x, y, width, height), inside the screen's bounding box."""
    x1, y1, x2, y2 = (int(v) for v in region)
    if x2 <= x1 or y2 <= y1:
        raise ProtocolError(
            ExtensionCode.INVALID_MESSAGE,
            f"region {list(region)} is empty: it must be [x1, y1, x2, y2] with x2 > x1, y2 > y1",
        )
    left, top, width, height = bounding_box(list(monitors))
    if x1 < left or y1 < top or x2 > left + width or y2 > top + height:
        raise out_of_bounds(
            f"region {[x1, y1, x2, y2]} reaches outside the screen",
            monitors,
            region=[x1, y1, x2, y2],
        )
    return x1, y1, x2 - x1, y2 - y1


def clip_to_screen(
    monitors: Sequence[Monitor], rect: tuple[int, int, int, int]
) -> tuple[int, int, int, int] | None:
    """(x, y, w, h) clipped to the screen's bounding box; None if nothing is left."""
    left, top, width, height = bounding_box(list(monitors))
    x, y, w, h = rect
    x1, y1 = max(x, left), max(y, top)
    x2, y2 = min(x + w, left + width), min(y + h, top + height)
    if x2 <= x1 or y2 <= y1:
        return None
    return x1, y1, x2 - x1, y2 - y1
