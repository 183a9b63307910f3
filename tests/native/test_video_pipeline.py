"""The video thread in-process, on synthetic pictures (PyAV, no X): what it copies and sends.

A picture's BGRA is loaded into the converter's one reused AVFrame; swscale's NV12
frame goes to libx264 as it is; the packet (or the NV12 rows) is copied once, into a
message that already is the WebSocket frame. The allocation test guards the copies:
under tracemalloc a picture-sized Python object per picture would show at once.
"""

from __future__ import annotations

import queue
import struct
import time
import tracemalloc

import av
import pytest

from tetherbed.agent.desktop.capture import Frame
from tetherbed.agent.desktop.encode import Nv12Converter, nv12_parts, to_nv12
from tetherbed.agent.native.frames import Picture
from tetherbed.agent.native.observations import Rect
from tetherbed.agent.native.quality import DEFAULT, PRESETS
from tetherbed.agent.native.video import frames as vf
from tetherbed.agent.native.video.encoder import H264Encoder
from tetherbed.agent.native.video.flow import OutFrame
from tetherbed.agent.native.video.pipeline import VideoPipeline


def gradient(width: int, height: int, shift: int) -> Frame:
    """A smooth BGRA picture (cheap to encode) that differs with `shift`."""
    row = bytearray()
    for x in range(width):
        row += bytes(((x + shift) % 256, (x * 2) % 256, shift % 256, 0))
    data = b"".join(bytes(row[(y % 7) * 4 :] + row[: (y % 7) * 4]) for y in range(height))
    return Frame(data, width, height, 0, 0, 1000.0 + shift)


def picture(frame: Frame, frame_id: int, generation: int = 0) -> Picture:
    rect = Rect(frame.left, frame.top, frame.width, frame.height)
    return Picture(frame_id, generation, 0, frame, rect, frame.captured_at)


def test_the_default_tier_is_the_high_frame_rate_preview() -> None:
    tier = PRESETS[DEFAULT]
    assert (tier.name, tier.max_width, tier.max_height, tier.fps) == (
        "high-frame-rate",
        1920,
        1080,
        60,
    )
    assert max(p.fps for p in PRESETS.values()) == 60
    from tetherbed.agent.native.adapter import Options
    from tetherbed.agent.native.main import build_parser

    assert build_parser().parse_args(["--stdio"]).quality == DEFAULT == Options().quality


def test_the_converter_reuses_one_source_frame_per_size() -> None:
    converter = Nv12Converter()
    first, second = gradient(64, 32, 0), gradient(64, 32, 50)
    a = converter.convert(first)
    source = converter.source
    b = converter.convert(second)
    assert converter.source is source  # the preallocated BGRA frame, loaded again
    assert b is not a  # each NV12 picture is a new frame: an encoder may still hold the last
    assert b"".join(nv12_parts(a)) == to_nv12(first)
    assert b"".join(nv12_parts(b)) == to_nv12(second)
    converter.convert(gradient(32, 16, 0))
    assert converter.source is not source and converter.source.width == 32


def test_nv12_parts_drop_the_row_padding_without_copying() -> None:
    # 1366 wide: swscale pads the rows (line size 1376), so parts are one view per row.
    frame = gradient(1366, 8, 3)
    nv12 = Nv12Converter().convert(frame, 1366, 8)
    assert nv12.planes[0].line_size > 1366
    parts = nv12_parts(nv12)
    assert len(parts) == 8 + 4 and all(isinstance(p, memoryview) for p in parts)
    assert all(p.nbytes == 1366 for p in parts)
    packed = b"".join(parts)
    assert len(packed) == vf.nv12_size(1366, 8) == len(to_nv12(frame, 1366, 8))


def test_the_encoder_takes_the_converted_frame_and_returns_its_packets() -> None:
    converter = Nv12Converter()
    encoder = H264Encoder(64, 32, fps=60)
    nv12 = converter.convert(gradient(64, 32, 0))
    unit = encoder.encode(nv12, keyframe=True)
    assert unit is not None and unit.keyframe and len(unit.packets) == 1
    assert isinstance(unit.packets[0], av.Packet)  # not copied into bytes on the way
    assert {5, 7, 8} <= set(vf.nal_unit_types(b"".join(unit.packets)))
    delta = encoder.encode(converter.convert(gradient(64, 32, 9)))
    assert delta is not None and not delta.keyframe
    again = encoder.encode(nv12, keyframe=True)  # a still screen: the same picture, an IDR
    assert again is not None and again.keyframe
    with pytest.raises(ValueError):
        encoder.encode(converter.convert(gradient(32, 32, 0)))


