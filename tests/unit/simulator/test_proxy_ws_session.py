"""The sans-I/O WebSocket stage: handshake sniffing, rules, close injection."""

from __future__ import annotations

import json
import random

import pytest

from tetherbed.simulator.proxy import errors
from tetherbed.simulator.proxy.streams import DOWNSTREAM, UPSTREAM
from tetherbed.simulator.proxy.ws.frames import (
    OP_CLOSE,
    OP_CONTINUATION,
    OP_PING,
    OP_TEXT,
    FrameParser,
    build_frame,
    close_payload,
    parse_close_payload,
)
from tetherbed.simulator.proxy.ws.rules import MessageRule, RuleBook
from tetherbed.simulator.proxy.ws.session import CallAt, EndConnection, Send, SendEof, WsSession

REQUEST = (
    b"GET /ws/local-executor HTTP/1.1\r\nHost: hub\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Sec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n"
)
RESPONSE = (
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
)


def client_frame(kind: str, **fields: object) -> bytes:
    body = json.dumps({"type": kind, "id": fields.get("id", "1")}).encode()
    return build_frame(OP_TEXT, body, mask=b"\x11\x22\x33\x44").raw


def server_frame(kind: str) -> bytes:
    return build_frame(OP_TEXT, json.dumps({"type": kind}).encode()).raw


def sent(actions: list, stream: str) -> bytes:
    return b"".join(a.data for a in actions if isinstance(a, Send) and a.stream == stream)


def types(data: bytes, masked: bool) -> list[str]:
    out = []
    for frame in FrameParser(masked=masked).feed(data):
        if frame.opcode == OP_TEXT:
            out.append(json.loads(frame.payload)["type"])
        else:
            out.append(f"op{frame.opcode}")
    return out


@pytest.fixture
def rules() -> RuleBook:
    return RuleBook()


def upgraded(rules: RuleBook, **options: object) -> WsSession:
    session = WsSession(rules, random.Random(1), **options)
    actions = session.receive(UPSTREAM, REQUEST, 0.0)
    assert b"Sec-WebSocket-Extensions" not in sent(actions, UPSTREAM)
    actions = session.receive(DOWNSTREAM, RESPONSE, 0.0)
    assert sent(actions, DOWNSTREAM) == RESPONSE
    assert session.is_websocket
    return session


def test_without_rules_frames_pass_byte_for_byte(rules):
    session = upgraded(rules)
    wire = client_frame("HELLO") + client_frame("PONG")
    assert sent(session.receive(UPSTREAM, wire[:5], 0), UPSTREAM) == b""
    assert sent(session.receive(UPSTREAM, wire[5:], 0), UPSTREAM) == wire


def test_client_frames_sent_before_the_101_are_held_then_parsed(rules):
    rules.add(MessageRule("drop", type="PONG"))
    session = WsSession(rules, random.Random(1))
    session.receive(UPSTREAM, REQUEST + client_frame("PONG") + client_frame("A"), 0)
    actions = session.receive(DOWNSTREAM, RESPONSE, 0)
    assert types(sent(actions, UPSTREAM), masked=True) == ["A"]


def test_extensions_are_kept_when_asked(rules):
    session = WsSession(rules, random.Random(1), strip_extensions=False)
    assert sent(session.receive(UPSTREAM, REQUEST, 0), UPSTREAM) == REQUEST


def test_non_websocket_traffic_passes_untouched(rules):
    rules.add(MessageRule("drop"))
    session = WsSession(rules, random.Random(1))
    request = b"GET /healthz HTTP/1.1\r\nHost: hub\r\n\r\n"
    assert sent(session.receive(UPSTREAM, request, 0), UPSTREAM) == request
    assert sent(session.receive(DOWNSTREAM, b"\x81\x00", 0), DOWNSTREAM) == b"\x81\x00"
    binary = WsSession(rules, random.Random(1))
    assert sent(binary.receive(UPSTREAM, b"\x00\x01binary", 0), UPSTREAM) == b"\x00\x01binary"


