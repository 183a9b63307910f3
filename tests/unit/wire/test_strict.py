"""The strict schema: exactly the spec's fields, checked against the lenient models."""

from __future__ import annotations

import json

import msgspec
import pytest

from tetherbed.wire import strict
from tetherbed.wire.messages import PAYLOAD_MODELS, MessageType, Reserved

RESERVED = {kind for kind, model in PAYLOAD_MODELS.items() if model is Reserved}


def _fields(model: type[msgspec.Struct]) -> set[str]:
    return set(model.__struct_fields__)


def test_every_defined_message_has_a_strict_model() -> None:
    assert set(strict.STRICT_MODELS) == set(MessageType) - RESERVED


@pytest.mark.parametrize("kind", sorted(strict.STRICT_MODELS), ids=str)
def test_strict_fields_are_a_subset_of_the_lenient_model(kind: MessageType) -> None:
    """Every field the strict model names is one the lenient model decodes too,
    so nothing the spec shows is lost on the way in."""
    lenient = PAYLOAD_MODELS[kind]
    assert _fields(strict.STRICT_MODELS[kind]) <= _fields(lenient)


# The spec's own examples (payloads), as the spec prints them.
SPEC_EXAMPLES = {
    MessageType.EXECUTE_COMMAND: {
        "command": "ls -la /tmp",
        "argv": None,
        "shell": "auto",
        "cwd": "/Users/alice/autogpt-workspace",
        "timeout_seconds": 30,
        "env": {"MY_VAR": "value"},
    },
    MessageType.FILE_READ: {
        "path": "/w/data.csv",
        "encoding": "utf-8",
        "format": "text",
        "offset": 0,
        "length": None,
    },
    MessageType.FILE_WRITE: {
        "path": "/w/output.txt",
        "content": "hello world\n",
        "encoding": "utf-8",
        "create_parents": True,
    },
    MessageType.FILE_LIST: {
        "path": "/w",
        "glob": "*.csv",
        "recursive": False,
        "include_hidden": False,
        "max_entries": 1000,
    },
    MessageType.FILE_CONTENTS: {
        "content": "col1,col2\n1,2\n",
        "encoding": "utf-8",
        "size_bytes": 16,
        "truncated": False,
    },
    MessageType.HELLO_ACK: {
        "session_id": None,
        "connection_id": None,
        "protocol_version": "1.1",
        "granted_capabilities": ["shell", "files"],
        "max_file_size_bytes": 10485760,
        "command_timeout_seconds": 30,
        "max_concurrent": 4,
    },
    MessageType.STATUS: {
        "in_flight": 1,
        "max_concurrent": 4,
        "queue_depth": 0,
        "audit_log_bytes": 12345,
        "uptime_seconds": 137.4,
    },
    MessageType.DIRECTORY_LIST_REQUEST: {"browse_id": None, "directory_ref": None},
    MessageType.PING: {},
}


@pytest.mark.parametrize("kind", sorted(SPEC_EXAMPLES), ids=str)
def test_the_spec_examples_pass(kind: MessageType) -> None:
    assert strict.accepts(kind, json.dumps(SPEC_EXAMPLES[kind]).encode())


@pytest.mark.parametrize(
    ("kind", "payload", "why"),
    [
        (MessageType.FILE_WRITE, {"path": "/a", "content": "x", "format": "text"}, "format"),
        (MessageType.EXECUTE_COMMAND, {"command": "ls", "env": None}, "env"),
        (MessageType.EXECUTE_COMMAND, {"command": "ls", "cwd": None}, "cwd"),
        (
            MessageType.FILE_CONTENTS,
            {**SPEC_EXAMPLES[MessageType.FILE_CONTENTS], "total_size_bytes": 16},
            "total_size_bytes",
        ),
        (MessageType.FILE_READ, {"path": "/a", "offset": "0"}, "offset"),
        (MessageType.PING, {"x": 1}, "x"),
    ],
)
def test_what_a_strict_peer_refuses(kind: MessageType, payload: dict, why: str) -> None:
    with pytest.raises(strict.StrictViolation, match=why):
        strict.check_payload(kind, json.dumps(payload).encode())


def _frame(payload: dict, **envelope: object) -> bytes:
    return json.dumps(
        {"type": "PING", "id": "a", "ts": 1.0, "version": "1.1", **envelope, "payload": payload}
    ).encode()


def test_frame_envelope_rules() -> None:
    strict.check_frame(_frame({}), from_shim=False)
    with pytest.raises(strict.StrictViolation, match="pending_capacity"):
        strict.check_frame(_frame({}, pending_capacity=1), from_shim=False)
    strict.check_frame(_frame({}, pending_capacity=None), from_shim=False)  # "or null"
    strict.check_frame(_frame({}, pending_capacity=1), from_shim=True)
    with pytest.raises(strict.StrictViolation, match="extra"):
        strict.check_frame(_frame({}, extra=1), from_shim=True)


def test_a_shim_error_must_use_a_spec_code() -> None:
    error = {"code": "INVALID_MESSAGE", "message": "m", "fatal": False}
    data = json.dumps({"type": "ERROR", "id": "a", "ts": 1.0, "payload": error}).encode()
    with pytest.raises(strict.StrictViolation, match="not one of the spec's"):
        strict.check_frame(data, from_shim=True)
    strict.check_frame(data, from_shim=False)  # the hub's own codes to its clients are its own