def run_pipeline(protocol: str, frames: list[Frame]) -> tuple[VideoPipeline, list[OutFrame]]:
    out: queue.Queue[OutFrame] = queue.Queue()
    tier = PRESETS[DEFAULT]
    pipeline = VideoPipeline(
        protocol=protocol,
        sink=out.put,
        max_size=(tier.max_width, tier.max_height),
        fps=tier.fps,
        crf=tier.crf,
    )
    pipeline.set_active(True)
    messages = []
    for i, frame in enumerate(frames, 1):
        pipeline.submit(picture(frame, i))
        messages.append(out.get(timeout=30))
    return pipeline, messages


def test_h264_messages_are_websocket_frames_of_cdv1() -> None:
    frames = [gradient(320, 240, shift) for shift in (0, 40, 80)]
    pipeline, messages = run_pipeline(vf.H264_PROTOCOL, frames)
    try:
        assert pipeline._encoder is not None and pipeline._encoder.fps == 60
        source = pipeline._converter.source
        assert source is not None and (source.width, source.height) == (320, 240)
    finally:
        pipeline.stop()
    decoder = av.CodecContext.create("h264", "r")
    for i, (frame, message) in enumerate(zip(frames, messages, strict=True), 1):
        assert isinstance(message.wire, bytes)
        assert message.wire[: message.offset] == vf.ws_binary_header(message.size)
        parsed = vf.parse(message.message)
        assert (parsed.magic, parsed.generation, parsed.sequence) == (vf.CDV1, 0, i)
        assert parsed.timestamp_us == int(frame.captured_at * 1_000_000)
        assert parsed.keyframe == (i == 1) == message.keyframe
        decoded = decoder.decode(av.Packet(bytes(parsed.payload)))
        assert [(d.width, d.height) for d in decoded] == [(320, 240)]


def test_nv12_messages_carry_the_converted_rows() -> None:
    frames = [gradient(322, 242, shift) for shift in (0, 40)]  # padded rows in swscale
    pipeline, messages = run_pipeline(vf.NV12_PROTOCOL, frames)
    pipeline.stop()
    for i, (frame, message) in enumerate(zip(frames, messages, strict=True), 1):
        head = struct.unpack(">IIIQIII", message.message[:32])
        assert head == (vf.CDN1, 0, i, int(frame.captured_at * 1e6), 1, 322, 242)
        assert bytes(message.message[32:]) == to_nv12(frame)


@pytest.mark.parametrize(
    ("protocol", "allowed"),
    [
        # Only the message (a packet of a smooth picture) and small objects.
        (vf.H264_PROTOCOL, 0.25),
        # The message holds one copy of the picture, nothing else may.
        (vf.NV12_PROTOCOL, 1.25),
    ],
)
def test_a_1080p_picture_allocates_no_extra_copy(protocol: str, allowed: float) -> None:
    frames = [gradient(1920, 1080, shift) for shift in (0, 60, 120)]
    out: queue.Queue[OutFrame] = queue.Queue()
    pipeline = VideoPipeline(protocol=protocol, sink=out.put, fps=60)
    pipeline.set_active(True)
    peaks = []
    try:
        for i in range(6):
            frame = frames[i % len(frames)]
            if i >= 2:  # after the encoder opened and swscale built its tables
                tracemalloc.start()
                tracemalloc.reset_peak()
            pipeline.submit(picture(frame, i + 1))
            message = out.get(timeout=60)
            if i >= 2:
                peaks.append(tracemalloc.get_traced_memory()[1])
                tracemalloc.stop()
            del message
            time.sleep(0)
    finally:
        pipeline.stop()
    nv12 = vf.nv12_size(1920, 1080)
    assert max(peaks) < allowed * nv12, [p / nv12 for p in peaks]
