"""Encoding frames: PNG, JPEG, scaled copies, and NV12 for video encoders.

Frames are BGRA with the fourth byte as padding (X servers leave it 0), so
every conversion reads them as BGRX. Pillow does the still images; PyAV's
swscale does NV12 for video, without numpy.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tetherbed.agent.desktop.capture import Frame
from tetherbed.agent.desktop.errors import DependencyMissing, ImageTooLarge

if TYPE_CHECKING:
    from av import VideoFrame
    from PIL.Image import Image

#: Smallest edge `to_png` shrinks to before giving up on a byte budget.
MIN_EDGE = 16
#: zlib level for PNG: 1 is about twice as fast as the default 6 and, for
#: screen content, rarely more than a few times larger.
PNG_COMPRESS_LEVEL = 1


@dataclass(frozen=True, slots=True)
class EncodedImage:
    data: bytes
    width: int
    height: int


def _image_module() -> ModuleType:
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - the desktop extra installs it
        raise DependencyMissing("Pillow is not installed") from exc
    return Image


def _to_image(frame: Frame) -> Image:
    return _image_module().frombuffer(
        "RGB", (frame.width, frame.height), frame.data, "raw", "BGRX", frame.stride, 1
    )


def _fit(width: int, height: int, max_edge: int | None) -> tuple[int, int]:
    """The size that keeps the aspect ratio with the longer edge <= max_edge."""
    if max_edge is None or max(width, height) <= max_edge:
        return width, height
    scale = max_edge / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def _resized(image: Image, size: tuple[int, int]) -> Image:
    if image.size == size:
        return image
    return image.resize(size, _image_module().Resampling.BILINEAR, reducing_gap=2.0)


def scale_to(frame: Frame, max_edge: int) -> Frame:
    """A copy whose longer edge is at most `max_edge` (the frame itself if it fits).

    `left`/`top` stay the display-global origin of the captured area; the
    caller knows the scale from the size change.
    """
    size = _fit(frame.width, frame.height, max_edge)
    if size == (frame.width, frame.height):
        return frame
    image = _resized(_to_image(frame), size)
    return Frame(
        data=image.tobytes("raw", "BGRX"),
        width=size[0],
        height=size[1],
        left=frame.left,
        top=frame.top,
        captured_at=frame.captured_at,
    )


def _save(image: Image, fmt: str, **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def to_jpeg(frame: Frame, quality: int = 75, *, max_edge: int | None = None) -> EncodedImage:
    """Baseline JPEG (4:2:0) at `quality` 1-100."""
    if not 1 <= quality <= 100:
        raise ValueError(f"JPEG quality must be 1-100, not {quality}")
    image = _resized(_to_image(frame), _fit(frame.width, frame.height, max_edge))
    data = _save(image, "JPEG", quality=quality)
    return EncodedImage(data, image.width, image.height)


def to_png(
    frame: Frame, *, max_bytes: int | None = None, max_edge: int | None = None
) -> EncodedImage:
    """PNG, shrunk step by step until it fits `max_bytes` (when given).

    Each retry scales by the square root of the overshoot (bytes grow about
    with the pixel count), with 10 % headroom; raises ImageTooLarge once the
    longer edge would drop under MIN_EDGE.
    """
    image = _to_image(frame)
    image = _resized(image, _fit(frame.width, frame.height, max_edge))
    while True:
        data = _save(image, "PNG", compress_level=PNG_COMPRESS_LEVEL)
        if max_bytes is None or len(data) <= max_bytes:
            return EncodedImage(data, image.width, image.height)
        factor = math.sqrt(max_bytes / len(data)) * 0.9
        edge = int(max(image.size) * min(factor, 0.9))
        if edge < MIN_EDGE:
            raise ImageTooLarge(
                f"a PNG of this frame does not fit {max_bytes} bytes even at {MIN_EDGE} px"
            )
        image = _resized(image, _fit(image.width, image.height, edge))


def even_size(width: int, height: int) -> tuple[int, int]:
    """Largest even size not above (width, height): 4:2:0 chroma needs even edges."""
    w, h = width - width % 2, height - height % 2
    if w < 2 or h < 2:
        raise ValueError(f"{width}x{height} is too small for 4:2:0 video")
    return w, h


class Nv12Converter:
    """BGRA frames to NV12 `av.VideoFrame`s (limited-range BT.601), for one stream of pictures.

    The BGRA source is one AVFrame allocated per source size and reused for every
    picture: loading a frame into it is the only copy on the way in, and its
    reformatter keeps its swscale context between pictures. Each result is a new
    NV12 frame that an encoder takes as it is (`nv12_parts` reads it without copying).
    Not thread-safe: one converter per video thread.
    """

    def __init__(self) -> None:
        self.source: VideoFrame | None = None

    def convert(self, frame: Frame, width: int | None = None, height: int | None = None) -> Any:
        """NV12 of `frame`, scaled (bilinear) to `(width, height)` rounded down to even."""
        out_w, out_h = even_size(width or frame.width, height or frame.height)
        source = self.source
        if source is None or (source.width, source.height) != (frame.width, frame.height):
            source = self.source = _video_frame_class()(frame.width, frame.height, "bgr0")
        _load(source.planes[0], frame)
        return source.reformat(
            width=out_w,
            height=out_h,
            format="nv12",
            src_colorspace="ITU601",
            dst_colorspace="ITU601",
            src_color_range="JPEG",
            dst_color_range="MPEG",
        )


def _video_frame_class() -> type[VideoFrame]:
    try:
        from av import VideoFrame
    except ImportError as exc:  # pragma: no cover - the desktop extra installs it
        raise DependencyMissing("PyAV (av) is not installed") from exc
    return VideoFrame


def _load(plane: Any, frame: Frame) -> None:
    """Copy the BGRA rows into the AVFrame plane (whose rows swscale may have padded)."""
    line = plane.line_size
    if line == frame.stride:
        plane.update(frame.data)
        return
    target = memoryview(plane)
    source = memoryview(frame.data)
    stride = frame.stride
    for row in range(frame.height):
        target[row * line : row * line + stride] = source[row * stride : (row + 1) * stride]


def nv12_parts(picture: Any) -> list[memoryview]:
    """Views of an NV12 frame's Y rows then UV rows, without the planes' row padding.

    Two views (whole planes) when the rows are unpadded, else one per row; joined,
    they are the tightly packed NV12 bytes. Nothing is copied here.
    """
    width, height = picture.width, picture.height
    parts: list[memoryview] = []
    for plane, rows in zip(picture.planes, (height, height // 2), strict=True):
        view = memoryview(plane)
        line = plane.line_size
        if line == width:
            parts.append(view[: width * rows])
        else:
            parts.extend(view[r * line : r * line + width] for r in range(rows))
    return parts


def to_nv12(frame: Frame, width: int | None = None, height: int | None = None) -> bytes:
    """NV12 (Y plane, then interleaved UV at half resolution), limited-range BT.601.

    The output size is `(width, height)` (default: the frame's), rounded down
    to even numbers, scaled with bilinear filtering. Returns exactly
    `w*h + w*h/2` bytes with no row padding.
    """
    return b"".join(nv12_parts(Nv12Converter().convert(frame, width, height)))
