"""The adapter as a real process: envelope, limits, typed errors, concurrency, lifecycle."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.native.harness import NativeProcess

pytestmark = pytest.mark.xvfb

HELLO = {
    "protocol": "crossdesk-automation/1",
    "image_formats": ["image/png"],
    "action_completion": "submitted",
    "human_pause": True,
    "max_request_bytes": 65536,
    "max_response_bytes": 4194304,
    "operation_cache_entries": 128,
    "operation_cache_ms": 300000,
}


def test_hello_is_exactly_the_spec_example(start_native: Callable[..., NativeProcess]) -> None:
    native = start_native()
    native.send_raw(b'{"id":1,"method":"hello","protocol":"crossdesk-automation/1"}\n')
    line = native.wait(1)
    assert line == {"id": 1, "ok": True, "result": HELLO}
    assert list(line["result"]) == list(HELLO)


def test_hello_with_video_adds_the_unprefixed_capabilities(
    start_native: Callable[..., NativeProcess],
) -> None:
    result = start_native("--video-ws").result("hello", protocol="crossdesk-automation/1")
    assert result == {
        **HELLO,
        "video_transport": "loopback-websocket/1",
        "video_protocols": ["h264-annexb/1", "nv12/1"],
        "video_decoders": ["auto", "software"],
    }


def test_limits_and_typed_errors(start_native: Callable[..., NativeProcess]) -> None:
    native = start_native()
    cases: list[tuple[bytes, object, str]] = [
        (b"not json\n", None, "INVALID_REQUEST"),
        (b"[1,2]\n", None, "INVALID_REQUEST"),
        (b'{"id":-1,"method":"status"}\n', None, "INVALID_REQUEST"),
        (b'{"id":1.5,"method":"status"}\n', None, "INVALID_REQUEST"),
        (b'{"id":"7","method":"status"}\n', None, "INVALID_REQUEST"),
        (b'{"id":2,"method":"nope"}\n', 2, "UNKNOWN_METHOD"),
        (b'{"id":3,"method":"status","extra":1}\n', 3, "UNKNOWN_FIELD"),
        (b'{"id":4,"method":"hello","protocol":"crossdesk-automation/2"}\n', 4, None),
        (b'{"id":5,"method":"display","index":64}\n', 5, "INVALID_ARGUMENT"),
        (b'{"id":6,"method":"connect","device":"12345678","mode":"control","display":0}\n', 6,
         "INVALID_ARGUMENT"),
        (b'{"id":7,"method":"screenshot","after_frame_id":3}\n', 7, "INVALID_ARGUMENT"),
        (b'{"id":8,"method":"preview","max_edge":961}\n', 8, "INVALID_ARGUMENT"),
        (b'{"id":9,"method":"screenshot","timeout_ms":5001}\n', 9, "INVALID_ARGUMENT"),
        (b'{"id":10,"method":"status"}\n', 10, "ok"),
        (b'{"id":11,"method":"screenshot"}\n', 11, "NOT_CONNECTED"),
    ]  # fmt: skip
    for raw, rid, code in cases:
        native.send_raw(raw)
        response = native.wait(rid, timeout=5)
        if code == "ok":
            assert response["ok"], response
            continue
        assert response["ok"] is False, (raw, response)
        error = response["error"]
        assert set(error) >= {"code", "retryable", "side_effect_possible"}
        assert error["side_effect_possible"] is False
        assert error["code"] == (code or "UNSUPPORTED_PROTOCOL"), (raw, response)


def test_oversized_and_too_deep_requests(start_native: Callable[..., NativeProcess]) -> None:
    native = start_native()
    huge = b'{"id":1,"method":"status","pad":"' + b"x" * 70000 + b'"}\n'
    native.send_raw(huge)
    assert native.wait(None)["error"]["code"] == "REQUEST_TOO_LARGE"
    depth_33 = {"id": 2, "method": "status", "x": json.loads("[" * 32 + "]" * 32)}
    native.send_raw(json.dumps(depth_33).encode() + b"\n")
    assert native.wait(2)["error"]["code"] == "NESTING_TOO_DEEP"
    native.send_raw(b"[" * 5000 + b"]" * 5000 + b"\n")
    assert native.wait(None)["error"]["code"] == "NESTING_TOO_DEEP"
    depth_32 = {"id": 3, "method": "status", "x": json.loads("[" * 31 + "]" * 31)}
    native.send_raw(json.dumps(depth_32).encode() + b"\n")
    assert native.wait(3)["error"]["code"] == "UNKNOWN_FIELD"  # depth itself was fine
    # The process is still healthy after bad input.
    assert native.result("status")["state"] == "idle"


def test_wrong_password_is_an_auth_error_and_one_attempt_only(
    start_native: Callable[..., NativeProcess], device: tuple[Path, str, str]
) -> None:
    _, device_id, _ = device
    native = start_native(password="wrong!")
    response = native.call("connect", device=device_id, mode="control", display=0)
    assert response["error"]["code"] == "AUTH_FAILED"
    assert response["error"]["retryable"] is False
    status = native.result("status")
    assert status["state"] == "failed" and status["error"] == "AUTH_FAILED"
    again = native.call("connect", device=device_id, mode="control", display=0)
    assert again["error"]["code"] == "ALREADY_CONNECTED"
    assert b"wrong!" not in b"".join(native.lines)


def test_unknown_device(start_native: Callable[..., NativeProcess]) -> None:
    native = start_native()
    response = native.call("connect", device="000000000", mode="observe", display=0)
    assert response["error"]["code"] == "DEVICE_NOT_FOUND"


def test_connect_status_and_second_connect(
    connected: Callable[..., NativeProcess], device: tuple[Path, str, str]
) -> None:
    native = connected("--server", "rendezvous.example", "--port", "21114")
    status = native.result("status")
    assert status["state"] == "ready"
    assert status["transport_state"] == "connected"
    assert status["source_size"] == {"width": 1920, "height": 1080}
    assert status["control_allowed"] is True and status["human_paused"] is False
    assert status["displays"][0]["width"] == 1920
    assert status["server"] == {"host": "rendezvous.example", "port": 21114, "reached": "local"}
    assert status["video_output"]["viewers"] == 0
    assert status["quality"] == "high-frame-rate"  # the agent-mode default tier
    assert 0 <= status["frame_age_ms"] < 2000
    _, device_id, _ = device
    second = native.call("connect", device=device_id, mode="control", display=0)
    assert second["error"]["code"] == "ALREADY_CONNECTED"
    assert native.call("display", index=5)["error"]["code"] == "DISPLAY_NOT_FOUND"


def test_requests_complete_out_of_order(connected: Callable[..., NativeProcess]) -> None:
    native = connected()
    shot = native.result("screenshot", max_edge=64)
    frame_id, generation = shot["metadata"]["frame_id"], shot["metadata"]["generation"]
    # A still screen: this preview waits its whole timeout for a newer frame...
    slow = native.send(
        {
            "method": "preview",
            "after_frame_id": frame_id,
            "generation": generation,
            "timeout_ms": 1500,
        }
    )
    fast = native.send({"method": "status"})
    assert native.wait(fast)["ok"]
    assert not native.responses.get(slow)  # ...so status overtook it
    answer = native.wait(slow)["result"]
    assert answer["unchanged"] is True and answer["frame_id"] == frame_id
    assert answer["stale"] is False
    order = [json.loads(line)["id"] for line in native.lines]
    assert order.index(fast) < order.index(slow)


def test_cancel_a_waiting_request(connected: Callable[..., NativeProcess]) -> None:
    native = connected()
    shot = native.result("screenshot", max_edge=64)
    meta = shot["metadata"]
    waiting = native.send(
        {
            "method": "screenshot",
            "after_frame_id": meta["frame_id"],
            "generation": meta["generation"],
            "timeout_ms": 5000,
        }
    )
    time.sleep(0.2)
    assert native.result("cancel", request_id=waiting) == {"cancelled": True}
    assert native.wait(waiting, timeout=3)["error"]["code"] == "CANCELLED"
    assert native.result("cancel", request_id=waiting) == {"cancelled": False}


def test_screenshot_limits_and_metadata(connected: Callable[..., NativeProcess]) -> None:
    native = connected()
    shot = native.result("screenshot", region={"x": 100, "y": 50, "width": 400, "height": 300})
    meta = shot["metadata"]
    assert shot["mime_type"] == "image/png"
    assert meta["source_rect"] == {"x": 100, "y": 50, "width": 400, "height": 300}
    assert meta["image_size"] == {"width": 400, "height": 300}
    assert set(meta) == {
        "generation",
        "geometry_epoch",
        "frame_id",
        "display_index",
        "source_size",
        "source_rect",
        "image_size",
        "frame_age_ms",
        "observation_id",
    }
    small = native.result("screenshot", max_edge=64)["metadata"]
    assert max(small["image_size"].values()) == 64
    preview = native.result("preview", max_edge=100)
    assert "observation_id" not in preview["metadata"]
    outside = native.call("screenshot", region={"x": 1900, "y": 0, "width": 40, "height": 10})
    assert outside["error"]["code"] == "INVALID_ARGUMENT"
    no_region = native.call("preview", region={"x": 0, "y": 0, "width": 4, "height": 4})
    assert no_region["error"]["code"] == "UNKNOWN_FIELD"


def test_observe_mode_cannot_act_or_enable_control(connected: Callable[..., NativeProcess]) -> None:
    native = connected(mode="observe")
    obs = native.result("screenshot", max_edge=64)["metadata"]["observation_id"]
    response = native.call(
        "action", operation_id="o1", observation_id=obs, action={"type": "move", "x": 1, "y": 1}
    )
    assert response["error"] == {
        "code": "CONTROL_DENIED",
        "retryable": False,
        "side_effect_possible": False,
        "message": response["error"]["message"],
    }
    assert native.call("control", enabled=True)["error"]["code"] == "CONTROL_DENIED"


def test_pause_blocks_control_until_resume(connected: Callable[..., NativeProcess]) -> None:
    native = connected()
    obs = native.result("screenshot", max_edge=64)["metadata"]["observation_id"]
    assert native.result("viewer_control", operation="pause")["control_allowed"] is False
    assert native.call("control", enabled=True)["error"]["code"] == "HUMAN_PAUSED"
    move = {"type": "move", "x": 3, "y": 3}
    paused = native.call("action", operation_id="p1", observation_id=obs, action=move)
    assert paused["error"]["code"] == "HUMAN_PAUSED" and paused["error"]["retryable"] is True
    native.result("viewer_control", operation="resume")
    done = native.result("action", operation_id="p1", observation_id=obs, action=move)
    assert done["status"] == "submitted"
    native.result("control", enabled=False)
    denied = native.call("action", operation_id="p2", observation_id=obs, action=move)
    assert denied["error"]["code"] == "CONTROL_DENIED"


def test_only_protocol_responses_reach_stdout(connected: Callable[..., NativeProcess]) -> None:
    native = connected()
    native.result("screenshot", max_edge=64)
    native.result("exit")
    assert native.exit_code() == 0
    for line in native.lines:
        message = json.loads(line)
        assert set(message) in ({"id", "ok", "result"}, {"id", "ok", "error"})


def test_eof_disconnects_and_exits(connected: Callable[..., NativeProcess]) -> None:
    native = connected()
    native.close_stdin()
    assert native.exit_code() == 0


def test_sigterm_exits(connected: Callable[..., NativeProcess]) -> None:
    native = connected()
    os.kill(native.pid, signal.SIGTERM)
    assert native.exit_code() == 0


def test_missing_password_descriptor_content(
    start_native: Callable[..., NativeProcess], device: tuple[Path, str, str]
) -> None:
    _, device_id, _ = device
    native = start_native(use_default=False)
    response = native.call("connect", device=device_id, mode="observe", display=0)
    assert response["error"]["code"] == "PASSWORD_UNAVAILABLE"


def test_blocked_output_pipe_ends_the_process(connected: Callable[..., NativeProcess]) -> None:
    """Nobody reads stdout: 10 s without progress on the full pipe ends the process (code 3)."""
    native = connected()
    with native._cond:  # our reader thread blocks on this lock: stdout is not drained
        started = time.monotonic()
        try:
            for _ in range(200):
                native.send({"method": "screenshot"})
        except BrokenPipeError:
            pass
        code = native.exit_code(timeout=40)
        elapsed = time.monotonic() - started
    assert code == 3
    assert 9 <= elapsed <= 30
