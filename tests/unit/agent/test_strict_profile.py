"""The strict profile (`--strict-wire`): what the public reference shim drops, dropped unanswered.

By default the agent is lenient in what it accepts (unknown fields are ignored)
and answers every request. The strict profile imitates a known public
implementation instead: a frame its strict models would refuse — a field the
spec does not name, a value of the wrong type, an unknown type, malformed JSON —
gets no answer at all. It exists to test platforms against such peers.
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest

from tetherbed.agent.actions import Close, Log, Ready, Run, Send
from tetherbed.agent.config import Limits
from tetherbed.agent.exit_codes import AgentExit
from tetherbed.agent.protocol import AgentProtocol, State
from tetherbed.runtime.clock import ManualClock
from tetherbed.wire.messages import Hello

SESSION = "sess-1"


def make(*, strict_wire: bool) -> AgentProtocol:
    counter = itertools.count()
    hello = Hello(
        shim_version="0.1.0",
        protocol_version="1.1",
        machine_id="m1",
        platform="linux",
        arch="x86_64",
        capabilities=["files", "shell"],
    )
    return AgentProtocol(
        hello=hello,
        local_limits=Limits(),
        clock=ManualClock(),
        new_id=lambda: f"id{next(counter)}",
        session_id=SESSION,
        strict_wire=strict_wire,
    )


def frame(kind: str, rid: str | None, payload: dict[str, Any], **envelope: Any) -> bytes:
    return msgspec.json.encode(
        {"type": kind, "id": rid, "ts": 1.0, "version": "1.1", **envelope, "payload": payload}
    )


def handshake(proto: AgentProtocol, **payload: Any) -> list:
    hello_id = msgspec.json.decode(proto.start().data)["id"]
    ack = {
        "session_id": SESSION,
        "protocol_version": "1.1",
        "granted_capabilities": ["files", "shell"],
        **payload,
    }
    return proto.receive(frame("HELLO_ACK", hello_id, ack))


def opened(*, strict_wire: bool) -> AgentProtocol:
    proto = make(strict_wire=strict_wire)
    assert isinstance(handshake(proto)[0], Ready)
    return proto


REFUSED = [
    pytest.param(frame("FILE_STAT", "r1", {"path": "/w", "zzz": 1}), id="unknown-field"),
    pytest.param(
        frame("FILE_WRITE", "r1", {"path": "/w", "content": "x", "format": "text"}),
        id="format-in-write",
    ),
    pytest.param(frame("EXECUTE_COMMAND", "r1", {"command": "ls", "env": None}), id="env-null"),
    pytest.param(frame("FILE_READ", "r1", {"path": "/w", "offset": "0"}), id="wrong-type"),
    pytest.param(frame("FILE_STAT", "r1", {"path": "/w"}, trace="x"), id="unknown-envelope-field"),
    pytest.param(frame("TELEPORT", "r1", {}), id="unknown-type"),
    pytest.param(frame("PING", "r1", {"x": 1}), id="ping-with-a-field"),
    pytest.param(b"{not json", id="malformed"),
]


@pytest.mark.parametrize("data", REFUSED)
def test_the_strict_profile_drops_without_an_answer(data: bytes) -> None:
    proto = opened(strict_wire=True)
    actions = proto.receive(data)
    assert [type(a) for a in actions] == [Log], actions
    assert "strict profile" in actions[0].message
    assert not proto.in_flight and proto.state is State.OPEN


@pytest.mark.parametrize("data", REFUSED)
def test_the_default_profile_answers_the_same_frames(data: bytes) -> None:
    """The spec: every request gets a response with the same id."""
    proto = opened(strict_wire=False)
    (action,) = proto.receive(data)
    assert isinstance(action, Send | Run), action


def test_what_the_spec_shows_is_served_under_the_strict_profile() -> None:
    proto = opened(strict_wire=True)
    (run,) = proto.receive(
        frame(
            "FILE_READ",
            "r1",
            {"path": "/w/a", "encoding": "utf-8", "format": "text", "offset": 0, "length": None},
        )
    )
    assert isinstance(run, Run)
    (pong,) = proto.receive(frame("PING", "p1", {}))
    assert msgspec.json.decode(pong.data)["type"] == "PONG"
    # "omitted (or null) on platform-to-shim requests"
    (run,) = proto.receive(frame("FILE_STAT", "r2", {"path": "/w"}, pending_capacity=None))
    assert isinstance(run, Run)


def test_a_hello_ack_a_strict_peer_refuses_ends_the_handshake() -> None:
    proto = make(strict_wire=True)
    (close,) = handshake(proto, relay_hint="x")
    assert isinstance(close, Close) and close.exit_code == AgentExit.HANDSHAKE_INVALID
    assert "relay_hint" in close.reason
    lenient = make(strict_wire=False)
    assert isinstance(handshake(lenient, relay_hint="x")[0], Ready)


def test_other_frames_before_the_ack_are_only_dropped() -> None:
    proto = make(strict_wire=True)
    proto.start()
    (log,) = proto.receive(frame("FILE_STAT", "r1", {"path": "/w", "zzz": 1}))
    assert isinstance(log, Log) and proto.state is State.AWAITING_ACK
