"""The agent's sans-I/O protocol core: handshake, admission, capacity, STATUS, revocation."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest

from tetherbed.agent.actions import Close, Log, Ready, Revoked, Run, Send
from tetherbed.agent.config import Limits
from tetherbed.agent.exit_codes import AgentExit
from tetherbed.agent.protocol import AgentProtocol, State
from tetherbed.runtime.clock import ManualClock
from tetherbed.wire.messages import Ack, Hello

SESSION = "sess-1"


def make(
    *, session_id: str | None = SESSION, caps: list[str] | None = None, max_concurrent: int = 2
) -> tuple[AgentProtocol, ManualClock]:
    clock = ManualClock()
    counter = itertools.count()
    hello = Hello(
        shim_version="0.1.0",
        protocol_version="1.1",
        machine_id="m1",
        platform="linux",
        arch="x86_64",
        capabilities=caps if caps is not None else ["files", "shell"],
    )
    proto = AgentProtocol(
        hello=hello,
        local_limits=Limits(max_concurrent=max_concurrent),
        clock=clock,
        new_id=lambda: f"id{next(counter)}",
        session_id=session_id,
    )
    return proto, clock


def decoded(action: Any) -> dict:
    assert isinstance(action, Send), action
    return msgspec.json.decode(action.data)


def ack(proto: AgentProtocol, **overrides: Any) -> list:
    hello_id = decoded(proto.start())["id"]
    payload = {
        "session_id": SESSION,
        "protocol_version": "1.1",
        "granted_capabilities": ["files", "shell"],
        "max_concurrent": 8,
    }
    payload.update(overrides.pop("payload", {}))
    frame = {"type": "HELLO_ACK", "id": hello_id, "version": "1.1", "payload": payload}
    frame.update(overrides)
    return proto.receive(msgspec.json.encode(frame))


def request(proto: AgentProtocol, kind: str, rid: str, **payload: Any) -> list:
    frame = {"type": kind, "id": rid, "ts": 1.0, "version": "1.1", "payload": payload}
    return proto.receive(msgspec.json.encode(frame))


def open_proto(**kwargs: Any) -> tuple[AgentProtocol, ManualClock]:
    proto, clock = make(**kwargs)
    ready, _status = ack(proto)
    assert isinstance(ready, Ready)
    return proto, clock


def test_hello_is_the_first_frame() -> None:
    proto, _ = make()
    hello = decoded(proto.start())
    assert hello["type"] == "HELLO"
    assert hello["version"] == "1.1"
    assert hello["payload"]["protocol_version"] == "1.1"
    assert "pending_capacity" not in hello  # not on shim-internal frames


def test_ack_narrows_limits_to_the_lower_value() -> None:
    proto, _ = make(max_concurrent=2)
    ready, status = ack(proto, payload={"max_concurrent": 8, "max_file_size_bytes": 1000})
    assert isinstance(ready, Ready)
    # the immediate STATUS tells the hub the effective limit
    assert decoded(status)["payload"]["max_concurrent"] == 2
    assert proto.limits.max_concurrent == 2  # local policy wins
    assert proto.limits.max_file_size_bytes == 1000  # platform lowered it
    assert proto.state is State.OPEN


@pytest.mark.parametrize(
    "overrides",
    [
        {"id": "not-the-hello-id"},
        {"payload": {"session_id": "other-session"}},
        {"payload": {"granted_capabilities": ["files", "computer_use"]}},
        {"payload": {"max_concurrent": 0}},
    ],
)
def test_bad_ack_fails_terminally(overrides: dict) -> None:
    proto, _ = make()
    (close,) = ack(proto, **overrides)
    assert isinstance(close, Close)
    assert close.fatal and close.exit_code == AgentExit.HANDSHAKE_INVALID
    assert proto.state is State.CLOSED


def test_major_mismatch_stops_without_reconnecting() -> None:
    proto, _ = make()
    (close,) = ack(proto, payload={"protocol_version": "2.0"})
    assert isinstance(close, Close)
    assert close.code == 4426 and close.fatal
    assert close.exit_code == AgentExit.PROTOCOL_VERSION_MISMATCH


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"session_id": None, "connection_id": None}, "connection_id"),
        ({"session_id": None, "connection_id": "c1", "protocol_version": "1.0"}, "1.1"),
        ({"session_id": None, "connection_id": "c1", "granted_capabilities": []}, "directory"),
        ({"session_id": "s", "connection_id": "c1"}, "session"),
    ],
)
def test_control_ack_requirements(payload: dict, problem: str) -> None:
    proto, _ = make(session_id=None, caps=["directory_browse"])
    full = {"granted_capabilities": ["directory_browse"], **payload}
    (close,) = ack(proto, payload=full)
    assert isinstance(close, Close) and close.fatal
    assert problem in close.reason


def test_control_ack_accepted() -> None:
    proto, _ = make(session_id=None, caps=["directory_browse"])
    payload = {
        "session_id": None,
        "connection_id": "c1",
        "granted_capabilities": ["directory_browse"],
    }
    ready, _status = ack(proto, payload=payload)
    assert isinstance(ready, Ready)


def test_ping_gets_pong_with_the_same_id() -> None:
    proto, _ = open_proto()
    (pong,) = request(proto, "PING", "ping-7")
    frame = decoded(pong)
    assert (frame["type"], frame["id"]) == ("PONG", "ping-7")


def test_admitted_request_runs_and_answers_with_pending_capacity() -> None:
    proto, _ = open_proto(max_concurrent=2)
    (run,) = request(proto, "FILE_READ", "r1", path="a.txt")
    assert isinstance(run, Run) and run.request_id == "r1"
    assert proto.free_slots == 1
    (answer,) = proto.complete("r1", "ACK", Ack(ok=True))
    frame = decoded(answer)
    assert frame["id"] == "r1"
    assert frame["pending_capacity"] == 2  # free slots after this response


def test_request_beyond_max_concurrent_is_overloaded_at_once() -> None:
    proto, _ = open_proto(max_concurrent=2)
    request(proto, "FILE_READ", "r1", path="a")
    request(proto, "FILE_READ", "r2", path="b")
    (refusal,) = request(proto, "FILE_READ", "r3", path="c")
    frame = decoded(refusal)
    assert frame["type"] == "ERROR" and frame["id"] == "r3"
    assert frame["payload"]["code"] == "SHIM_OVERLOADED"
    assert frame["pending_capacity"] == 0


def test_status_follows_the_response_on_the_full_to_not_full_edge() -> None:
    proto, _ = open_proto(max_concurrent=2)
    request(proto, "FILE_READ", "r1", path="a")
    request(proto, "FILE_READ", "r2", path="b")
    answer, status = proto.complete("r1", "ACK", Ack(ok=True))
    assert decoded(answer)["pending_capacity"] == 1
    status_frame = decoded(status)
    assert status_frame["type"] == "STATUS"
    assert status_frame["pending_capacity"] == 1
    assert status_frame["payload"]["in_flight"] == 1
    assert status_frame["payload"]["max_concurrent"] == 2
    # not full before the second completion: no STATUS this time
    assert len(proto.complete("r2", "ACK", Ack(ok=True))) == 1


def test_periodic_status_every_interval() -> None:
    proto, clock = open_proto()
    assert proto.on_timer() == []
    deadline = proto.next_deadline()
    assert deadline == pytest.approx(clock.monotonic() + 30.0)
    clock.advance(30.0)
    (status,) = proto.on_timer()
    assert decoded(status)["type"] == "STATUS"
    assert proto.next_deadline() == pytest.approx(clock.monotonic() + 30.0)


@pytest.mark.parametrize(
    ("frame", "code", "reason_code"),
    [
        (b"{oops", "INTERNAL_ERROR", "INVALID_MESSAGE"),
        (b'{"type":"WARP","id":"x","payload":{}}', "FEATURE_NOT_SUPPORTED", "UNKNOWN_MESSAGE_TYPE"),
        (
            b'{"type":"FILE_READ","id":"x","payload":{"path":1}}',
            "INTERNAL_ERROR",
            "INVALID_MESSAGE",
        ),
        (b'{"type":"SCREENSHOT_REQUEST","id":"x","payload":{}}', "CAPABILITY_NOT_GRANTED", None),
        (b'{"type":"START_RECORDING","id":"x","payload":{}}', "CAPABILITY_NOT_GRANTED", None),
        (
            b'{"type":"DIRECTORY_LIST_REQUEST","id":"x","payload":{}}',
            "FEATURE_NOT_SUPPORTED",
            "MESSAGE_NOT_ALLOWED",
        ),
        (
            b'{"type":"COMMAND_RESULT","id":"x","payload":{}}',
            "FEATURE_NOT_SUPPORTED",
            "MESSAGE_NOT_ALLOWED",
        ),
    ],
)
def test_bad_frames_get_typed_errors_and_never_crash(
    frame: bytes, code: str, reason_code: str | None
) -> None:
    """Typed with a spec code; the precise reason rides in `details.reason_code`."""
    proto, _ = open_proto()
    (answer,) = proto.receive(frame)
    decoded_answer = decoded(answer)
    assert decoded_answer["type"] == "ERROR"
    assert decoded_answer["payload"]["code"] == code
    assert decoded_answer["payload"].get("details", {}).get("reason_code") == reason_code
    assert proto.state is State.OPEN
    assert not proto.in_flight


def test_shell_not_granted_is_refused() -> None:
    proto, _ = make()
    ack(proto, payload={"granted_capabilities": ["files"]})
    (answer,) = request(proto, "EXECUTE_COMMAND", "c1", command="true")
    assert decoded(answer)["payload"]["code"] == "CAPABILITY_NOT_GRANTED"


def test_duplicate_in_flight_id_is_refused() -> None:
    proto, _ = open_proto()
    request(proto, "FILE_READ", "same", path="a")
    (answer,) = request(proto, "FILE_READ", "same", path="b")
    payload = decoded(answer)["payload"]
    assert (payload["code"], payload["details"]["reason_code"]) == (
        "INTERNAL_ERROR",
        "DUPLICATE_REQUEST_ID",
    )


def test_frame_with_another_major_is_dropped() -> None:
    proto, _ = open_proto()
    frame = msgspec.json.encode(
        {"type": "FILE_READ", "id": "r", "version": "2.0", "payload": {"path": "a"}}
    )
    (log,) = proto.receive(frame)
    assert isinstance(log, Log) and log.level == "error"
    assert not proto.in_flight


def test_session_revoked_closes_4428_and_sends_nothing_more() -> None:
    proto, _ = open_proto()
    request(proto, "FILE_READ", "r1", path="a")
    frame = {
        "type": "SESSION_REVOKED",
        "id": "s1",
        "payload": {"reason": "another_shim_connected", "new_shim_machine_id": "m2"},
    }
    revoked, close = proto.receive(msgspec.json.encode(frame))
    assert isinstance(revoked, Revoked) and revoked.new_shim_machine_id == "m2"
    assert isinstance(close, Close) and close.code == 4428 and close.fatal
    assert close.exit_code == AgentExit.SESSION_REVOKED
    assert proto.complete("r1", "ACK", Ack(ok=True)) == []
    assert request(proto, "PING", "p") == []
