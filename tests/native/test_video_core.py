"""CDV1/CDN1 framing, tickets, per-viewer flow control and the handoff (no I/O).

The flow-control properties are checked with Hypothesis over arbitrary sequences of
frames, acks, keyframe requests and clock steps.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tetherbed.agent.native.errors import Code, NativeError
from tetherbed.agent.native.tickets import TicketBook, TicketRejected
from tetherbed.agent.native.video import frames as vf
from tetherbed.agent.native.video.flow import (
    MAX_UNACKED_BYTES,
    FlowViolation,
    Handoff,
    KeyframePacer,
    OutFrame,
    Verdict,
    ViewerFlow,
)

# --- binary frames ---------------------------------------------------------------


def test_cdv1_layout_is_big_endian() -> None:
    data = vf.pack_h264(7, 9, 123456789, True, b"\x00\x00\x00\x01\x67")
    assert data[:4] == b"CDV1"
    assert struct.unpack(">IIIQI", data[:24]) == (vf.CDV1, 7, 9, 123456789, 1)
    message = vf.parse(data)
    assert message.keyframe and bytes(message.payload) == b"\x00\x00\x00\x01\x67"
    assert vf.parse(vf.pack_h264(1, 2, 3, False, b"x")).flags == 0
    with pytest.raises(vf.FrameFormatError):
        vf.pack_h264(1, 1, 1, False, bytes(vf.MAX_ACCESS_UNIT + 1))


def test_cdn1_size_rules() -> None:
    data = vf.pack_nv12(1, 2, 3, width=4, height=2, nv12=bytes(12))
    assert data[:4] == b"CDN1" and len(data) == 32 + 4 * 2 * 3 // 2
    message = vf.parse(data)
    assert (message.width, message.height, message.flags) == (4, 2, 1)
    for width, height in ((3, 2), (4, 3), (8194, 2), (4096, 4098)):
        with pytest.raises(vf.FrameFormatError):
            vf.check_nv12_size(width, height)
    with pytest.raises(vf.FrameFormatError):
        vf.pack_nv12(1, 2, 3, width=4, height=2, nv12=bytes(11))
    with pytest.raises(vf.FrameFormatError):
        vf.parse(data + b"\x00")
    with pytest.raises(vf.FrameFormatError):
        vf.parse(b"XXXX" + data[4:])


@pytest.mark.parametrize(
    ("length", "header"),
    [
        (0, b"\x82\x00"),
        (125, b"\x82\x7d"),
        (126, b"\x82\x7e\x00\x7e"),
        (65535, b"\x82\x7e\xff\xff"),
        (65536, b"\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00"),
        (25165856, b"\x82\x7f" + (25165856).to_bytes(8, "big")),
    ],
)
def test_websocket_frame_header_byte_for_byte(length: int, header: bytes) -> None:
    """RFC 6455 §5.2: FIN, binary, unmasked, the shortest length encoding."""
    assert vf.ws_binary_header(length) == header


def _websockets_reads(wire: bytes) -> bytes:
    """What the `websockets` client's own parser makes of a server frame."""
    from websockets.client import ClientProtocol
    from websockets.frames import Opcode
    from websockets.protocol import State
    from websockets.uri import parse_uri

    client = ClientProtocol(parse_uri("ws://127.0.0.1/api/video"), state=State.OPEN)
    client.receive_data(wire)
    (frame,) = client.events_received()
    assert frame.opcode is Opcode.BINARY and frame.fin
    return bytes(frame.data)


