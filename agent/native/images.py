"""Screenshot and preview images: region crop, PNG within budget, and their metadata.

Pure functions over a captured `Picture`; the encoding itself is the desktop core's
`to_png`, which shrinks the image until it fits. They run on the one image worker.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from tetherbed.agent.native.errors import Code, NativeError
from tetherbed.agent.native.frames import Picture
from tetherbed.agent.native.observations import Rect
from tetherbed.agent.native.protocol import Region

SCREENSHOT_MAX_BYTES = 2 * 1024 * 1024
PREVIEW_MAX_BYTES = 256 * 1024
SCREENSHOT_MAX_EDGE = 2048
PREVIEW_DEFAULT_EDGE = 960


@dataclass(frozen=True, slots=True)
class Encoded:
    png: bytes
    width: int
    height: int
    source_rect: Rect  # display-global


def region_rect(picture: Picture, region: Region | None) -> Rect:
    """The display-global rectangle a request asks for; the region is display-relative."""
    display = picture.rect
    if region is None:
        return display
    if region.x + region.width > display.width or region.y + region.height > display.height:
        raise NativeError(
            Code.INVALID_ARGUMENT,
            f"`region` must lie inside the {display.width}x{display.height} display",
        )
    return Rect(display.x + region.x, display.y + region.y, region.width, region.height)


def crop(frame: Any, rect: Rect) -> Any:
    """A Frame holding only `rect` (display-global) of `frame`; no copy when it is whole."""
    if (rect.x, rect.y, rect.width, rect.height) == (
        frame.left,
        frame.top,
        frame.width,
        frame.height,
    ):
        return frame
    stride = frame.width * 4
    left = (rect.x - frame.left) * 4
    top = rect.y - frame.top
    row = rect.width * 4
    data = frame.data
    rows = [
        data[(top + r) * stride + left : (top + r) * stride + left + row]
        for r in range(rect.height)
    ]
    return type(frame)(
        data=b"".join(rows),
        width=rect.width,
        height=rect.height,
        left=rect.x,
        top=rect.y,
        captured_at=frame.captured_at,
    )


def encode(picture: Picture, rect: Rect, *, max_edge: int, max_bytes: int) -> Encoded:
    """Crop and encode; runs on the image worker thread."""
    from tetherbed.agent.desktop.encode import to_png
    from tetherbed.agent.desktop.errors import ImageTooLarge

    try:
        image = to_png(crop(picture.frame, rect), max_bytes=max_bytes, max_edge=max_edge)
    except ImageTooLarge as exc:
        raise NativeError(Code.IMAGE_TOO_LARGE, str(exc)) from None
    if len(image.data) > max_bytes:
        raise NativeError(Code.IMAGE_TOO_LARGE, "the PNG does not fit its byte limit")
    return Encoded(image.data, image.width, image.height, rect)


def metadata(
    picture: Picture, encoded: Encoded, *, display_index: int, age_s: float
) -> dict[str, Any]:
    """The spec's metadata; `source_rect` is relative to the display, like `region`."""
    display = picture.rect
    rect = encoded.source_rect
    return {
        "generation": picture.generation,
        "geometry_epoch": picture.geometry_epoch,
        "frame_id": picture.frame_id,
        "display_index": display_index,
        "source_size": {"width": display.width, "height": display.height},
        "source_rect": {
            "x": rect.x - display.x,
            "y": rect.y - display.y,
            "width": rect.width,
            "height": rect.height,
        },
        "image_size": {"width": encoded.width, "height": encoded.height},
        "frame_age_ms": int(age_s * 1000),
    }


def image_result(encoded: Encoded, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "mime_type": "image/png",
        "data": base64.b64encode(encoded.png).decode("ascii"),
        "metadata": meta,
    }
