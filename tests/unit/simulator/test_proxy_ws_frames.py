"""The sans-I/O WebSocket frame parser and message assembler."""

from __future__ import annotations

import itertools
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tetherbed.simulator.proxy.ws.frames import (
    OP_BINARY,
    OP_CLOSE,
    OP_CONTINUATION,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    Frame,
    FrameError,
    FrameParser,
    apply_mask,
    build_frame,
    close_payload,
    parse_close_payload,
)
from tetherbed.simulator.proxy.ws.messages import Message, MessageAssembler, message_type

# -- strategies ----------------------------------------------------------------

masks = st.binary(min_size=4, max_size=4)
control_frames = st.tuples(st.sampled_from([OP_PING, OP_PONG]), st.binary(max_size=125))


@st.composite
def messages(draw: st.DrawFn) -> tuple[int, bytes, list[int]]:
    """(opcode, payload, fragment sizes) with sizes summing to len(payload)."""
    opcode = draw(st.sampled_from([OP_TEXT, OP_BINARY]))
    size = draw(st.sampled_from([0, 1, 125, 126, 127, 65535, 65536]) | st.integers(0, 300))
    if size < 1000:
        payload = draw(st.binary(min_size=size, max_size=size))
    else:  # large bodies from a drawn seed: cheap, and still replayable
        payload = random.Random(draw(st.integers(0, 2**32))).randbytes(size)
    cuts = sorted(draw(st.lists(st.integers(0, size), max_size=3)))
    bounds = [0, *cuts, size]
    return opcode, payload, [b - a for a, b in itertools.pairwise(bounds)]


@st.composite
def streams(draw: st.DrawFn, masked: bool) -> list[Frame]:
    """Frames of several messages, fragmented, with control frames in between."""
    frames: list[Frame] = []
    for opcode, payload, sizes in draw(st.lists(messages(), min_size=1, max_size=4)):
        position = 0
        for index, size in enumerate(sizes):
            if index and draw(st.booleans()):
                control_opcode, body = draw(control_frames)
                mask = draw(masks) if masked else None
                frames.append(build_frame(control_opcode, body, mask=mask))
            last = index == len(sizes) - 1
            mask = draw(masks) if masked else None
            frames.append(
                build_frame(
                    opcode if index == 0 else OP_CONTINUATION,
                    payload[position : position + size],
                    fin=last,
                    mask=mask,
                )
            )
            position += size
    return frames


def _parse(chunks: list[bytes], masked: bool) -> list[Frame]:
    parser = FrameParser(masked=masked)
    frames = [frame for chunk in chunks for frame in parser.feed(chunk)]
    assert parser.error is None
    assert parser.remaining() == b""
    return frames


def _split_points(size: int) -> list[int]:
    """Every boundary for short streams; headers and a sample elsewhere for long ones."""
    if size <= 600:
        return list(range(size + 1))
    return sorted({*range(0, 20), *range(size - 20, size + 1), size // 2, size // 3})


def _same(a: Frame, b: Frame) -> bool:
    return (a.fin, a.rsv, a.opcode, a.mask, a.raw, a.payload) == (
        b.fin, b.rsv, b.opcode, b.mask, b.raw, b.payload,
    )  # fmt: skip


# -- properties ----------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), masked=st.booleans())
def test_any_split_of_a_stream_parses_back_to_the_same_frames(data, masked):
    frames = data.draw(streams(masked))
    wire = b"".join(frame.raw for frame in frames)
    for point in _split_points(len(wire)):
        parsed = _parse([wire[:point], wire[point:]], masked)
        assert len(parsed) == len(frames)
        assert all(_same(a, b) for a, b in zip(parsed, frames, strict=True))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), masked=st.booleans())
def test_byte_at_a_time_and_reassembly_give_back_the_messages(data, masked):
    frames = data.draw(streams(masked))
    wire = b"".join(frame.raw for frame in frames)
    chunks = (
        [wire[i : i + 1] for i in range(len(wire))]
        if len(wire) < 3000
        else [wire[i : i + 997] for i in range(0, len(wire), 997)]
    )
    assembler = MessageAssembler()
    out = [m for f in _parse(chunks, masked) if (m := assembler.feed(f)) is not None]
    expected_data = [
        (frames_[0].opcode, b"".join(f.payload for f in frames_)) for frames_ in _group(frames)
    ]
    got_data = [(m.opcode, m.payload) for m in out if not m.is_control]
    assert got_data == expected_data
    assert b"".join(m.raw for m in out if not m.is_control) == b"".join(
        f.raw for f in frames if not f.is_control
    )
    assert [m.frames[0].raw for m in out if m.is_control] == [f.raw for f in frames if f.is_control]


