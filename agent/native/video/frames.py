"""Binary video messages: CDV1 (H.264 Annex B) and CDN1 (NV12), big-endian headers.

One WebSocket binary message is one complete frame, with no length prefix:

    CDV1: magic u32 | generation u32 | sequence u32 | timestamp_us u64 | flags u32 | Annex B
    CDN1: the same 24 bytes (flags always 1) | width u32 | height u32 | Y plane | UV plane

The encoder thread builds each outgoing message once, already framed for the
WebSocket (`h264_frame`, `nv12_frame`): one `bytes` allocated at its final size
holds the RFC 6455 frame header, the CDV1/CDN1 header and the payload, copied in
a single pass from the encoder's packet or the NV12 planes. Every viewer's
socket is then handed that same object; nothing is copied per viewer.
`pack_h264`/`pack_nv12` build the bare message (no WebSocket header), for tests
and for peers that frame it themselves.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tetherbed.agent.native.video.flow import OutFrame
from tetherbed.wire import crossdesk

#: The two `automation_video_protocols`, by the framing they name (wire/crossdesk.py).
H264_PROTOCOL = crossdesk.H264_PROTOCOL
NV12_PROTOCOL = crossdesk.NV12_PROTOCOL
CDV1 = crossdesk.MAGIC_H264
CDN1 = crossdesk.MAGIC_NV12
FLAG_KEYFRAME = crossdesk.FLAG_IDR
MAX_ACCESS_UNIT = crossdesk.ACCESS_UNIT_MAX_BYTES
MAX_NV12_AXIS = 8192
MAX_NV12_PIXELS = 16_777_216
HEADER = struct.Struct(">IIIQI")
NV12_HEADER = struct.Struct(">IIIQIII")
U32 = 2**32
# RFC 6455 §5.2: FIN + opcode 2 (binary); a server's frames are never masked.
WS_FIN_BINARY = 0x82
_WS_LEN16 = struct.Struct(">BBH")
_WS_LEN64 = struct.Struct(">BBQ")


Buffer = bytes | bytearray | memoryview | Any  # anything with the buffer protocol (av.Packet)


class FrameFormatError(ValueError):
    """A message that does not follow CDV1/CDN1."""


@dataclass(frozen=True, slots=True)
class VideoMessage:
    """A parsed message; `payload` is a view into the original bytes (no copy)."""

    magic: int
    generation: int
    sequence: int
    timestamp_us: int
    flags: int
    payload: memoryview
    width: int = 0
    height: int = 0

    @property
    def keyframe(self) -> bool:
        return bool(self.flags & FLAG_KEYFRAME)


def ws_binary_header(length: int) -> bytes:
    """The header of an unmasked, final, binary WebSocket frame of `length` payload bytes."""
    if length < 126:
        return bytes((WS_FIN_BINARY, length))
    if length < 65536:
        return _WS_LEN16.pack(WS_FIN_BINARY, 126, length)
    return _WS_LEN64.pack(WS_FIN_BINARY, 127, length)


def _h264_header(
    generation: int, sequence: int, timestamp_us: int, keyframe: bool, size: int
) -> bytes:
    if size > MAX_ACCESS_UNIT:
        raise FrameFormatError(f"access unit of {size} bytes exceeds 4 MiB")
    flags = FLAG_KEYFRAME if keyframe else 0
    return HEADER.pack(CDV1, generation % U32, sequence % U32, timestamp_us, flags)


def pack_h264(
    generation: int, sequence: int, timestamp_us: int, keyframe: bool, annexb: bytes
) -> bytes:
    return _h264_header(generation, sequence, timestamp_us, keyframe, len(annexb)) + annexb


def h264_frame(
    generation: int,
    sequence: int,
    timestamp_us: int,
    keyframe: bool,
    units: Sequence[Buffer],
) -> OutFrame:
    """The WebSocket frame of one access unit, given as the encoder's packets (not copied)."""
    size = sum(memoryview(u).nbytes for u in units)
    header = _h264_header(generation, sequence, timestamp_us, keyframe, size)
    return _framed(header, units, size, generation=generation, sequence=sequence, keyframe=keyframe)