def test_refused_upgrade_passes_everything_raw(rules):
    session = WsSession(rules, random.Random(1))
    session.receive(UPSTREAM, REQUEST, 0)
    refusal = b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"
    assert sent(session.receive(DOWNSTREAM, refusal, 0), DOWNSTREAM) == refusal
    assert not session.is_websocket


def test_drop_by_type_and_count(rules):
    rules.add(MessageRule("drop", stream="upstream", type="PONG", count=2))
    session = upgraded(rules)
    wire = b"".join(client_frame(t) for t in ["PONG", "A", "PONG", "PONG", "B"])
    assert types(sent(session.receive(UPSTREAM, wire, 0), UPSTREAM), True) == ["A", "PONG", "B"]
    assert len(rules) == 0  # used up


def test_rules_match_only_their_direction(rules):
    rules.add(MessageRule("drop", stream="downstream", type="PONG"))
    session = upgraded(rules)
    assert types(sent(session.receive(UPSTREAM, client_frame("PONG"), 0), UPSTREAM), True) == [
        "PONG"
    ]
    assert sent(session.receive(DOWNSTREAM, server_frame("PONG"), 0), DOWNSTREAM) == b""


def test_delay_returns_a_timer_and_later_messages_overtake(rules):
    rules.add(MessageRule("delay", stream="downstream", type="FILE_CONTENTS", delay=2000))
    session = upgraded(rules)
    actions = session.receive(DOWNSTREAM, server_frame("FILE_CONTENTS") + server_frame("ACK"), 5)
    (timer,) = [a for a in actions if isinstance(a, CallAt)]
    assert timer.when == pytest.approx(7.0)
    assert types(sent(actions, DOWNSTREAM), False) == ["ACK"]
    later = session.timer_fired(timer.token, 7.0)
    assert types(sent(later, DOWNSTREAM), False) == ["FILE_CONTENTS"]


def test_eof_waits_for_delayed_messages(rules):
    rules.add(MessageRule("delay", type="A", delay=100))
    session = upgraded(rules)
    (timer,) = [
        a for a in session.receive(DOWNSTREAM, server_frame("A"), 0) if isinstance(a, CallAt)
    ]
    assert not any(isinstance(a, SendEof) for a in session.receive_eof(DOWNSTREAM, 0))
    later = session.timer_fired(timer.token, 0.1)
    assert types(sent(later, DOWNSTREAM), False) == ["A"]
    assert isinstance(later[-1], SendEof)


def test_duplicate_remasks_the_copy(rules):
    rules.add(MessageRule("duplicate", stream="upstream", type="EXECUTE_COMMAND", count=1))
    session = upgraded(rules)
    original = client_frame("EXECUTE_COMMAND")
    out = sent(session.receive(UPSTREAM, original + client_frame("EXECUTE_COMMAND"), 0), UPSTREAM)
    frames = FrameParser(masked=True).feed(out)
    assert [f.payload for f in frames] == [frames[0].payload] * 3
    assert frames[0].raw == original
    assert frames[1].raw != original and frames[1].mask is not None


def test_duplicate_of_a_fragmented_message_keeps_its_fragments(rules):
    rules.add(MessageRule("duplicate", type="X"))
    session = upgraded(rules)
    body = b'{"type":"X","data":"' + b"y" * 300 + b'"}'
    wire = (
        build_frame(OP_TEXT, body[:100], fin=False).raw
        + build_frame(OP_PING, b"p").raw
        + build_frame(OP_CONTINUATION, body[100:]).raw
    )
    out = sent(session.receive(DOWNSTREAM, wire, 0), DOWNSTREAM)
    frames = FrameParser(masked=False).feed(out)
    assert [f.opcode for f in frames] == [OP_PING, OP_TEXT, OP_CONTINUATION] * 1 + [
        OP_TEXT,
        OP_CONTINUATION,
    ]
    assert b"".join(f.payload for f in frames[1:3]) == body
    assert b"".join(f.payload for f in frames[3:]) == body


def test_reorder_swaps_with_the_next_data_message_not_a_control_frame(rules):
    rules.add(MessageRule("reorder", stream="upstream", type="A", count=1))
    session = upgraded(rules)
    ping = build_frame(OP_PING, b"", mask=b"abcd").raw
    wire = client_frame("A") + ping + client_frame("B") + client_frame("C")
    assert types(sent(session.receive(UPSTREAM, wire, 0), UPSTREAM), True) == [
        "op9", "B", "A", "C",
    ]  # fmt: skip


