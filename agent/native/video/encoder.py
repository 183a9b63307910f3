"""H.264 encoding with PyAV's libx264: ultrafast + zerolatency, Annex B, IDR on demand.

With these settings libx264 returns exactly one packet per input picture (no
B-frames, no lookahead), so every access unit leaves as soon as it is encoded.
Keyframes are IDRs (`forced-idr`) and carry SPS/PPS because the stream has no
global header. Input is NV12 from the desktop core, so the colour conversion is
the same one the NV12 path and PNG images use.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

PRESET_CRF = {"high": 23, "balanced": 28, "low": 32}


@dataclass(frozen=True, slots=True)
class AccessUnit:
    data: bytes
    keyframe: bool


class H264Encoder:
    def __init__(self, width: int, height: int, *, fps: int = 30, crf: int = 23) -> None:
        import av

        if width % 2 or height % 2:
            raise ValueError("H.264 4:2:0 needs even dimensions")
        self.width, self.height = width, height
        ctx = av.CodecContext.create("libx264", "w")
        ctx.width, ctx.height = width, height
        ctx.pix_fmt = "nv12"
        ctx.time_base = Fraction(1, 90000)
        ctx.framerate = Fraction(fps, 1)
        ctx.gop_size = fps * 10  # a periodic IDR every 10 s bounds any recovery wait
        ctx.max_b_frames = 0
        ctx.options = {
            "preset": "ultrafast",
            "tune": "zerolatency",
            "crf": str(crf),
            "forced-idr": "1",
        }
        ctx.open()
        self._ctx = ctx
        self._pts = 0
        self._step = 90000 // fps

    def encode(self, nv12: bytes, *, keyframe: bool = False) -> list[AccessUnit]:
        import av
        from av.video.frame import PictureType

        frame = av.VideoFrame(self.width, self.height, "nv12")
        y_plane, uv_plane = frame.planes
        luma = self.width * self.height
        _fill(y_plane, memoryview(nv12)[:luma], self.width, self.height)
        _fill(uv_plane, memoryview(nv12)[luma:], self.width, self.height // 2)
        frame.pts = self._pts
        self._pts += self._step
        if keyframe:
            frame.pict_type = PictureType.I
        return [AccessUnit(bytes(p), bool(p.is_keyframe)) for p in self._ctx.encode(frame)]

    def close(self) -> None:
        self._ctx = None  # type: ignore[assignment]


def _fill(plane: object, data: memoryview, row_bytes: int, rows: int) -> None:
    line = plane.line_size  # type: ignore[attr-defined]
    if line == row_bytes:
        plane.update(data)  # type: ignore[attr-defined]
        return
    padded = bytearray(line * rows)
    for r in range(rows):
        padded[r * line : r * line + row_bytes] = data[r * row_bytes : (r + 1) * row_bytes]
    plane.update(bytes(padded))  # type: ignore[attr-defined]