def _framed(
    header: bytes,
    payload: Sequence[Buffer],
    payload_size: int,
    *,
    generation: int,
    sequence: int,
    keyframe: bool,
) -> OutFrame:
    ws = ws_binary_header(len(header) + payload_size)
    wire = b"".join((ws + header, *payload))  # the one allocation and copy of the payload
    return OutFrame(generation, sequence, keyframe, wire, len(ws))


def check_nv12_size(width: int, height: int) -> None:
    if width <= 0 or height <= 0 or width % 2 or height % 2:
        raise FrameFormatError(f"NV12 dimensions must be positive and even, got {width}x{height}")
    if width > MAX_NV12_AXIS or height > MAX_NV12_AXIS or width * height > MAX_NV12_PIXELS:
        raise FrameFormatError(f"NV12 picture {width}x{height} is too large")


def nv12_size(width: int, height: int) -> int:
    return width * height * 3 // 2


def _nv12_header(
    generation: int, sequence: int, timestamp_us: int, *, width: int, height: int, size: int
) -> bytes:
    check_nv12_size(width, height)
    if size != nv12_size(width, height):
        raise FrameFormatError(f"NV12 payload is {size} bytes, expected {nv12_size(width, height)}")
    return NV12_HEADER.pack(
        CDN1, generation % U32, sequence % U32, timestamp_us, FLAG_KEYFRAME, width, height
    )


def pack_nv12(
    generation: int, sequence: int, timestamp_us: int, *, width: int, height: int, nv12: bytes
) -> bytes:
    header = _nv12_header(
        generation, sequence, timestamp_us, width=width, height=height, size=len(nv12)
    )
    return header + nv12


def nv12_frame(
    generation: int,
    sequence: int,
    timestamp_us: int,
    *,
    width: int,
    height: int,
    parts: Sequence[Buffer],
) -> OutFrame:
    """The WebSocket frame of one NV12 picture, given as views of its rows (not copied)."""
    size = sum(memoryview(p).nbytes for p in parts)
    header = _nv12_header(generation, sequence, timestamp_us, width=width, height=height, size=size)
    return _framed(header, parts, size, generation=generation, sequence=sequence, keyframe=True)


def parse(message: bytes | bytearray | memoryview) -> VideoMessage:
    view = memoryview(message)
    if len(view) < HEADER.size:
        raise FrameFormatError("message shorter than its header")
    magic, generation, sequence, timestamp, flags = HEADER.unpack_from(view)
    if magic == CDV1:
        if len(view) - HEADER.size > MAX_ACCESS_UNIT:
            raise FrameFormatError("access unit exceeds 4 MiB")
        return VideoMessage(magic, generation, sequence, timestamp, flags, view[HEADER.size :])
    if magic == CDN1:
        if len(view) < NV12_HEADER.size:
            raise FrameFormatError("CDN1 message shorter than its header")
        width, height = struct.unpack_from(">II", view, HEADER.size)
        check_nv12_size(width, height)
        if flags != FLAG_KEYFRAME:
            raise FrameFormatError("CDN1 flags must be 1")
        if len(view) != NV12_HEADER.size + nv12_size(width, height):
            raise FrameFormatError("CDN1 size does not match 32 + width * height * 3 / 2")
        payload = view[NV12_HEADER.size :]
        return VideoMessage(magic, generation, sequence, timestamp, flags, payload, width, height)
    raise FrameFormatError(f"unknown magic {magic:#010x}")


def nal_unit_types(annexb: bytes | memoryview) -> list[int]:
    """NAL unit types in an Annex B access unit (5 = IDR, 7 = SPS, 8 = PPS)."""
    data = bytes(annexb)
    types = []
    index = data.find(b"\x00\x00\x01")
    while index >= 0 and index + 3 < len(data):
        types.append(data[index + 3] & 0x1F)
        index = data.find(b"\x00\x00\x01", index + 3)
    return types
