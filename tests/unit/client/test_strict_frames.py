"""Every frame the client SDK can produce, against the spec's strict schema.

A strict peer (the public reference shim validates with models that forbid
extra fields) silently drops a request it cannot validate, so one stray field
means a request that is never answered. `wire/strict.py` is that schema; every
call of `HubSandbox` and `MachineControl`, in every variant of its options,
must produce frames it accepts, with absolute paths only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest

from tetherbed.client.machine import MachineControl
from tetherbed.client.sandbox import CommandExitException, HubConnection, HubSandbox
from tetherbed.runtime.transport import TransportClosed
from tetherbed.wire.hub_api import SESSION_INFO_REQUEST, SESSION_INFO_RESPONSE
from tetherbed.wire.strict import check_frame

ROOT = "/home/alice/work"


class ScriptedHub:
    """An in-memory `MessageTransport`: records what the client sends and
    answers each request the way a hub would, from canned payloads."""

    def __init__(self, allowed_root: str | None = ROOT) -> None:
        self.allowed_root = allowed_root
        self.sent: list[bytes] = []
        self._inbox: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def send(self, data: bytes) -> None:
        self.sent.append(data)
        frame = json.loads(data)
        kind, payload = frame["type"], frame["payload"]
        answer_type, answer = self.answer(kind, payload)
        self._inbox.put_nowait(
            msgspec.json.encode(
                {
                    "type": answer_type,
                    "id": frame["id"],
                    "ts": 1.0,
                    "version": "1.1",
                    "payload": answer,
                }
            )
        )

    async def recv(self) -> bytes:
        item = await self._inbox.get()
        if item is None:
            raise TransportClosed(1000, "closed")
        return item

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self._inbox.put_nowait(None)

    def answer(self, kind: str, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        path = payload.get("path", "")
        stat = {
            "exists": True,
            "is_file": "dir" not in path,
            "is_dir": "dir" in path,
            "is_symlink": "link" in path and payload.get("follow_symlinks") is False,
            "size_bytes": 3,
            "mtime": 1.0,
            "ctime": 1.0,
            "mode": "0644",
            "owner_uid": 1,
            "owner_gid": 1,
            "mime_type": None,
            "path": path,
        }
        binding = {"session_id": "s", "allowed_root": ROOT, "fingerprint": "f", "revision": 1}
        answers: dict[str, tuple[str, dict[str, Any]]] = {
            "FILE_READ": (
                "FILE_CONTENTS",
                {
                    "content": "abc" if payload.get("encoding") == "utf-8" else "YWJj",
                    "encoding": payload.get("encoding", "utf-8"),
                    "size_bytes": 3,
                    "truncated": False,
                },
            ),
            "FILE_WRITE": ("ACK", {"ok": True}),
            "FILE_DELETE": ("ACK", {"ok": True}),
            "FILE_MOVE": ("ACK", {"ok": True}),
            "FILE_STAT": ("FILE_STAT_RESPONSE", stat),
            "FILE_LIST": ("FILE_LIST_RESPONSE", {"entries": [], "truncated": False}),
            "EXECUTE_COMMAND": (
                "COMMAND_RESULT",
                {
                    "stdout": "",
                    "stderr": "",
                    "exit_code": 0,
                    "timed_out": False,
                    "duration_seconds": 0.1,
                    "output_truncated": False,
                },
            ),
            "DIRECTORY_LIST_REQUEST": (
                "DIRECTORY_LIST_RESPONSE",
                {
                    "browse_id": "b",
                    "current": None,
                    "parent_ref": None,
                    "entries": [],
                    "next_cursor": None,
                    "truncated": False,
                    "expires_at": 1.0,
                },
            ),
            "ATTACH_SESSION": ("SESSION_ATTACHED", {**binding, "root_grant": "g"}),
            "ACTIVATE_SESSION": ("SESSION_ACTIVATED", binding),
            "RESTORE_SESSION": ("SESSION_RESTORED", {**binding, "root_grant": "g"}),
            "DETACH_SESSION": ("ACK", {"ok": True}),
            SESSION_INFO_REQUEST: (
                SESSION_INFO_RESPONSE,
                {
                    "session_id": "s",
                    "allowed_root": self.allowed_root,
                    "machine_id": "m",
                    "connection_id": "c1",
                },
            ),
        }
        return answers[kind]

    def relayed(self) -> list[bytes]:
        """Frames the hub would relay to the agent (its own API frames excluded)."""
        return [f for f in self.sent if json.loads(f)["type"] != SESSION_INFO_REQUEST]


Call = Callable[[HubSandbox], Awaitable[Any]]


async def _run(sb: HubSandbox, argv: Any, **options: Any) -> Any:
    try:
        return await sb.commands.run(argv, **options)
    except CommandExitException:  # pragma: no cover - the script answers exit 0
        raise


SANDBOX_CALLS: dict[str, Call] = {
    "read text": lambda sb: sb.files.read(f"{ROOT}/a.txt"),
    "read bytes range": lambda sb: sb.files.read(f"{ROOT}/a", "bytes", offset=4, length=3),
    "read relative": lambda sb: sb.files.read("notes/a.txt"),
    "write text": lambda sb: sb.files.write(f"{ROOT}/a.txt", "hello"),
    "write bytes": lambda sb: sb.files.write(f"{ROOT}/b.bin", b"\x00\x01"),
    "write relative": lambda sb: sb.files.write("notes/a.txt", "hello"),
    "list": lambda sb: sb.files.list(ROOT),
    "list deep hidden-off": lambda sb: sb.files.list(
        "dir", depth=3, include_hidden=False, max_entries=10
    ),
    "exists": lambda sb: sb.files.exists("a.txt"),
    "get_info link": lambda sb: sb.files.get_info("link"),
    "remove": lambda sb: sb.files.remove("old", missing_ok=True),
    "rename": lambda sb: sb.files.rename("a.txt", f"{ROOT}/b.txt", overwrite=True),
    "run plain": lambda sb: _run(sb, "ls"),
    "run everything": lambda sb: _run(
        sb, "ls", envs={"A": "1"}, cwd="sub", timeout=5, shell="bash"
    ),
    "run no timeout": lambda sb: _run(sb, "ls", timeout=None, envs={}),
    "run zero timeout": lambda sb: _run(sb, "ls", timeout=0),
    "run argv": lambda sb: _run(sb, ["ls", "-la"], cwd=ROOT),
}

MachineCall = Callable[[MachineControl], Awaitable[Any]]

MACHINE_CALLS: dict[str, MachineCall] = {
    "browse roots": lambda m: m.browse(),
    "browse page": lambda m: m.browse("b", "r", cursor="next"),
    "browse dir": lambda m: m.browse("b", "r"),
    "attach": lambda m: m.attach("s", "b", "r"),
    "attach expecting": lambda m: m.attach("s", "b", "r", expected_connection_id="c1"),
    "activate": lambda m: m.activate("s", 2),
    "restore": lambda m: m.restore("s", "grant"),
    "detach": lambda m: m.detach("s"),
}

PATH_FIELDS = ("path", "src", "dst", "cwd")


def _assert_strict_and_absolute(frames: list[bytes]) -> None:
    assert frames
    for data in frames:
        check_frame(data, from_shim=False)
        payload = json.loads(data)["payload"]
        for name in PATH_FIELDS:
            if name in payload:
                assert payload[name].startswith("/"), f"{name} {payload[name]!r} is relative"


@pytest.mark.parametrize("call", list(SANDBOX_CALLS), ids=list(SANDBOX_CALLS))
async def test_every_sandbox_frame_is_one_a_strict_peer_accepts(call: str) -> None:
    """Before: FILE_WRITE carried `format`, and commands.run sent `env`, `cwd`
    and `timeout_seconds` as null; a strict peer answered neither."""
    hub = ScriptedHub()
    sb = HubSandbox(hub, "s")
    try:
        await asyncio.wait_for(SANDBOX_CALLS[call](sb), 5)
    finally:
        await sb.close()
    _assert_strict_and_absolute(hub.relayed())


@pytest.mark.parametrize("call", list(MACHINE_CALLS), ids=list(MACHINE_CALLS))
async def test_every_machine_control_frame_is_one_a_strict_peer_accepts(call: str) -> None:
    hub = ScriptedHub()
    machine = MachineControl(hub, "m")
    try:
        await asyncio.wait_for(MACHINE_CALLS[call](machine), 5)
    finally:
        await machine.close()
    _assert_strict_and_absolute(hub.relayed())


async def test_relative_paths_resolve_against_the_sessions_allowed_root() -> None:
    """Before: "notes/a.txt" went out as is, and a peer that resolves it
    against its own working directory answered PATH_OUTSIDE_ALLOWED_ROOT."""
    hub = ScriptedHub()
    sb = HubSandbox(hub, "s")
    try:
        written = await sb.files.write("notes/a.txt", "x")
        await sb.files.rename("notes/a.txt", "notes/b.txt")
        await sb.commands.run("ls", cwd="notes")
        await sb.files.read("./c")
        await sb.files.list(".")
    finally:
        await sb.close()
    sent = [json.loads(f) for f in hub.relayed()]
    assert sent[0]["payload"]["path"] == f"{ROOT}/notes/a.txt"
    assert written.path == f"{ROOT}/notes/a.txt"
    assert (sent[1]["payload"]["src"], sent[1]["payload"]["dst"]) == (
        f"{ROOT}/notes/a.txt",
        f"{ROOT}/notes/b.txt",
    )
    commands = [f for f in sent if f["type"] == "EXECUTE_COMMAND"]
    assert commands[0]["payload"]["cwd"] == f"{ROOT}/notes"
    assert [f["payload"]["path"] for f in sent if f["type"] == "FILE_READ"] == [f"{ROOT}/./c"]
    assert [f["payload"]["path"] for f in sent if f["type"] == "FILE_LIST"] == [f"{ROOT}/."]
    # the root was asked for once, and only for relative paths
    asked = [f for f in hub.sent if json.loads(f)["type"] == SESSION_INFO_REQUEST]
    assert len(asked) == 1


async def test_absolute_paths_never_ask_for_the_root() -> None:
    hub = ScriptedHub()
    sb = HubSandbox(hub, "s")
    try:
        await sb.files.write("/elsewhere/a.txt", "x")
    finally:
        await sb.close()
    assert [json.loads(f)["type"] for f in hub.sent] == ["FILE_WRITE"]


async def test_a_windows_root_joins_with_backslashes() -> None:
    hub = ScriptedHub(allowed_root="C:\\Users\\alice\\work")
    sb = HubSandbox(hub, "s")
    try:
        await sb.files.write("notes\\a.txt", "x")
        await sb.files.write("D:\\abs.txt", "y")
    finally:
        await sb.close()
    paths = [json.loads(f)["payload"]["path"] for f in hub.relayed()]
    assert paths == ["C:\\Users\\alice\\work\\notes\\a.txt", "D:\\abs.txt"]


async def test_a_hub_that_reports_no_root_gets_a_clear_error_for_relative_paths() -> None:
    from tetherbed.client.sandbox import AgentUnavailableError

    hub = ScriptedHub(allowed_root=None)
    sb = HubSandbox(hub, "s")
    try:
        with pytest.raises(AgentUnavailableError) as refused:
            await sb.files.write("a.txt", "x")
    finally:
        await sb.close()
    assert "a.txt" in refused.value.message and "absolute" in refused.value.message
    assert [json.loads(f)["type"] for f in hub.sent] == [SESSION_INFO_REQUEST]


def test_the_connection_class_is_shared() -> None:
    assert issubclass(HubSandbox, HubConnection) and issubclass(MachineControl, HubConnection)