@pytest.mark.parametrize("size", [5, 99, 126 - 24, 70_000])
def test_h264_message_is_built_once_as_a_websocket_frame(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    units = [payload[: size // 2], memoryview(payload)[size // 2 :]]  # two packets, any buffer
    frame = vf.h264_frame(7, 9, 123456789, True, units)
    message = struct.pack(">IIIQI", vf.CDV1, 7, 9, 123456789, 1) + payload
    assert frame.wire == vf.ws_binary_header(len(message)) + message
    assert isinstance(frame.wire, bytes)  # immutable: safe to share between viewers
    assert frame.offset == len(vf.ws_binary_header(len(message)))
    assert frame.size == len(message) and bytes(frame.message) == message
    assert message == vf.pack_h264(7, 9, 123456789, True, payload)
    assert (frame.generation, frame.sequence, frame.keyframe) == (7, 9, True)
    assert _websockets_reads(frame.wire) == message
    with pytest.raises(vf.FrameFormatError):
        vf.h264_frame(1, 1, 1, False, [bytes(vf.MAX_ACCESS_UNIT), b"x"])


def test_nv12_message_is_built_once_from_row_views() -> None:
    width, height = 6, 4
    rows = [bytes([r]) * width for r in range(height + height // 2)]
    frame = vf.nv12_frame(2**32 + 3, 4, 5, width=width, height=height, parts=rows)
    message = vf.pack_nv12(3, 4, 5, width=width, height=height, nv12=b"".join(rows))
    assert message[:32] == struct.pack(">IIIQIII", vf.CDN1, 3, 4, 5, 1, width, height)
    assert frame.wire == vf.ws_binary_header(len(message)) + message
    assert frame.keyframe and frame.size == 32 + width * height * 3 // 2
    assert _websockets_reads(frame.wire) == message
    with pytest.raises(vf.FrameFormatError):
        vf.nv12_frame(1, 1, 1, width=width, height=height, parts=rows[:-1])


def test_nal_unit_types() -> None:
    unit = b"\x00\x00\x00\x01\x67aa\x00\x00\x00\x01\x68b\x00\x00\x01\x65ccc"
    assert vf.nal_unit_types(unit) == [7, 8, 5]


# --- tickets ---------------------------------------------------------------------

ORIGIN = "http://127.0.0.1:4000"


def grant(book: TicketBook, ticket: str = "t" * 32, **kw: object) -> bool:
    args = {
        "ticket": ticket,
        "view": "v" * 32,
        "view_generation": 1,
        "session": "s" * 32,
        "origin": ORIGIN,
        "apps": None,
        "display_generation": 1,
        "now": 0.0,
        **kw,
    }
    return book.grant(**args)  # type: ignore[arg-type]


def test_ticket_is_one_time_and_expires() -> None:
    book = TicketBook()
    grant(book)
    assert book.redeem("t" * 32, ORIGIN, 1, 1.0).view == "v" * 32
    with pytest.raises(TicketRejected):
        book.redeem("t" * 32, ORIGIN, 1, 1.0)
    with pytest.raises(NativeError) as info:
        grant(book)
    assert info.value.code is Code.TICKET_REUSED
    grant(book, "u" * 32)
    with pytest.raises(TicketRejected):
        book.redeem("u" * 32, ORIGIN, 1, 15.0)  # 15 s later: expired
    grant(book, "w" * 32)
    assert book.origin_allowed(ORIGIN, 1.0) and not book.origin_allowed("null", 1.0)


def test_ticket_binding() -> None:
    book = TicketBook()
    grant(book, "a" * 32, apps="null")
    with pytest.raises(TicketRejected):
        book.redeem("a" * 32, "http://127.0.0.1:4001", 1, 0)  # consumed even so
    grant(book, "b" * 32, apps="null")
    assert book.redeem("b" * 32, "null", 1, 0)
    grant(book, "c" * 32)
    with pytest.raises(TicketRejected):
        book.redeem("c" * 32, ORIGIN, 2, 0)  # the display generation changed
    grant(book, "d" * 32)
    assert grant(book, "e" * 32, view_generation=2) is True  # replaces view generation 1
    with pytest.raises(TicketRejected):
        book.redeem("d" * 32, ORIGIN, 1, 0)
    with pytest.raises(NativeError) as info:
        grant(book, "f" * 32, view_generation=1)
    assert info.value.code is Code.VIEW_GENERATION_STALE
    assert book.revoke() == 1 and book.live(0) == 0


@pytest.mark.parametrize(
    ("origin", "apps"),
    [
        ("http://localhost:1", None),
        ("https://127.0.0.1:1", None),
        ("http://127.0.0.1:1/", None),
        ("http://127.0.0.1:70000", None),
        (ORIGIN, "http://apps.example"),
        (ORIGIN, "https://apps.example/path"),
    ],
)
def test_ticket_origins_are_validated(origin: str, apps: str | None) -> None:
    with pytest.raises(NativeError):
        grant(TicketBook(), origin=origin, apps=apps)


# --- flow control ------------------------------------------------------------------


def frame(seq: int, size: int = 1000, key: bool = False, generation: int = 1) -> OutFrame:
    return OutFrame(generation, seq, key, bytes(size))


def test_new_viewer_waits_for_an_idr_then_caps_at_eight() -> None:
    flow = ViewerFlow()
    assert flow.wants_keyframe  # a new viewer starts with an IDR
    assert flow.offer(frame(1), 0) is Verdict.SKIP
    assert flow.offer(frame(2, key=True), 0) is Verdict.SEND
    assert not flow.wants_keyframe
    for seq in range(3, 10):
        assert flow.offer(frame(seq), 0) is Verdict.SEND
    assert flow.unacked_frames == 8
    assert flow.offer(frame(10), 0) is Verdict.SKIP  # ninth: skipped, IDR needed now
    # ... but not wanted yet: at its cap the viewer could not take one (a stalled viewer
    # must not cost everyone else a forced IDR a second).
    assert flow.need_keyframe and not flow.wants_keyframe
    flow.ack(1, 2, 0)
    assert flow.wants_keyframe  # room again: now an IDR is worth forcing
    assert flow.offer(frame(11), 0) is Verdict.SKIP  # room again, but not decodable
    assert flow.offer(frame(12, key=True), 0) is Verdict.SEND


def test_byte_cap_and_the_lone_keyframe_exception() -> None:
    flow = ViewerFlow()
    big = frame(1, MAX_UNACKED_BYTES + 5000, key=True)
    assert flow.offer(big, 0) is Verdict.SEND  # alone, a keyframe may exceed 1 MiB
    assert flow.offer(frame(2, 10), 0) is Verdict.SKIP
    flow.ack(1, 1, 0)
    assert flow.offer(frame(3, MAX_UNACKED_BYTES // 2, key=True), 0) is Verdict.SEND
    assert flow.offer(frame(4, MAX_UNACKED_BYTES // 2), 0) is Verdict.SEND
    assert flow.offer(frame(5, 1), 0) is Verdict.SKIP


def test_acks_must_come_in_order_and_stalls_are_seen() -> None:
    flow = ViewerFlow()
    flow.offer(frame(1, key=True), 0)
    flow.offer(frame(2), 0)
    with pytest.raises(FlowViolation):
        flow.ack(1, 2, 0)
    with pytest.raises(FlowViolation):
        flow.ack(2, 1, 0)
    assert not flow.stalled(9.9) and flow.stalled(10.0)
    flow.ack(1, 1, 10)
    flow.ack(1, 2, 10)
    with pytest.raises(FlowViolation):
        flow.ack(1, 3, 10)
    assert not flow.stalled(100)


def test_keyframe_pacer_says_when_a_waiting_request_is_due() -> None:
    pacer = KeyframePacer(interval=1.0)
    assert pacer.due_in(0.0) is None  # nothing waits: the video thread sleeps for pictures
    pacer.request()
    assert pacer.due_in(0.0) == 0.0 and pacer.take(0.0)
    pacer.request()
    assert pacer.due_in(0.25) == 0.75 and not pacer.take(0.25)  # waits, not dropped
    assert pacer.due_in(1.0) == 0.0 and pacer.take(1.0) and pacer.due_in(1.0) is None


def test_keyframe_requests_are_rate_limited() -> None:
    flow = ViewerFlow()
    assert flow.keyframe_requested(5.0)
    assert not flow.keyframe_requested(5.9)
    assert flow.keyframe_requested(6.0)
    pacer = KeyframePacer()
    pacer.request()
    assert pacer.take(0.0) and not pacer.take(0.1)
    pacer.request()
    assert not pacer.take(0.5)  # inside the second: kept pending, not lost
    assert pacer.take(1.0)


def test_nv12_keeps_one_unacked_and_the_latest_pending() -> None:
    flow = ViewerFlow(nv12=True)
    big = 1920 * 1080 * 3 // 2
    assert flow.offer(frame(1, big, key=True), 0) is Verdict.SEND
    assert flow.offer(frame(2, big, key=True), 0) is Verdict.HOLD
    assert flow.offer(frame(3, big, key=True), 0) is Verdict.HOLD
    assert flow.dropped == 1
    pending = flow.ack(1, 1, 0)
    assert pending is not None and pending.sequence == 3
    assert flow.unacked_frames == 1
    assert flow.ack(1, 3, 0) is None


def test_handoff_overflow_skips_until_idr_and_nv12_keeps_latest() -> None:
    handoff = Handoff(max_frames=3)
    assert handoff.push(frame(1, key=True))
    assert handoff.push(frame(2)) and handoff.push(frame(3))
    assert not handoff.push(frame(4))  # full
    assert handoff.pop_all()[-1].sequence == 3
    assert not handoff.push(frame(5))  # room again, but dependent on a dropped frame
    assert handoff.push(frame(6, key=True))
    assert handoff.push(frame(7))
    nv12 = Handoff(nv12=True)
    for seq in range(5):
        nv12.push(frame(seq, key=True))
    assert [f.sequence for f in nv12.pop_all()] == [4] and nv12.dropped == 4


def test_handoff_byte_bound_and_idr_replacement() -> None:
    handoff = Handoff(max_bytes=3000)
    handoff.push(frame(1, 1000, key=True))
    handoff.push(frame(2, 1000))
    assert not handoff.push(frame(3, 1500))
    assert handoff.push(frame(4, 2500, key=True))  # an IDR supersedes what waits
    assert [f.sequence for f in handoff.pop_all()] == [4]


events = st.lists(
    st.one_of(
        st.tuples(st.just("frame"), st.integers(1, 600_000), st.booleans()),
        st.tuples(st.just("ack"), st.just(0), st.just(False)),
        st.tuples(st.just("keyframe"), st.just(0), st.just(False)),
        st.tuples(st.just("tick"), st.integers(0, 3000), st.just(False)),
    ),
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(events)
def test_flow_invariants(script: list[tuple[str, int, bool]]) -> None:
    """Never more than 8 unacked / 1 MiB (except one lone keyframe); deltas only after an IDR."""
    flow = ViewerFlow()
    now = 0.0
    seq = 0
    sent: list[OutFrame] = []
    decodable = False  # does the viewer hold a decodable chain?
    for kind, value, key in script:
        if kind == "frame":
            seq += 1
            item = frame(seq, value, key)
            verdict = flow.offer(item, now)
            if verdict is Verdict.SEND:
                sent.append(item)
                assert key or decodable, "a delta was sent after a gap without an IDR"
                decodable = True
            else:
                decodable = False
        elif kind == "ack" and sent:
            oldest = sent.pop(0)
            flow.ack(oldest.generation, oldest.sequence, now)
        elif kind == "keyframe":
            if flow.keyframe_requested(now):
                decodable = False
        elif kind == "tick":
            now += value / 1000
        assert flow.unacked_frames == len(sent) <= 8
        assert flow.unacked_bytes == sum(f.size for f in sent)
        if flow.unacked_bytes > MAX_UNACKED_BYTES:
            assert len(sent) == 1 and sent[0].keyframe


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300_000), st.booleans()), min_size=1, max_size=300))
def test_a_stalled_viewer_never_changes_what_a_fast_viewer_gets(
    frames: list[tuple[int, bool]],
) -> None:
    """Admission is per viewer: the acking viewer's verdicts ignore the stalled one."""
    fast, stalled, alone = ViewerFlow(), ViewerFlow(), ViewerFlow()
    for seq, (size, key) in enumerate(frames, 1):
        item = frame(seq, size, key)
        stalled.offer(item, 0)
        verdict = fast.offer(item, 0)
        assert verdict is alone.offer(item, 0)
        for flow in (fast, alone):
            if verdict is Verdict.SEND:
                flow.ack(1, seq, 0)
        assert stalled.unacked_frames <= 8
        assert stalled.unacked_bytes <= MAX_UNACKED_BYTES or stalled.unacked_frames == 1


@given(st.lists(st.tuples(st.integers(1, 400_000), st.booleans()), max_size=300))
def test_handoff_bounds(frames: list[tuple[int, bool]]) -> None:
    handoff = Handoff()
    skipping = False
    for seq, (size, key) in enumerate(frames, 1):
        accepted = handoff.push(frame(seq, size, key))
        if accepted and not key:
            assert not skipping
        skipping = (not accepted) or (skipping and not key)
        assert handoff.queued <= 60 and handoff.queued_bytes <= 8 * 1024 * 1024
        if seq % 7 == 0:
            handoff.pop_all()
