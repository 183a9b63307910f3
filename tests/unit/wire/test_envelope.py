"""Envelope decoding: typed errors for every kind of bad frame, forward compatibility."""

from __future__ import annotations

import msgspec
import pytest

from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.envelope import decode_envelope, decode_payload, encode_message, message_type
from tetherbed.wire.errors import WireError
from tetherbed.wire.limits import FRAME_LIMIT_BYTES
from tetherbed.wire.messages import (
    PAYLOAD_MODELS,
    Ack,
    FileRead,
    Hello,
    HelloAck,
    MessageType,
    SessionRevoked,
)


def frame(**fields: object) -> bytes:
    return msgspec.json.encode(fields)


def test_round_trip_keeps_every_field() -> None:
    data = encode_message(
        MessageType.ACK, "r1", Ack(ok=True), ts=12.5, version="1.1", pending_capacity=3
    )
    envelope = decode_envelope(data)
    assert (envelope.type, envelope.id, envelope.ts, envelope.version) == ("ACK", "r1", 12.5, "1.1")
    assert envelope.pending_capacity == 3
    assert decode_payload(envelope) == Ack(ok=True)


def test_payload_bytes_are_copied_untouched() -> None:
    raw = b'{"path":"a.txt", "weird":  [1,2,{"x":null}]}'
    data = b'{"type":"FILE_READ","id":"x","payload":' + raw + b"}"
    envelope = decode_envelope(data)
    relayed = encode_message("FILE_READ", "h1", envelope.payload, ts=1.0, version="1.1")
    assert raw in relayed


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"{not json", "malformed JSON"),
        (b"[]", "invalid envelope"),
        (b'{"id":"a"}', "type"),
        (b'{"type":7,"id":"a"}', "type"),
        (b'{"type":"PING","id":5}', "id"),
        (b'{"type":"PING","id":"a","ts":"yesterday"}', "ts"),
        (b'{"type":"PING","id":"a","pending_capacity":"many"}', "pending_capacity"),
    ],
)
def test_bad_envelopes_raise_invalid_message(data: bytes, fragment: str) -> None:
    with pytest.raises(WireError) as caught:
        decode_envelope(data)
    assert caught.value.code == ExtensionCode.INVALID_MESSAGE
    assert fragment in caught.value.message


def test_invalid_envelope_keeps_the_id_when_it_can() -> None:
    with pytest.raises(WireError) as caught:
        decode_envelope(b'{"type":"PING","id":"keep-me","ts":"x"}')
    assert caught.value.request_id == "keep-me"


def test_frame_over_16_mib_is_refused_before_parsing() -> None:
    data = b" " * (FRAME_LIMIT_BYTES + 1)
    with pytest.raises(WireError) as caught:
        decode_envelope(data)
    assert caught.value.code == ExtensionCode.FRAME_TOO_LARGE


def test_frame_of_exactly_16_mib_is_accepted() -> None:
    head = b'{"type":"PING","id":"a","payload":{},"pad":"'
    data = head + b"x" * (FRAME_LIMIT_BYTES - len(head) - 2) + b'"}'
    assert len(data) == FRAME_LIMIT_BYTES
    assert decode_envelope(data).type == "PING"


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({}, "path"),
        ({"path": 3}, "path"),
        ({"path": "a", "offset": -1}, "offset"),
        ({"path": "a", "encoding": "latin-1"}, "encoding"),
        ({"path": "a", "length": "all"}, "length"),
    ],
)
def test_missing_or_mistyped_payload_fields_name_the_field(payload: dict, where: str) -> None:
    envelope = decode_envelope(frame(type="FILE_READ", id="r9", payload=payload))
    with pytest.raises(WireError) as caught:
        decode_payload(envelope)
    assert caught.value.code == ExtensionCode.INVALID_MESSAGE
    assert where in caught.value.message
    assert caught.value.request_id == "r9"


def test_unknown_payload_fields_are_ignored() -> None:
    envelope = decode_envelope(
        frame(type="FILE_READ", id="r", payload={"path": "a", "future_field": {"x": 1}})
    )
    assert decode_payload(envelope) == FileRead(path="a")


