"""Every frame the agent can produce passes the strict schema of the spec.

A strict peer (the public reference shim's models forbid extra fields; a
platform built on them refuses what they do not name) accepts exactly what
`wire/strict.py` accepts. Here a real agent runtime serves a scripted platform
over an in-memory connection, is made to produce every answer and every error it
can on a data and on a control connection, and every frame it sent is checked.
Computer-use answers need a display: tests/desktop/test_strict_frames.py.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.unit.agent.platform_double import Platform
from tests.unit.agent.test_control_bindings import KEY, MACHINE, FakeLauncher
from tetherbed.agent.config import AgentConfig, Limits
from tetherbed.agent.control.controller import ControlOperations
from tetherbed.runtime.clock import SystemClock
from tetherbed.wire import strict
from tetherbed.wire.messages import MessageType as T

#: Every frame type the agent sends on a data connection without a desktop.
DATA_FRAMES = {
    T.HELLO,
    T.STATUS,
    T.PONG,
    T.ERROR,
    T.ACK,
    T.COMMAND_RESULT,
    T.FILE_CONTENTS,
    T.FILE_STAT_RESPONSE,
    T.FILE_LIST_RESPONSE,
}
CONTROL_FRAMES = {
    T.HELLO,
    T.STATUS,
    T.PONG,
    T.ERROR,
    T.ACK,
    T.DIRECTORY_LIST_RESPONSE,
    T.SESSION_ATTACHED,
    T.SESSION_ACTIVATED,
    T.SESSION_RESTORED,
}


def check_every_frame(frames: list[bytes]) -> set[str]:
    """Check each recorded frame; the set of types seen."""
    problems = []
    for raw in frames:
        try:
            strict.check_frame(raw, from_shim=True)
        except strict.StrictViolation as exc:
            problems.append(f"{exc}\n    in {raw[:300]!r}")
    assert not problems, "frames a strict peer refuses:\n" + "\n".join(problems)
    return {msgspec.json.decode(raw)["type"] for raw in frames}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = Path(os.path.realpath(tmp_path)) / "root"
    (root / "dir" / "sub").mkdir(parents=True)
    (root / "hello.txt").write_text("hello\n")
    (root / "binary.bin").write_bytes(b"\xff\xfe\x00bytes")
    (root / "dir" / "a.csv").write_text("a,b\n")
    (tmp_path / "outside").mkdir()
    (root / "link-out").symlink_to(tmp_path / "outside")
    return root


@pytest.fixture
async def data(root: Path, tmp_path: Path) -> AsyncIterator[Platform]:
    config = AgentConfig(
        hub_url="ws://hub",
        token="t",
        root=str(root),
        session_id="s1",
        machine_id="m1",
        enable_shell=True,
        display="",
        state_dir=str(tmp_path / "state"),
        local_limits=Limits(max_concurrent=2),
    )
    async with Platform.serve(config) as platform:
        yield platform


# (request type, payload, expected answer type, expected error code or None)
DATA_CASES: list[tuple[str, dict[str, Any], str, str | None]] = [
    ("PING", {}, "PONG", None),
    (
        "EXECUTE_COMMAND",
        {"command": "echo hi", "argv": None, "cwd": "{root}"},
        "COMMAND_RESULT",
        None,
    ),
    ("EXECUTE_COMMAND", {"argv": ["true"]}, "COMMAND_RESULT", None),
    ("EXECUTE_COMMAND", {"command": "ls", "argv": ["ls"]}, "ERROR", "INTERNAL_ERROR"),
    ("EXECUTE_COMMAND", {"command": None, "argv": None}, "ERROR", "INTERNAL_ERROR"),
    ("EXECUTE_COMMAND", {"command": "ls", "shell": "cmd"}, "ERROR", "SHELL_NOT_AVAILABLE"),
    ("EXECUTE_COMMAND", {"argv": ["ls"], "cwd": "{root}/hello.txt"}, "ERROR", None),
    (
        "EXECUTE_COMMAND",
        {"argv": ["ls"], "cwd": "{root}/link-out"},
        "ERROR",
        "PATH_OUTSIDE_ALLOWED_ROOT",
    ),
    ("EXECUTE_COMMAND", {"argv": ["ls"], "env": {"A\u0000": "x"}}, "ERROR", "INTERNAL_ERROR"),
    ("FILE_WRITE", {"path": "{root}/new.txt", "content": "x", "encoding": "utf-8"}, "ACK", None),
    ("FILE_WRITE", {"path": "{root}/b.bin", "content": "!!", "encoding": "base64"}, "ERROR", None),
    ("FILE_WRITE", {"path": "{root}/dir", "content": "x"}, "ERROR", None),
    (
        "FILE_READ",
        {"path": "{root}/hello.txt", "encoding": "utf-8", "format": "text"},
        "FILE_CONTENTS",
        None,
    ),
    (
        "FILE_READ",
        {
            "path": "{root}/binary.bin",
            "encoding": "base64",
            "format": "bytes",
            "offset": 1,
            "length": 2,
        },
        "FILE_CONTENTS",
        None,
    ),
    (
        "FILE_READ",
        {"path": "{root}/binary.bin", "encoding": "utf-8", "format": "text"},
        "ERROR",
        None,
    ),
    (
        "FILE_READ",
        {"path": "{root}/hello.txt", "encoding": "base64", "format": "text"},
        "ERROR",
        None,
    ),
    ("FILE_READ", {"path": "{root}/dir"}, "ERROR", None),
    ("FILE_READ", {"path": "{root}/missing"}, "ERROR", "PATH_NOT_FOUND"),
    ("FILE_READ", {"path": "/etc/passwd"}, "ERROR", "PATH_OUTSIDE_ALLOWED_ROOT"),
    ("FILE_READ", {"path": ""}, "ERROR", None),
    ("FILE_READ", {"path": "{root}/" + "n" * 300}, "ERROR", None),
    ("FILE_READ", {"path": "{root}/a\u0000b"}, "ERROR", "PATH_INVALID_CHARS"),
    ("FILE_READ", {"path": "{root}/hello.txt", "length": 1 << 40}, "ERROR", "FILE_TOO_LARGE"),
    ("FILE_READ", {"path": "{root}/hello.txt/x"}, "ERROR", None),
    ("FILE_READ", {"path": 7}, "ERROR", None),
    ("FILE_READ", {}, "ERROR", None),
    (
        "FILE_STAT",
        {"path": "{root}/hello.txt", "follow_symlinks": True},
        "FILE_STAT_RESPONSE",
        None,
    ),
    ("FILE_STAT", {"path": "{root}/missing"}, "FILE_STAT_RESPONSE", None),
    (
        "FILE_STAT",
        {"path": "{root}/link-out", "follow_symlinks": False},
        "FILE_STAT_RESPONSE",
        None,
    ),
    (
        "FILE_LIST",
        {
            "path": "{root}",
            "glob": None,
            "recursive": True,
            "include_hidden": False,
            "max_entries": 1000,
        },
        "FILE_LIST_RESPONSE",
        None,
    ),
    (
        "FILE_LIST",
        {"path": "{root}", "glob": "*.csv", "max_entries": 1},
        "FILE_LIST_RESPONSE",
        None,
    ),
    ("FILE_LIST", {"path": "{root}/hello.txt"}, "ERROR", None),
    ("FILE_LIST", {"path": "{root}", "glob": ""}, "ERROR", None),
    (
        "FILE_DELETE",
        {"path": "{root}/new.txt", "recursive": False, "missing_ok": False},
        "ACK",
        None,
    ),
    ("FILE_DELETE", {"path": "{root}/new.txt", "missing_ok": True}, "ACK", None),
    ("FILE_DELETE", {"path": "{root}/dir"}, "ERROR", "PATH_NOT_EMPTY"),
    ("FILE_DELETE", {"path": "{root}"}, "ERROR", "PATH_OUTSIDE_ALLOWED_ROOT"),
    (
        "FILE_MOVE",
        {"src": "{root}/hello.txt", "dst": "{root}/moved.txt", "overwrite": False},
        "ACK",
        None,
    ),
    ("FILE_MOVE", {"src": "{root}/moved.txt", "dst": "{root}/dir/a.csv"}, "ERROR", "PATH_EXISTS"),
    ("FILE_MOVE", {"src": "{root}/dir", "dst": "{root}/dir/sub/x"}, "ERROR", None),
    ("SCREENSHOT_REQUEST", {}, "ERROR", "CAPABILITY_NOT_GRANTED"),
    ("LOCAL_LLM_COMPLETION", {"model": "m", "messages": []}, "ERROR", "CAPABILITY_NOT_GRANTED"),
    ("DIRECTORY_LIST_REQUEST", {"browse_id": None, "directory_ref": None}, "ERROR", None),
    ("COMMAND_RESULT", {}, "ERROR", None),
    ("NOT_A_TYPE", {}, "ERROR", None),
]


def _filled(value: Any, root: Path) -> Any:
    if isinstance(value, str):
        return value.replace("{root}", str(root))
    if isinstance(value, dict):
        return {k: _filled(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, root) for v in value]
    return value


async def test_every_data_frame_is_strict(data: Platform, root: Path) -> None:
    for kind, payload, answer_type, code in DATA_CASES:
        answer = await data.call(kind, _filled(payload, root))
        assert answer["type"] == answer_type, (kind, payload, answer)
        if code is not None:
            assert answer["payload"]["code"] == code, (kind, payload, answer)
    # Frames no request above produces: a malformed one, one without an id,
    # a duplicate id, one past max_concurrent (and the STATUS after the edge).
    data.send_raw(b"{not json")
    await data.answer(None)
    data.send({"type": "FILE_STAT", "id": "", "payload": {"path": str(root)}})
    await data.answer("")
    slow = {"argv": ["sleep", "0.5"]}
    data.request("EXECUTE_COMMAND", slow, "busy-1")
    data.request("EXECUTE_COMMAND", slow, "busy-1")
    data.request("EXECUTE_COMMAND", slow, "busy-2")
    overloaded = await data.call("FILE_STAT", {"path": str(root)})
    assert overloaded["payload"]["code"] == "SHIM_OVERLOADED"
    await data.wire.wait_for(lambda f: f["id"] == "busy-2" and f["type"] == "COMMAND_RESULT")
    statuses = [f for f in data.wire.frames if b'"STATUS"' in f]
    await data.wire.wait_for(lambda f: f["type"] == "STATUS" and f["id"] != statuses[0])
    assert check_every_frame(data.wire.frames) == DATA_FRAMES


async def test_every_error_code_is_one_of_the_specs(data: Platform, root: Path) -> None:
    """The precise reason travels in `details`, never as a code of our own."""
    answer = await data.call("EXECUTE_COMMAND", {"command": "ls", "argv": ["ls"]})
    assert answer["payload"]["code"] == "INTERNAL_ERROR"
    assert answer["payload"]["details"]["reason_code"] == "INVALID_MESSAGE"
    assert "exactly one of" in answer["payload"]["message"]
    answer = await data.call("FILE_READ", {"path": f"{root}/dir"})
    assert answer["payload"]["code"] in strict.SPEC_ERROR_CODES
    assert answer["payload"]["details"]["reason_code"] == "NOT_A_FILE"


async def test_hello_advertises_features_as_a_list(data: Platform) -> None:
    hello = await data.wire.wait_for(lambda f: f["type"] == "HELLO")
    assert hello["payload"]["computer_use_features"] == []


@pytest.fixture
async def control(root: Path, tmp_path: Path) -> AsyncIterator[tuple[Platform, FakeLauncher]]:
    config = AgentConfig(
        hub_url="ws://hub",
        token="t",
        root="",
        machine_id=MACHINE,
        display="",
        state_dir=str(tmp_path / "state"),
    )
    launcher = FakeLauncher()
    operations = ControlOperations(
        config,
        browse_roots=[root],
        grant_key=KEY,
        clock=SystemClock(),
        launcher=launcher,
        machine_id=MACHINE,
    )
    async with Platform.serve(config, operations) as platform:
        yield platform, launcher


async def test_every_control_frame_is_strict(control: tuple[Platform, FakeLauncher]) -> None:
    platform, _ = control
    start = await platform.call(
        "DIRECTORY_LIST_REQUEST", {"browse_id": None, "directory_ref": None}
    )
    browse = start["payload"]
    assert start["type"] == "DIRECTORY_LIST_RESPONSE"
    home = browse["entries"][0]["directory_ref"]
    inside = await platform.call(
        "DIRECTORY_LIST_REQUEST", {"browse_id": browse["browse_id"], "directory_ref": home}
    )
    assert inside["type"] == "DIRECTORY_LIST_RESPONSE"
    bad = await platform.call("DIRECTORY_LIST_REQUEST", {"browse_id": "x", "directory_ref": "y"})
    assert bad["payload"]["code"] == "DIRECTORY_REFERENCE_INVALID"
    attach = {
        "session_id": "s9",
        "browse_id": browse["browse_id"],
        "directory_ref": home,
        "expected_connection_id": None,
    }
    attached = await platform.call("ATTACH_SESSION", attach)
    assert attached["type"] == "SESSION_ATTACHED", attached
    grant = attached["payload"]["root_grant"]
    early = await platform.call("ACTIVATE_SESSION", {"session_id": "nope", "revision": 1})
    assert early["payload"]["code"] == "SESSION_NOT_ATTACHED"
    activated = await platform.call("ACTIVATE_SESSION", {"session_id": "s9", "revision": 1})
    assert activated["type"] == "SESSION_ACTIVATED", activated
    restored = await platform.call("RESTORE_SESSION", {"session_id": "s9", "root_grant": grant})
    assert restored["type"] == "SESSION_RESTORED", restored
    forged = await platform.call("RESTORE_SESSION", {"session_id": "s9", "root_grant": "v1.x.y"})
    assert forged["payload"]["code"] == "ROOT_GRANT_INVALID"
    detached = await platform.call("DETACH_SESSION", {"session_id": "s9"})
    assert detached["type"] == "ACK"
    refused = await platform.call("FILE_STAT", {"path": "/"})
    assert refused["type"] == "ERROR"
    assert (await platform.call("PING", {}))["type"] == "PONG"
    await asyncio.sleep(0)
    assert check_every_frame(platform.wire.frames) == CONTROL_FRAMES