def test_reorder_max_hold_releases_alone(rules):
    rules.add(MessageRule("reorder", type="A", max_hold=50))
    session = upgraded(rules)
    actions = session.receive(DOWNSTREAM, server_frame("A"), 0)
    (timer,) = [a for a in actions if isinstance(a, CallAt)]
    assert types(sent(session.timer_fired(timer.token, 0.05), DOWNSTREAM), False) == ["A"]


def test_probability_uses_the_injected_random(rules):
    rules.add(MessageRule("drop", type="A", probability=0.5))
    wire = b"".join(server_frame("A") for _ in range(40))

    def kept(seed: int) -> int:
        session = WsSession(rules, random.Random(seed))
        session.receive(UPSTREAM, REQUEST, 0)
        session.receive(DOWNSTREAM, RESPONSE, 0)
        return len(types(sent(session.receive(DOWNSTREAM, wire, 0), DOWNSTREAM), False))

    assert kept(3) == kept(3)
    assert 5 < kept(3) < 35


def test_inject_close_toward_client_plays_the_closing_handshake(rules):
    session = upgraded(rules, close_timeout=2.0)
    actions = session.inject_close("client", 4429, "too many", 1.0)
    (frame,) = FrameParser(masked=False).feed(sent(actions, DOWNSTREAM))
    assert frame.opcode == OP_CLOSE
    assert parse_close_payload(frame.payload) == (4429, "too many")
    assert sent(actions, UPSTREAM) == b""
    # Nothing crosses any more, and the client's reply is swallowed.
    assert session.receive(DOWNSTREAM, server_frame("A"), 1.1) == []
    assert session.receive(UPSTREAM, client_frame("B"), 1.1) == []
    reply = build_frame(OP_CLOSE, close_payload(4429), mask=b"abcd").raw
    assert session.receive(UPSTREAM, reply, 1.2) == [EndConnection("closing handshake complete")]


def test_inject_close_toward_server_masks_and_times_out(rules):
    session = upgraded(rules)
    actions = session.inject_close("server", 1001, "", 0.0)
    (frame,) = FrameParser(masked=True).feed(sent(actions, UPSTREAM))
    assert parse_close_payload(frame.payload)[0] == 1001
    (timer,) = [a for a in actions if isinstance(a, CallAt)]
    assert isinstance(session.timer_fired(timer.token, 2.0)[0], EndConnection)


def test_close_rule_drops_the_trigger_and_closes(rules):
    rules.add(MessageRule("close", stream="upstream", type="HELLO", code=4429, toward="client"))
    session = upgraded(rules)
    actions = session.receive(UPSTREAM, client_frame("HELLO"), 0)
    assert sent(actions, UPSTREAM) == b""
    (frame,) = FrameParser(masked=False).feed(sent(actions, DOWNSTREAM))
    assert parse_close_payload(frame.payload)[0] == 4429


def test_invalid_framing_falls_back_to_raw(rules):
    rules.add(MessageRule("drop", type="A"))
    session = upgraded(rules)
    garbage = bytes([0x83, 0x00, 0xFF])
    out = sent(session.receive(DOWNSTREAM, server_frame("A") + garbage, 0), DOWNSTREAM)
    assert out == garbage
    assert sent(session.receive(DOWNSTREAM, server_frame("A"), 0), DOWNSTREAM) == server_frame("A")
    assert not session.is_websocket
    assert session.inject_close("client", 4000, "", 0) == []


@pytest.mark.parametrize(
    "body",
    [
        {"action": "explode"},
        {"action": "drop", "stream": "sideways"},
        {"action": "drop", "count": 0},
        {"action": "close", "code": 99},
        {"action": "drop", "unknown": 1, "delay": "soon"},
        {"stream": "upstream"},
    ],
)
def test_rule_validation(body):
    with pytest.raises(errors.BadRequest):
        MessageRule.from_json(body)
