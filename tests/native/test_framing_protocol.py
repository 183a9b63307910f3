"""JSON lines limits, strict argument parsing, and in-flight id tracking (no I/O)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tetherbed.agent.native.errors import Code, NativeError
from tetherbed.agent.native.framing import (
    MAX_REQUEST_BYTES,
    Line,
    LineFramer,
    Oversized,
    decode_line,
    nesting_depth,
)
from tetherbed.agent.native.protocol import RequestTracker, parse_request


def test_framer_splits_chunks_and_drops_oversized_lines() -> None:
    framer = LineFramer(limit=10)
    assert framer.feed(b"abc\nde") == [Line(b"abc")]
    assert framer.feed(b"f\n") == [Line(b"def")]
    events = framer.feed(b"0123456789X")
    assert events == [Oversized()]
    assert framer.feed(b"more garbage\nok\n") == [Line(b"ok")]
    assert framer.feed(b"0123456789\ntail") == [Line(b"0123456789")]
    assert framer.eof() == [Line(b"tail")]


@given(st.lists(st.binary(max_size=40), max_size=20), st.integers(1, 50))
def test_framer_matches_split_for_any_chunking(parts: list[bytes], cut: int) -> None:
    stream = b"\n".join(p.replace(b"\n", b"") for p in parts) + b"\n"
    framer = LineFramer(limit=30)
    events = []
    for i in range(0, len(stream), cut):
        events += framer.feed(stream[i : i + cut])
    expected = [Line(line) if len(line) <= 30 else Oversized() for line in stream.split(b"\n")[:-1]]
    assert events == expected


def test_decode_line_errors() -> None:
    with pytest.raises(NativeError) as info:
        decode_line(b"x" * (MAX_REQUEST_BYTES + 1))
    assert info.value.code is Code.REQUEST_TOO_LARGE
    for bad in (b"{", b"\xff", b"[]", b"1"):
        with pytest.raises(NativeError) as info:
            decode_line(bad)
        assert info.value.code is Code.INVALID_REQUEST
    deep = {"id": 4, "a": json.loads("[" * 32 + "]" * 32)}
    with pytest.raises(NativeError) as info:
        decode_line(json.dumps(deep).encode())
    assert info.value.code is Code.NESTING_TOO_DEEP and info.value.request_id == 4
    assert decode_line(json.dumps({"a": json.loads("[" * 31 + "]" * 31)}).encode())


def test_nesting_depth() -> None:
    assert nesting_depth(1) == 0
    assert nesting_depth({}) == 1
    assert nesting_depth({"a": [1, {"b": []}]}) == 4


def err(obj: dict) -> Code:
    with pytest.raises(NativeError) as info:
        parse_request(obj)
    return info.value.code


def test_parse_request_validation() -> None:
    assert err({"id": True, "method": "status"}) is Code.INVALID_REQUEST
    assert err({"method": "status"}) is Code.INVALID_REQUEST
    assert err({"id": 1}) is Code.INVALID_REQUEST
    assert err({"id": 1, "method": "frobnicate"}) is Code.UNKNOWN_METHOD
    assert err({"id": 1, "method": "exit", "now": True}) is Code.UNKNOWN_FIELD
    connect = {"id": 1, "method": "connect", "device": "123456789", "mode": "control", "display": 0}
    assert parse_request(connect).args["decode_path"] == "browser"
    assert err({**connect, "device": 123456789}) is Code.INVALID_ARGUMENT
    assert err({**connect, "mode": "admin"}) is Code.INVALID_ARGUMENT
    assert err({**connect, "display": 64}) is Code.INVALID_ARGUMENT
    assert err({**connect, "decoder": "gpu"}) is Code.INVALID_ARGUMENT
    assert err({**connect, "password": "x"}) is Code.UNKNOWN_FIELD
    shot = {"id": 2, "method": "screenshot"}
    assert err({**shot, "max_edge": 63}) is Code.INVALID_ARGUMENT
    assert err({**shot, "max_edge": 2049}) is Code.INVALID_ARGUMENT
    assert err({**shot, "region": {"x": 0, "y": 0, "width": 0, "height": 1}}) is (
        Code.INVALID_ARGUMENT
    )
    assert err({**shot, "region": {"x": 0, "y": 0, "width": 1, "height": 1, "z": 1}}) is (
        Code.UNKNOWN_FIELD
    )
    assert err({**shot, "generation": 1}) is Code.INVALID_ARGUMENT
    ok = parse_request({**shot, "after_frame_id": 3, "generation": 1, "timeout_ms": 0})
    assert ok.args["timeout_ms"] == 0
    video = {
        "id": 3,
        "method": "video_open",
        "ticket": "A" * 32,
        "view": "B" * 32,
        "view_generation": 1,
        "session": "C" * 32,
        "origin": "http://127.0.0.1:1",
    }
    assert parse_request(video).args["apps"] is None
    assert err({**video, "ticket": "A" * 31}) is Code.INVALID_ARGUMENT
    assert err({**video, "view": "+" * 32}) is Code.INVALID_ARGUMENT
    assert err({**video, "view_generation": 0}) is Code.INVALID_ARGUMENT


ACTION = {"id": 5, "method": "action", "operation_id": "op", "observation_id": "obs_1_1"}


@pytest.mark.parametrize(
    "action",
    [
        {"type": "move", "x": 1},
        {"type": "move", "x": "1", "y": 1},
        {"type": "move", "x": float("nan"), "y": 1},
        {"type": "click", "x": 1, "y": 1, "button": "back"},
        {"type": "scroll", "x": 1, "y": 1, "direction": "in"},
        {"type": "scroll", "x": 1, "y": 1, "direction": "up", "ticks": 0},
        {"type": "drag", "path": [{"x": 1, "y": 1}] * 129},
        {"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 1}]},
        {"type": "drag", "path": [{"x": 1, "y": 1}] * 2, "duration_ms": 2001},
        {"type": "key_press", "key": ""},
        {"type": "key_press", "key": " a"},
        {"type": "hotkey", "keys": ["a", "b", "c", "d", "e", "f", "g"]},
        {"type": "hotkey", "keys": ["Ctrl", "ctrl"]},
        {"type": "type_text", "text": "x" * 16385},
        {"type": "type_text", "text": "\ud800"},
        {"type": "type_text"},
    ],
)
def test_malformed_actions(action: dict) -> None:
    assert err({**ACTION, "action": action}) is Code.INVALID_ARGUMENT


def test_action_unknown_field_and_valid_forms() -> None:
    assert err({**ACTION, "action": {"type": "move", "x": 1, "y": 2, "z": 3}}) is (
        Code.UNKNOWN_FIELD
    )
    drag = parse_request(
        {**ACTION, "action": {"type": "drag", "path": [{"x": 0, "y": 0}, {"x": 5, "y": 5}]}}
    )
    assert drag.action is not None and drag.raw_action is not None
    text = parse_request({**ACTION, "action": {"type": "type_text", "text": "é" * 8192}})
    assert text.action is not None


def test_tracker_refuses_live_duplicate_ids() -> None:
    tracker = RequestTracker()
    tracker.admit({"id": 0, "method": "status"})
    with pytest.raises(NativeError) as info:
        tracker.admit({"id": 0, "method": "status"})
    assert info.value.code is Code.DUPLICATE_REQUEST_ID
    tracker.finish(0)
    tracker.admit({"id": 0, "method": "status"})
