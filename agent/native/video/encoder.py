"""H.264 encoding with PyAV's libx264: ultrafast + zerolatency, Annex B, IDR on demand.

With these settings libx264 returns exactly one packet per input picture (no
B-frames, no lookahead), so every access unit leaves as soon as it is encoded.
Keyframes are IDRs (`forced-idr`) and carry SPS/PPS because the stream has no
global header. Input is the NV12 `av.VideoFrame` that `Nv12Converter` made, taken
as it is (the colour conversion is the same one the NV12 path and PNG images use);
output is the encoder's packets, which the caller copies once into its message.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any


@dataclass(frozen=True, slots=True)
class AccessUnit:
    """One encoded picture: the encoder's packets (buffers, not copied) in order."""

    packets: tuple[Any, ...]
    keyframe: bool

    @property
    def size(self) -> int:
        return sum(p.size for p in self.packets)


class H264Encoder:
    def __init__(self, width: int, height: int, *, fps: int = 30, crf: int = 23) -> None:
        import av

        if width % 2 or height % 2:
            raise ValueError("H.264 4:2:0 needs even dimensions")
        self.width, self.height = width, height
        self.fps = fps
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

    def encode(self, picture: Any, *, keyframe: bool = False) -> AccessUnit | None:
        """Encode an NV12 `av.VideoFrame` of this encoder's size; None if nothing came out.

        The same picture may be encoded again (a forced IDR on a still screen): the
        encoder keeps no reference to it once this returns.
        """
        from av.video.frame import PictureType

        if (picture.width, picture.height) != (self.width, self.height):
            size = f"{picture.width}x{picture.height}"
            raise ValueError(f"a {size} picture for a {self.width}x{self.height} encoder")
        picture.pts = self._pts
        self._pts += self._step
        picture.pict_type = PictureType.I if keyframe else PictureType.NONE
        packets = tuple(self._ctx.encode(picture))
        if not packets:
            return None
        return AccessUnit(packets, any(p.is_keyframe for p in packets))

    def close(self) -> None:
        self._ctx = None  # type: ignore[assignment]
