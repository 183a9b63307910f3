"""Redaction: the audit details of every request type leak no secret, yet say what ran."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest

from tetherbed.agent.audit.log import canonical_json
from tetherbed.agent.audit.redaction import (
    MAX_TEXT_CHARS,
    audit_details,
    connect_details,
    disconnect_details,
    fatal_close_details,
    safe_url,
    session_revoked_details,
)
from tetherbed.wire.catalog import CONTROL_REQUESTS, DATA_REQUESTS
from tetherbed.wire.messages import PAYLOAD_MODELS, MessageType

T = MessageType

#: Top-level payload fields whose strings SHOULD be recorded; every other
#: string, at any depth, must stay out of the log. Written here rather than
#: read from the module so that widening the whitelist is a visible decision.
ALLOWED: dict[MessageType, frozenset[str]] = {
    T.EXECUTE_COMMAND: frozenset({"command", "argv", "cwd"}),
    T.FILE_READ: frozenset({"path"}),
    T.FILE_WRITE: frozenset({"path"}),
    T.FILE_STAT: frozenset({"path"}),
    T.FILE_LIST: frozenset({"path", "glob"}),
    T.FILE_DELETE: frozenset({"path"}),
    T.FILE_MOVE: frozenset({"src", "dst"}),
    T.LOCAL_LLM_COMPLETION: frozenset({"model"}),
    T.SCREENSHOT_REQUEST: frozenset({"window_id"}),
    T.INPUT_ACTION: frozenset(
        {"action", "key", "button", "direction", "modifiers", "scroll_direction"}
    ),
    T.WINDOW_FOCUS: frozenset({"window_id"}),
    T.APP_LAUNCH: frozenset({"app"}),
    T.ATTACH_SESSION: frozenset({"session_id"}),
    T.ACTIVATE_SESSION: frozenset({"session_id"}),
    T.RESTORE_SESSION: frozenset({"session_id"}),
    T.DETACH_SESSION: frozenset({"session_id"}),
}

REQUEST_TYPES = sorted({*DATA_REQUESTS, *CONTROL_REQUESTS})
MARKER = re.compile(r"SECRET(\d+)X")


class Markers:
    """Hands out a distinct marker string per field path and remembers which is which."""

    def __init__(self) -> None:
        self.fields: dict[str, str] = {}

    def new(self, field_path: str) -> str:
        marker = f"SECRET{len(self.fields)}X"
        self.fields[marker] = field_path
        return marker

    def top_level_fields_in(self, text: str) -> set[str]:
        return {self.fields[m.group(0)].split(".")[0] for m in MARKER.finditer(text)}

    def top_level_fields(self) -> set[str]:
        return {path.split(".")[0] for path in self.fields.values()}


def sample(t: mi.Type, field_path: str, markers: Markers) -> Any:
    """A valid value of type `t` with a marker in every string, at every depth."""
    if isinstance(t, (mi.StrType, mi.AnyType)):
        return markers.new(field_path)
    if isinstance(t, mi.BoolType):
        return True
    if isinstance(t, mi.IntType):
        return 3
    if isinstance(t, mi.FloatType):
        return 0.5
    if isinstance(t, mi.LiteralType):
        return t.values[-1]
    if isinstance(t, mi.UnionType):
        return sample(
            next(x for x in t.types if not isinstance(x, mi.NoneType)), field_path, markers
        )
    if isinstance(t, mi.ListType):
        size = t.min_length or 2
        return [sample(t.item_type, field_path, markers) for _ in range(size)]
    if isinstance(t, mi.DictType):
        return {
            sample(t.key_type, f"{field_path}.key", markers): sample(
                t.value_type, f"{field_path}.value", markers
            )
        }
    if isinstance(t, mi.StructType):
        return {
            f.encode_name: sample(f.type, f"{field_path}.{f.name}".lstrip("."), markers)
            for f in t.fields
        }
    raise AssertionError(f"teach sample() about {t!r}")


def payloads(kind: MessageType) -> tuple[Markers, list[object]]:
    """The payload as a decoded Struct and as a raw dict carrying a future field too."""
    markers = Markers()
    raw = sample(mi.type_info(PAYLOAD_MODELS[kind]), "", markers)
    struct = msgspec.convert(raw, PAYLOAD_MODELS[kind])
    with_future_field = {**raw, "future_field": markers.new("future_field")}
    return markers, [struct, with_future_field]


def test_the_allowed_table_only_names_real_fields() -> None:
    for kind, allowed in ALLOWED.items():
        fields = {f.name for f in mi.type_info(PAYLOAD_MODELS[kind]).fields}
        assert allowed <= fields, kind


@pytest.mark.parametrize("kind", REQUEST_TYPES, ids=str)
def test_no_secret_reaches_the_details_of_any_request(kind: MessageType) -> None:
    markers, forms = payloads(kind)
    allowed = ALLOWED.get(kind, frozenset())
    for payload in forms:
        details = audit_details(kind, payload)
        text = canonical_json(details).decode("utf-8")  # also: always encodable
        leaked = markers.top_level_fields_in(text) - allowed
        assert not leaked, f"{kind} recorded {sorted(leaked)}: {text}"
        # The whitelist must still record what it promises (this test can fail both ways).
        missing = (allowed & markers.top_level_fields()) - markers.top_level_fields_in(text)
        assert not missing, f"{kind} dropped {sorted(missing)}: {text}"
        assert audit_details(str(kind), payload) == details


def test_file_write_records_the_byte_length_never_the_content() -> None:
    utf8 = audit_details(T.FILE_WRITE, {"path": "/a", "content": "héllo wörld"})
    assert utf8 == {"path": "/a", "content_bytes": 13}
    for content in ("aGVsbG8=", "aGVsbG8", "aGVs\nbG8=", "aGVsbG8=\r\n", " aGVs bG8 = "):
        details = audit_details(
            T.FILE_WRITE, {"path": "/b", "content": content, "encoding": "base64"}
        )
        assert details["content_bytes"] == 5, content
        assert "content" not in details
    for data in (b"", b"a", b"ab", b"abc", bytes(range(256)) * 3):
        content = base64.b64encode(data).decode()
        details = audit_details(
            T.FILE_WRITE, {"path": "/b", "content": content, "encoding": "base64"}
        )
        assert details["content_bytes"] == len(data), content


def test_execute_command_records_the_env_count_only() -> None:
    payload = msgspec.convert(
        {"argv": ["psql", "-h", "db"], "cwd": "/srv", "env": {"PGPASSWORD": "hunter2", "A": "b"}},
        PAYLOAD_MODELS[T.EXECUTE_COMMAND],
    )
    details = audit_details(T.EXECUTE_COMMAND, payload)
    assert details == {"argv": ["psql", "-h", "db"], "shell": "auto", "cwd": "/srv", "env_count": 2}
    assert "PGPASSWORD" not in json.dumps(details)


def test_typed_text_and_chat_are_counted_not_recorded() -> None:
    typed = audit_details(
        T.INPUT_ACTION, {"action": "type", "text": "my password", "coordinate": [5, 6]}
    )
    assert typed == {"action": "type", "coordinate": [5, 6], "text_length": 11}
    assert audit_details(T.CLIPBOARD_WRITE, {"text": "token-abc"}) == {"text_length": 9}
    chat = audit_details(
        T.LOCAL_LLM_COMPLETION,
        {"model": "llama3", "messages": [{"role": "user", "content": "secret plans"}] * 3},
    )
    assert chat == {"model": "llama3", "message_count": 3}


def test_control_plane_records_session_and_revision_never_grants() -> None:
    restore = audit_details(T.RESTORE_SESSION, {"session_id": "s1", "root_grant": "v1.abc.def"})
    assert restore == {"session_id": "s1"}
    assert audit_details(T.ACTIVATE_SESSION, {"session_id": "s1", "revision": 4}) == {
        "session_id": "s1",
        "revision": 4,
    }
    attach = audit_details(
        T.ATTACH_SESSION, {"session_id": "s2", "browse_id": "b", "directory_ref": "ref"}
    )
    assert attach == {"session_id": "s2"}


def test_unknown_types_record_only_the_type() -> None:
    assert audit_details("FUTURE_THING", {"secret": "x"}) == {"type": "FUTURE_THING"}
    assert audit_details(T.HELLO, {"machine_id": "x"}) == {"type": "HELLO"}


def test_values_are_bounded_and_always_encodable() -> None:
    details = audit_details(
        T.EXECUTE_COMMAND,
        {"command": "x" * (MAX_TEXT_CHARS + 10), "cwd": "/bad\ud800", "timeout_seconds": 1e999},
    )
    assert len(details["command"]) < MAX_TEXT_CHARS + 20
    assert details["command"].endswith("[+10 chars]")
    assert "timeout_seconds" not in details
    canonical_json(details)
    wrong_types = audit_details(T.FILE_READ, {"path": ["x"], "offset": True, "encoding": 3})
    assert wrong_types == {"encoding": "<other>"}


def test_event_helpers() -> None:
    assert session_revoked_details("another_shim_connected", "laptop-2") == {
        "reason": "another_shim_connected",
        "new_shim_machine_id": "laptop-2",
        "source": "platform",
    }
    assert audit_details(T.SESSION_REVOKED, {"reason": "user_revoked"}) == {
        "reason": "user_revoked",
        "source": "platform",
    }
    assert fatal_close_details(4426, "PROTOCOL_VERSION_MISMATCH", exit_code=3) == {
        "code": 4426,
        "reason": "PROTOCOL_VERSION_MISMATCH",
        "exit_code": 3,
    }
    assert disconnect_details(1006, "", will_reconnect=True) == {
        "code": 1006,
        "reason": "",
        "will_reconnect": True,
    }
    connected = connect_details(
        "wss://user:pw@hub.example:8443/ws/local-executor?token=abc#frag", protocol_version="1.1"
    )
    assert connected == {
        "url": "wss://hub.example:8443/ws/local-executor",
        "protocol_version": "1.1",
    }
    assert safe_url("ws://[::1]:8765/ws") == "ws://[::1]:8765/ws"