def _group(frames: list[Frame]) -> list[list[Frame]]:
    groups: list[list[Frame]] = []
    current: list[Frame] = []
    for frame in frames:
        if frame.is_control:
            continue
        current.append(frame)
        if frame.fin:
            groups.append(current)
            current = []
    return groups


@settings(deadline=None)
@given(payload=st.binary(max_size=2000), mask=masks)
def test_masking_twice_is_the_identity_and_matches_the_definition(payload, mask):
    masked = apply_mask(payload, mask)
    assert masked == bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    assert apply_mask(masked, mask) == payload


# -- examples ------------------------------------------------------------------


@pytest.mark.parametrize(("size", "header"), [(0, 2), (125, 2), (126, 4), (65535, 4), (65536, 10)])
def test_length_encodings(size, header):
    frame = build_frame(OP_BINARY, b"\x00" * size)
    assert frame.header_length == header
    assert len(frame.raw) == header + size
    assert build_frame(OP_BINARY, b"\x00" * size, mask=b"abcd").header_length == header + 4


def test_known_bytes_from_rfc_6455_section_5_7():
    # A single-frame masked text message containing "Hello".
    wire = bytes.fromhex("818537fa213d7f9f4d5158")
    (frame,) = FrameParser(masked=True).feed(wire)
    assert frame.payload == b"Hello"
    assert frame.mask == bytes.fromhex("37fa213d")
    assert build_frame(OP_TEXT, b"Hello", mask=frame.mask).raw == wire


def test_remasking_keeps_the_payload_and_changes_the_bytes():
    frame = build_frame(OP_TEXT, b'{"type":"EXECUTE_COMMAND"}', mask=b"\x01\x02\x03\x04")
    again = frame.remasked(b"\x09\x08\x07\x06")
    assert again.payload == frame.payload
    assert again.raw != frame.raw
    assert again.remasked(None).mask is None


@pytest.mark.parametrize(
    ("wire", "masked", "problem"),
    [
        (bytes([0x83, 0x00]), False, "reserved opcode"),
        (bytes([0x09, 0x00]), False, "control frames must be final"),
        (bytes([0x89, 126, 0, 126]) + b"\x00" * 126, False, "control frames"),
        (bytes([0x81, 0x80]) + b"abcd", False, "must be masked"),
        (bytes([0x81, 0x00]), True, "must be masked"),
        (bytes([0x82, 127]) + struct.pack("!Q", 1 << 63), False, "top bit"),
    ],
)
def test_framing_errors_stop_the_parser_and_keep_the_bytes(wire, masked, problem):
    good = build_frame(OP_TEXT, b"ok", mask=b"abcd" if masked else None).raw
    parser = FrameParser(masked=masked)
    frames = parser.feed(good + wire)
    assert [f.payload for f in frames] == [b"ok"]
    assert parser.error is not None and problem in str(parser.error)
    assert parser.remaining() == wire


def test_oversized_frames_are_refused_before_buffering():
    parser = FrameParser(masked=False, max_payload=1000)
    parser.feed(bytes([0x82, 126]) + struct.pack("!H", 5000))
    assert parser.error is not None


def test_assembler_rejects_bad_fragmentation():
    assembler = MessageAssembler()
    with pytest.raises(FrameError):
        assembler.feed(build_frame(OP_CONTINUATION, b"x"))
    assembler.feed(build_frame(OP_TEXT, b"a", fin=False))
    with pytest.raises(FrameError):
        assembler.feed(build_frame(OP_TEXT, b"b"))


def test_message_type_reads_only_the_type_field():
    def text(body: bytes) -> Message:
        return Message((build_frame(OP_TEXT, body),))

    assert message_type(text(b'{"id":"1","type":"PONG","payload":{}}')) == "PONG"
    assert message_type(text(b'{"type": 5}')) == "ws.text"
    assert message_type(text(b"[1, 2]")) == "ws.text"
    assert message_type(text(b"not json")) == "ws.text"
    assert message_type(Message((build_frame(OP_BINARY, b"\x00"),))) == "ws.binary"
    assert message_type(Message((build_frame(OP_PING, b""),))) == "ws.ping"
    assert message_type(Message((build_frame(OP_CLOSE, close_payload(4429)),))) == "ws.close"
    compressed = Message((build_frame(OP_TEXT, b'{"type":"X"}', rsv=4),))
    assert message_type(compressed) == "ws.text"


def test_close_payload_round_trip_and_reason_limit():
    assert parse_close_payload(close_payload(4429, "rate limited")) == (4429, "rate limited")
    long = close_payload(1000, "é" * 200)
    assert len(long) <= 125
    long.decode("latin-1")  # always decodable; and the reason part is valid UTF-8:
    long[2:].decode("utf-8")
    assert parse_close_payload(b"") == (None, "")
