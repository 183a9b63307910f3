"""The hub client's sans-I/O core and result mapping, without any socket."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tetherbed.client.core import ClientCore, ConnectionLevelError, Failure, Reply
from tetherbed.client.errors import (
    CommandExitException,
    HubError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    TooLargeError,
    UnexpectedResponseError,
    error_from_code,
)
from tetherbed.client.models import (
    EntryInfo,
    FileType,
    base_name,
    command_result,
    entry_from_stat,
    permissions_text,
)
from tetherbed.client.sandbox import _within_depth
from tetherbed.runtime.clock import ManualClock
from tetherbed.wire.messages import CommandResult, FileRead, FileStatResponse


def frame(kind: str, request_id: str | None, payload: dict) -> bytes:
    return json.dumps(
        {"type": kind, "id": request_id, "ts": 1.0, "version": "1.1", "payload": payload}
    ).encode()


def make_core(**options) -> ClientCore:
    ids = iter(f"id-{n}" for n in range(1000))
    return ClientCore(id_factory=lambda: next(ids), clock=ManualClock(start=1234.5), **options)


def test_start_request_encodes_the_envelope() -> None:
    core = make_core()
    rid, data = core.start_request("FILE_READ", FileRead(path="/a", format="text"))
    assert rid == "id-0"
    assert json.loads(data) == {
        "type": "FILE_READ",
        "id": "id-0",
        "ts": 1234.5,
        "version": "1.1",
        "payload": {
            "path": "/a",
            "encoding": "utf-8",
            "format": "text",
            "offset": 0,
            "length": None,
        },
    }
    assert core.pending_ids == {"id-0"}


def test_duplicate_pending_id_is_refused_and_nothing_changes() -> None:
    core = make_core()
    core.start_request("PING", {}, request_id="same")
    with pytest.raises(InvalidArgumentError) as caught:
        core.start_request("PING", {}, request_id="same")
    assert caught.value.code == "DUPLICATE_REQUEST_ID"
    assert core.pending_ids == {"same"}
    core.forget("same")
    core.start_request("PING", {}, request_id="same")  # free again once answered or forgotten


def test_oversized_and_unencodable_requests_are_refused_before_registering() -> None:
    core = make_core(frame_limit=200)
    with pytest.raises(TooLargeError) as caught:
        core.start_request("FILE_WRITE", {"path": "/a", "content": "x" * 500})
    assert caught.value.code == "FRAME_TOO_LARGE"
    with pytest.raises(InvalidArgumentError):
        core.start_request("FILE_WRITE", {"path": object()})
    assert core.pending_ids == frozenset()


def test_terminal_reply_ends_the_request_and_chunks_do_not() -> None:
    core = make_core()
    rid, _ = core.start_request("LOCAL_LLM_COMPLETION", {"model": "m", "messages": []})
    chunk = core.receive(frame("LOCAL_LLM_COMPLETION_CHUNK", rid, {"delta": "a"}))
    assert isinstance(chunk, Reply)
    assert (chunk.final, chunk.frame.payload.delta) == (False, "a")
    assert core.pending_ids == {rid}
    done = core.receive(
        frame("LOCAL_LLM_COMPLETION_RESPONSE", rid, {"content": "a", "finish_reason": "stop"})
    )
    assert isinstance(done, Reply)
    assert done.final is True
    assert core.pending_ids == frozenset()
    # A second terminal frame for the same id is a late duplicate: dropped.
    assert core.receive(frame("ACK", rid, {"ok": True})) is None
    assert core.dropped_frames == 1


def test_pending_capacity_is_accepted_and_ignored() -> None:
    core = make_core()
    rid, _ = core.start_request("FILE_DELETE", {"path": "/a"})
    data = json.dumps(
        {
            "type": "ACK",
            "id": rid,
            "ts": 1.0,
            "version": "1.1",
            "pending_capacity": 0,
            "payload": {"ok": True},
        }
    )
    event = core.receive(data)
    assert isinstance(event, Reply)
    assert event.frame == ("ACK", event.frame.payload)
    assert event.frame.payload.ok is True


def test_error_answers_become_typed_failures() -> None:
    core = make_core()
    rid, _ = core.start_request("EXECUTE_COMMAND", {"command": "x"})
    event = core.receive(
        frame("ERROR", rid, {"code": "OUTCOME_UNKNOWN", "message": "agent dropped", "fatal": False})
    )
    assert isinstance(event, Failure)
    assert isinstance(event.error, OutcomeUnknownError)
    assert event.error.message == "agent dropped"
    assert core.pending_ids == frozenset()


def test_error_with_null_id_is_connection_level() -> None:
    core = make_core()
    core.start_request("PING", {})
    event = core.receive(frame("ERROR", None, {"code": "INVALID_MESSAGE", "fatal": True}))
    assert isinstance(event, ConnectionLevelError)
    assert event.error.code == "INVALID_MESSAGE"
    assert event.error.fatal is True
    assert len(core.pending_ids) == 1


def test_unreadable_frames_never_raise() -> None:
    core = make_core()
    rid, _ = core.start_request("FILE_STAT", {"path": "/a"})
    garbage = core.receive(b"{not json")
    assert isinstance(garbage, ConnectionLevelError)
    assert isinstance(garbage.error, UnexpectedResponseError)
    # A known type whose payload fails its model fails only that request.
    bad = core.receive(frame("FILE_STAT_RESPONSE", rid, {"exists": "maybe"}))
    assert isinstance(bad, Failure)
    assert bad.request_id == rid
    assert isinstance(bad.error, UnexpectedResponseError)
    assert core.pending_ids == frozenset()


def test_unknown_answer_types_arrive_as_dicts() -> None:
    core = make_core()
    rid, _ = core.start_request("FUTURE_REQUEST", {"x": 1})
    event = core.receive(frame("FUTURE_RESPONSE", rid, {"y": [1, 2]}))
    assert isinstance(event, Reply)
    assert event.frame == ("FUTURE_RESPONSE", {"y": [1, 2]})


def test_forget_all_returns_every_pending_id() -> None:
    core = make_core()
    ids = {core.start_request("PING", {})[0] for _ in range(3)}
    assert set(core.forget_all()) == ids
    assert core.pending_ids == frozenset()


# --- errors and models -----------------------------------------------------------


def test_error_from_code_keeps_every_field() -> None:
    error = error_from_code(
        "PATH_NOT_FOUND", "gone", details={"path": "/a"}, fatal=True, http_status=None
    )
    assert isinstance(error, NotFoundError)
    assert (error.code, error.message, error.details, error.fatal) == (
        "PATH_NOT_FOUND",
        "gone",
        {"path": "/a"},
        True,
    )
    assert str(error) == "PATH_NOT_FOUND: gone"
    assert type(error_from_code("BRAND_NEW")) is HubError


def test_command_result_mapping_and_exit_exception() -> None:
    wire = CommandResult(
        stdout="o",
        stderr="e",
        exit_code=-1,
        timed_out=True,
        duration_seconds=30.0,
        output_truncated=True,
    )
    result = command_result(wire)
    assert result.error == "command timed out after 30s"
    assert result.output_truncated is True
    error = CommandExitException(result)
    assert (error.code, error.exit_code, error.stderr) == ("COMMAND_TIMEOUT", -1, "e")
    assert str(error) == "Command exited with code -1 and error:\ne"
    ok = command_result(
        CommandResult(
            stdout="",
            stderr="",
            exit_code=0,
            timed_out=False,
            duration_seconds=0.1,
            output_truncated=False,
        )
    )
    assert ok.error is None


def test_entry_from_stat_on_windows_without_owner() -> None:
    response = FileStatResponse(
        exists=True,
        is_file=False,
        is_dir=True,
        is_symlink=False,
        size_bytes=0,
        mtime=0.0,
        mode="0755",
        path="C:\\Users\\alice\\Projects",
    )
    info = entry_from_stat(response, "C:\\Users\\alice\\Projects\\")
    assert info.name == "Projects"
    assert info.type is FileType.DIR
    assert info.modified_time == datetime(1970, 1, 1, tzinfo=UTC)
    assert (info.mode, info.permissions, info.owner, info.group) == (0o755, "rwxr-xr-x", None, None)


@pytest.mark.parametrize(
    ("path", "name"),
    [("/w/a.txt", "a.txt"), ("/w/dir/", "dir"), ("C:\\x\\y.txt", "y.txt"), ("/", "/")],
)
def test_base_name(path: str, name: str) -> None:
    assert base_name(path) == name


def test_permissions_text() -> None:
    assert permissions_text(0o640) == "rw-r-----"
    assert permissions_text(None) is None


def _entry(path: str) -> EntryInfo:
    return EntryInfo(
        name=base_name(path), type=FileType.FILE, path=path, size=0, modified_time=None
    )


def test_depth_filter_falls_back_to_the_shallowest_level() -> None:
    # The agent reports canonical paths that do not start with the path asked for.
    entries = [_entry(p) for p in ("/real/w/a", "/real/w/d/b", "/real/w/d/e/c")]
    kept = _within_depth(entries, "./w", 2)
    assert [e.path for e in kept] == ["/real/w/a", "/real/w/d/b"]


def test_depth_filter_on_windows_paths() -> None:
    entries = [_entry(p) for p in ("C:\\w\\a", "C:\\w\\d\\b", "C:\\w\\d\\e\\c")]
    assert [e.path for e in _within_depth(entries, "C:\\w", 2)] == ["C:\\w\\a", "C:\\w\\d\\b"]
    assert [e.path for e in _within_depth(entries, "C:\\elsewhere", 1)] == ["C:\\w\\a"]
