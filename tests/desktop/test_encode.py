"""Encoding frames: sizes, byte budgets, and NV12's limited-range BT.601 values. No display."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from tetherbed.agent.desktop.capture import Frame
from tetherbed.agent.desktop.encode import (
    even_size,
    scale_to,
    to_jpeg,
    to_nv12,
    to_png,
)
from tetherbed.agent.desktop.errors import ImageTooLarge


def solid(width: int, height: int, rgb: tuple[int, int, int]) -> Frame:
    r, g, b = rgb
    return Frame(bytes([b, g, r, 0]) * (width * height), width, height, 5, 7, 0.0)


def noise(width: int, height: int) -> Frame:
    data = bytes((i * 2654435761 >> 13) & 0xFF for i in range(width * height * 4))
    return Frame(data, width, height, 0, 0, 0.0)


def test_png_round_trips_the_pixels() -> None:
    image = to_png(solid(40, 30, (10, 200, 30)))
    decoded = Image.open(io.BytesIO(image.data))
    assert (image.width, image.height) == decoded.size == (40, 30)
    assert decoded.convert("RGB").getpixel((3, 3)) == (10, 200, 30)


def test_png_shrinks_to_fit_a_byte_budget() -> None:
    frame = noise(400, 300)
    full = to_png(frame)
    fitted = to_png(frame, max_bytes=len(full.data) // 4)
    assert len(fitted.data) <= len(full.data) // 4
    assert fitted.width < 400
    assert abs(fitted.width / fitted.height - 400 / 300) < 0.05


def test_png_gives_up_below_the_smallest_edge() -> None:
    with pytest.raises(ImageTooLarge):
        to_png(noise(200, 200), max_bytes=10)


def test_jpeg_quality_and_max_edge() -> None:
    frame = noise(320, 240)
    small = to_jpeg(frame, 10)
    large = to_jpeg(frame, 95)
    assert len(small.data) < len(large.data)
    assert small.data[:2] == b"\xff\xd8"
    scaled = to_jpeg(frame, 75, max_edge=160)
    assert (scaled.width, scaled.height) == (160, 120)
    with pytest.raises(ValueError, match="1-100"):
        to_jpeg(frame, 0)


def test_scale_to_keeps_the_origin_and_aspect() -> None:
    frame = solid(400, 200, (255, 0, 0))
    scaled = scale_to(frame, 100)
    assert (scaled.width, scaled.height, scaled.left, scaled.top) == (100, 50, 5, 7)
    assert len(scaled.data) == 100 * 50 * 4
    assert scaled.data[:3] == bytes([0, 0, 255])
    assert scale_to(frame, 1000) is frame


@pytest.mark.parametrize(
    ("rgb", "y", "u", "v"),
    [((255, 255, 255), 235, 128, 128), ((0, 0, 0), 16, 128, 128), ((255, 0, 0), 81, 90, 240)],
)
def test_nv12_is_limited_range_bt601(rgb: tuple[int, int, int], y: int, u: int, v: int) -> None:
    width, height = 64, 32
    data = to_nv12(solid(width, height, rgb))
    assert len(data) == width * height * 3 // 2
    luma, chroma = data[: width * height], data[width * height :]
    assert abs(luma[100] - y) <= 1
    assert abs(chroma[0] - u) <= 1 and abs(chroma[1] - v) <= 1


def test_nv12_rounds_to_even_and_strips_row_padding() -> None:
    data = to_nv12(solid(1366, 9, (0, 0, 0)), 683, 9)  # odd target: 682 x 8
    assert len(data) == 682 * 8 * 3 // 2
    assert set(data[: 682 * 8]) == {16}
    assert even_size(7, 5) == (6, 4)
    with pytest.raises(ValueError):
        even_size(1, 10)