def test_unknown_type_is_a_typed_error() -> None:
    envelope = decode_envelope(frame(type="TELEPORT", id="r", payload={}))
    with pytest.raises(WireError) as caught:
        message_type(envelope)
    assert caught.value.code == ExtensionCode.UNKNOWN_MESSAGE_TYPE
    assert caught.value.request_id == "r"


def test_unknown_revocation_reasons_are_tolerated() -> None:
    envelope = decode_envelope(
        frame(type="SESSION_REVOKED", id="s", payload={"reason": "solar_flare"})
    )
    assert decode_payload(envelope) == SessionRevoked(reason="solar_flare")


def test_hello_ack_limits_must_be_positive() -> None:
    base = {"session_id": None, "protocol_version": "1.1", "granted_capabilities": []}
    for field in ("max_file_size_bytes", "command_timeout_seconds", "max_concurrent"):
        envelope = decode_envelope(frame(type="HELLO_ACK", id="h", payload={**base, field: 0}))
        with pytest.raises(WireError):
            decode_payload(envelope)
    ack = decode_payload(decode_envelope(frame(type="HELLO_ACK", id="h", payload=base)))
    assert isinstance(ack, HelloAck)
    assert ack.max_concurrent == 4  # the spec's default when the platform omits it


def test_hello_example_from_the_spec_decodes() -> None:
    payload = {
        "shim_version": "0.1.0",
        "protocol_version": "1.1",
        "machine_id": "hostname-uuid4",
        "platform": "darwin",
        "arch": "arm64",
        "screen_resolution": [2560, 1440],
        "capabilities": ["shell", "files", "computer_use"],
        "allowed_root": None,
        "local_llm_models": ["llama3.2:3b"],
        "hardware_devices": [
            {"type": "serial", "port": "/dev/ttyUSB0", "desc": "Arduino Uno"},
            {"type": "usb", "vid": "2341", "pid": "0043", "desc": "Arduino Uno"},
        ],
    }
    hello = decode_payload(decode_envelope(frame(type="HELLO", id="h", payload=payload)))
    assert isinstance(hello, Hello)
    assert hello.hardware_devices[1].vid == "2341"
    assert msgspec.json.decode(msgspec.json.encode(hello.hardware_devices[0])) == {
        "type": "serial",
        "port": "/dev/ttyUSB0",
        "desc": "Arduino Uno",
    }


def test_every_message_type_has_a_model_that_decodes_its_minimal_payload() -> None:
    assert set(PAYLOAD_MODELS) == set(MessageType)


def test_ack_always_carries_ok() -> None:
    data = encode_message("ACK", "a", Ack(ok=True), ts=0.0, version="1.1")
    assert b'"payload":{"ok":true}' in data


def test_deeply_nested_json_is_invalid_message_with_the_id() -> None:
    """Before: msgspec's RecursionError escaped, and took the caller's handler with it."""
    deep = b"[" * 1000 + b"]" * 1000
    with pytest.raises(WireError) as refused:
        decode_envelope(b'{"type":"FILE_STAT","id":"deep","payload":' + deep + b"}")
    assert refused.value.code == ExtensionCode.INVALID_MESSAGE
    assert "nested" in refused.value.message
    assert refused.value.request_id == "deep"
    with pytest.raises(WireError) as refused:
        decode_envelope(b'{"payload":' + deep + b',"id":"first","type":"X"}')
    assert refused.value.request_id is None  # the id comes after the nesting


def test_deeply_nested_payload_fields_are_invalid_message() -> None:
    """Whichever stage meets the nesting (skipping the raw payload or decoding it)."""
    deep = b"[" * 1000 + b"]" * 1000
    data = b'{"type":"FILE_STAT","id":"q","payload":{"path":"a","x":' + deep + b"}}"
    with pytest.raises(WireError) as refused:
        decode_payload(decode_envelope(data))
    assert refused.value.code == ExtensionCode.INVALID_MESSAGE
    assert refused.value.request_id == "q"
