"""HubSandbox against a small fake hub on loopback.

The fake hub checks the upgrade the way the real one must (path, bearer
token, no compression), refuses with the contract's JSON bodies, records
every frame it receives, and answers from a per-test script, so each test
asserts the exact wire payloads and controls order, errors and drops.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from tetherbed.client.sandbox import (
    AgentUnavailableError,
    AuthenticationError,
    CommandExitException,
    ConnectFailedError,
    ConnectionLost,
    EntryInfo,
    FileType,
    HubError,
    HubSandbox,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    OverloadedError,
    PermissionDeniedError,
    RequestTimeoutError,
    TooLargeError,
    UnexpectedResponseError,
    WriteInfo,
    client_url,
)
from tetherbed.runtime.transport import TransportClosed, UpgradeRefused
from tetherbed.wire.limits import FRAME_LIMIT_BYTES
from tetherbed.wire.messages import FileStat

TOKEN = "secret-token"
SESSION = "sess-1"
PATH_PATTERN = re.compile(r"^/v1/sessions/(?P<session>[^/]+)/client$")

# --- the fake hub -------------------------------------------------------------


class Peer:
    """The hub's end of one client connection, as a test script sees it."""

    def __init__(
        self, ws: ServerConnection, log: list[dict[str, Any]], arrived: asyncio.Event
    ) -> None:
        self.ws = ws
        self.log = log
        self.arrived = arrived

    async def recv(self) -> dict[str, Any]:
        data = await self.ws.recv()
        assert isinstance(data, str), "the client must send text frames"
        envelope = json.loads(data)
        self.log.append(envelope)
        self.arrived.set()
        return envelope

    async def recv_many(self, count: int) -> list[dict[str, Any]]:
        return [await self.recv() for _ in range(count)]

    async def reply(
        self, request: dict[str, Any], kind: str, payload: dict[str, Any], **extra: Any
    ) -> None:
        await self.send({"type": kind, "id": request["id"], "payload": payload, **extra})

    async def error(
        self,
        request_id: str | None,
        code: str,
        message: str = "",
        *,
        fatal: bool = False,
        details: dict[str, Any] | None = None,
    ) -> None:
        payload: dict[str, Any] = {"code": code, "message": message, "fatal": fatal}
        if details is not None:
            payload["details"] = details
        await self.send({"type": "ERROR", "id": request_id, "payload": payload})

    async def send(self, frame: dict[str, Any]) -> None:
        await self.ws.send(json.dumps({"ts": time.time(), "version": "1.1", **frame}))


Script = Callable[[Peer], Awaitable[None]]


class FakeHub:
    """A `websockets` server speaking the hub's client protocol from a script."""

    def __init__(self, script: Script, *, sessions: tuple[str, ...] = (SESSION,)) -> None:
        self.script = script
        self.sessions = sessions
        self.received: list[dict[str, Any]] = []
        self.upgrade_headers: list[Headers] = []
        self.script_errors: list[BaseException] = []
        #: Set when the hub has received its first frame.
        self.first_frame = asyncio.Event()
        self.server: Server | None = None
        self.url = ""

    async def start(self) -> None:
        self.server = await serve(
            self._serve,
            "127.0.0.1",
            0,
            process_request=self._check_upgrade,
            compression=None,
            max_size=FRAME_LIMIT_BYTES,
        )
        port = next(iter(self.server.sockets)).getsockname()[1]
        self.url = f"ws://127.0.0.1:{port}"

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    def _check_upgrade(self, connection: ServerConnection, request: Request) -> Response | None:
        self.upgrade_headers.append(request.headers)
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return _json_response(connection, 401, "AUTH_FAILED", "bad or missing token")
        match = PATH_PATTERN.match(request.path)
        if match is None or match["session"] not in self.sessions:
            return _json_response(connection, 404, "SESSION_NOT_FOUND", "no such session")
        return None

    async def _serve(self, ws: ServerConnection) -> None:
        try:
            await self.script(Peer(ws, self.received, self.first_frame))
        except ConnectionClosed:
            pass
        except Exception as exc:  # surfaced by the fixture, never swallowed
            self.script_errors.append(exc)
            raise
        # Keep the socket open until the client leaves, unless the script closed it.
        await ws.wait_closed()


def _json_response(connection: ServerConnection, status: int, code: str, message: str) -> Response:
    response = connection.respond(status, json.dumps({"error": {"code": code, "message": message}}))
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = "application/json"
    return response


@pytest.fixture
async def start_hub() -> AsyncIterator[Callable[[Script], Awaitable[FakeHub]]]:
    hubs: list[FakeHub] = []

    async def start(script: Script, **options: Any) -> FakeHub:
        hub = FakeHub(script, **options)
        await hub.start()
        hubs.append(hub)
        return hub

    yield start
    for hub in hubs:
        await hub.stop()
        assert not hub.script_errors, hub.script_errors


def serve_forever(answer: Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]) -> Script:
    """A script that answers every request in order with `answer(request)`."""

    async def script(peer: Peer) -> None:
        while True:
            request = await peer.recv()
            kind, payload = answer(request)
            await peer.reply(request, kind, payload)

    return script


async def open_sandbox(hub: FakeHub, **options: Any) -> HubSandbox:
    return await HubSandbox.connect(hub.url, SESSION, TOKEN, **options)


def stat_payload(path: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "exists": True,
        "is_file": True,
        "is_dir": False,
        "is_symlink": False,
        "size_bytes": 5,
        "mtime": 1_700_000_000.0,
        "ctime": 1_700_000_000.0,
        "mode": "0644",
        "owner_uid": 501,
        "owner_gid": 20,
        "mime_type": "text/plain",
        "path": path,
    }
    return {**base, **fields}


def entry(path: str, *, is_dir: bool = False, size: int = 3) -> dict[str, Any]:
    return {
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "is_file": not is_dir,
        "is_dir": is_dir,
        "is_symlink": False,
        "size_bytes": size,
        "mtime": 1_700_000_100.0,
    }


ACK = ("ACK", {"ok": True})

# --- connecting ---------------------------------------------------------------


async def test_connect_sends_bearer_token_without_compression(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: ACK))
    async with HubSandbox.connect(hub.url, SESSION, TOKEN) as sb:
        assert sb.session_id == SESSION
        assert not sb.closed
    headers = hub.upgrade_headers[0]
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert "Sec-WebSocket-Extensions" not in headers
    assert sb.closed


async def test_wrong_token_raises_authentication_error(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: ACK))
    with pytest.raises(AuthenticationError) as caught:
        await HubSandbox.connect(hub.url, SESSION, "wrong")
    assert caught.value.code == "AUTH_FAILED"
    assert caught.value.http_status == 401
    assert caught.value.message == "bad or missing token"


async def test_unknown_session_raises_not_found(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: ACK))
    with pytest.raises(NotFoundError) as caught:
        await HubSandbox.connect(hub.url, "someone-elses", TOKEN)
    assert caught.value.code == "SESSION_NOT_FOUND"
    assert caught.value.http_status == 404
    assert caught.value.message == "no such session"


async def test_nothing_listening_raises_connect_failed(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: ACK))
    url = hub.url
    await hub.stop()
    with pytest.raises(ConnectFailedError) as caught:
        await HubSandbox.connect(url, SESSION, TOKEN, open_timeout=5)
    assert caught.value.code == "CONNECT_FAILED"


def test_client_url_maps_http_and_quotes_the_session() -> None:
    assert client_url("ws://h:1/", "a b/c") == "ws://h:1/v1/sessions/a%20b%2Fc/client"
    assert client_url("http://h:1", "s") == "ws://h:1/v1/sessions/s/client"
    assert client_url("https://h", "s") == "wss://h/v1/sessions/s/client"


# --- files ----------------------------------------------------------------------


async def test_read_text_sends_format_and_encoding(start_hub) -> None:
    content = "col1,col2\r\n1,2\n"
    hub = await start_hub(
        serve_forever(
            lambda request: (
                "FILE_CONTENTS",
                {"content": content, "encoding": "utf-8", "size_bytes": 15, "truncated": False},
            )
        )
    )
    async with await open_sandbox(hub) as sb:
        assert await sb.files.read("/w/data.csv") == content  # CRLF untouched
    request = hub.received[0]
    assert request["type"] == "FILE_READ"
    assert request["version"] == "1.1"
    assert isinstance(request["ts"], float)
    assert request["payload"] == {
        "path": "/w/data.csv",
        "encoding": "utf-8",
        "format": "text",
        "offset": 0,
        "length": None,
    }


async def test_read_bytes_decodes_base64(start_hub) -> None:
    raw = bytes(range(256))
    hub = await start_hub(
        serve_forever(
            lambda request: (
                "FILE_CONTENTS",
                {
                    "content": base64.b64encode(raw).decode(),
                    "encoding": "base64",
                    "size_bytes": len(raw),
                    "truncated": False,
                },
            )
        )
    )
    async with await open_sandbox(hub) as sb:
        data = await sb.files.read("/w/blob.bin", format="bytes", offset=4, length=256)
    assert data == raw
    assert isinstance(data, bytes)
    assert hub.received[0]["payload"] == {
        "path": "/w/blob.bin",
        "encoding": "base64",
        "format": "bytes",
        "offset": 4,
        "length": 256,
    }


async def test_truncated_whole_file_read_raises_too_large(start_hub) -> None:
    hub = await start_hub(
        serve_forever(
            lambda request: (
                "FILE_CONTENTS",
                {"content": "par", "encoding": "utf-8", "size_bytes": 3, "truncated": True},
            )
        )
    )
    async with await open_sandbox(hub) as sb:
        with pytest.raises(TooLargeError) as caught:
            await sb.files.read("/w/big.log")
    assert caught.value.code == "FILE_TOO_LARGE"


async def test_read_rejects_stream_format_without_sending(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: ACK))
    async with await open_sandbox(hub) as sb:
        with pytest.raises(InvalidArgumentError):
            await sb.files.read("/w/a", format="stream")  # type: ignore[call-overload]
    assert hub.received == []


async def test_write_text_creates_parents(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: ACK))
    async with await open_sandbox(hub) as sb:
        info = await sb.files.write("/w/sub/out.txt", "héllo\n")
    assert info == WriteInfo(name="out.txt", type=FileType.FILE, path="/w/sub/out.txt")
    assert hub.received[0]["type"] == "FILE_WRITE"
    assert hub.received[0]["payload"] == {
        "path": "/w/sub/out.txt",
        "content": "héllo\n",
        "encoding": "utf-8",
        "create_parents": True,
    }  # no `format`: FILE_WRITE has none (the both-fields rule is FILE_READ's)


async def test_write_bytes_goes_as_base64(start_hub) -> None:
    raw = b"\x00\xff\x10binary"
    hub = await start_hub(serve_forever(lambda request: ACK))
    async with await open_sandbox(hub) as sb:
        await sb.files.write("/w/b.bin", raw)
    assert hub.received[0]["payload"] == {
        "path": "/w/b.bin",
        "content": base64.b64encode(raw).decode(),
        "encoding": "base64",
        "create_parents": True,
    }


async def test_write_over_the_frame_limit_fails_before_sending(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: ACK))
    async with await open_sandbox(hub) as sb:
        with pytest.raises(TooLargeError) as caught:
            await sb.files.write("/w/huge", b"\0" * (13 * 1024 * 1024))
        assert caught.value.code == "FRAME_TOO_LARGE"
        await sb.files.write("/w/small", "ok")  # the connection is still usable
    assert [r["payload"]["path"] for r in hub.received] == ["/w/small"]


async def test_list_depth_one_maps_entries(start_hub) -> None:
    listing = {
        "entries": [entry("/w/a.txt", size=7), entry("/w/sub", is_dir=True, size=0)],
        "truncated": False,
    }
    hub = await start_hub(serve_forever(lambda request: ("FILE_LIST_RESPONSE", listing)))
    async with await open_sandbox(hub) as sb:
        entries = await sb.files.list("/w")
    assert hub.received[0]["type"] == "FILE_LIST"
    assert hub.received[0]["payload"] == {
        "path": "/w",
        "recursive": False,
        "include_hidden": True,
        "max_entries": 1000,
    }
    assert entries == [
        EntryInfo(
            name="a.txt",
            type=FileType.FILE,
            path="/w/a.txt",
            size=7,
            modified_time=datetime.fromtimestamp(1_700_000_100.0, tz=UTC),
        ),
        EntryInfo(
            name="sub",
            type=FileType.DIR,
            path="/w/sub",
            size=0,
            modified_time=datetime.fromtimestamp(1_700_000_100.0, tz=UTC),
        ),
    ]
    assert entries.truncated is False


async def test_list_deeper_asks_recursively_and_filters_by_depth(start_hub) -> None:
    listing = {
        "entries": [
            entry("/w/sub", is_dir=True),
            entry("/w/sub/inner", is_dir=True),
            entry("/w/sub/inner/deep.txt"),
            entry("/w/sub/x.txt"),
            entry("/w/top.txt"),
        ],
        "truncated": True,
    }
    hub = await start_hub(serve_forever(lambda request: ("FILE_LIST_RESPONSE", listing)))
    async with await open_sandbox(hub) as sb:
        entries = await sb.files.list("/w/", depth=2)
        with pytest.raises(InvalidArgumentError):
            await sb.files.list("/w", depth=0)
    assert hub.received[0]["payload"]["recursive"] is True
    assert len(hub.received) == 1
    assert [e.path for e in entries] == ["/w/sub", "/w/sub/inner", "/w/sub/x.txt", "/w/top.txt"]
    assert entries.truncated is True


async def test_exists_maps_missing_to_false_but_raises_on_jail(start_hub) -> None:
    async def script(peer: Peer) -> None:
        request = await peer.recv()
        await peer.reply(request, "FILE_STAT_RESPONSE", stat_payload("/w/a"))
        request = await peer.recv()
        await peer.reply(request, "FILE_STAT_RESPONSE", {"exists": False, "path": "/w/gone"})
        request = await peer.recv()
        await peer.error(request["id"], "PATH_NOT_FOUND", "no such path")
        request = await peer.recv()
        await peer.error(request["id"], "PATH_OUTSIDE_ALLOWED_ROOT", "/etc is outside")

    hub = await start_hub(script)
    async with await open_sandbox(hub) as sb:
        assert await sb.files.exists("/w/a") is True
        assert await sb.files.exists("/w/gone") is False
        assert await sb.files.exists("/w/missing-parent/x") is False
        with pytest.raises(PermissionDeniedError) as caught:
            await sb.files.exists("/etc/passwd")
    assert caught.value.code == "PATH_OUTSIDE_ALLOWED_ROOT"
    assert [r["type"] for r in hub.received] == ["FILE_STAT"] * 4
    assert hub.received[0]["payload"] == {"path": "/w/a", "follow_symlinks": False}


async def test_get_info_maps_stat_fields(start_hub) -> None:
    hub = await start_hub(
        serve_forever(lambda request: ("FILE_STAT_RESPONSE", stat_payload("/w/a.txt")))
    )
    async with await open_sandbox(hub) as sb:
        info = await sb.files.get_info("/w/a.txt")
    assert info == EntryInfo(
        name="a.txt",
        type=FileType.FILE,
        path="/w/a.txt",
        size=5,
        modified_time=datetime.fromtimestamp(1_700_000_000.0, tz=UTC),
        mode=0o644,
        permissions="rw-r--r--",
        owner="501",
        group="20",
        mime_type="text/plain",
    )


async def test_get_info_of_a_link_resolves_its_target(start_hub) -> None:
    def answer(request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if request["payload"]["follow_symlinks"]:
            return "FILE_STAT_RESPONSE", stat_payload("/w/real/target.txt")
        return "FILE_STAT_RESPONSE", stat_payload("/w/link", is_file=False, is_symlink=True)

    hub = await start_hub(serve_forever(answer))
    async with await open_sandbox(hub) as sb:
        info = await sb.files.get_info("/w/link")
    assert info.is_symlink is True
    assert info.type is None
    assert info.path == "/w/link"
    assert info.symlink_target == "/w/real/target.txt"
    assert [r["payload"]["follow_symlinks"] for r in hub.received] == [False, True]


async def test_get_info_of_missing_path_raises_not_found(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: ("FILE_STAT_RESPONSE", {"exists": False})))
    async with await open_sandbox(hub) as sb:
        with pytest.raises(NotFoundError) as caught:
            await sb.files.get_info("/w/nope")
    assert caught.value.code == "PATH_NOT_FOUND"


async def test_remove_deletes_recursively(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: ACK))
    async with await open_sandbox(hub) as sb:
        assert await sb.files.remove("/w/dir") is None
    assert hub.received[0]["type"] == "FILE_DELETE"
    assert hub.received[0]["payload"] == {"path": "/w/dir", "recursive": True, "missing_ok": False}


async def test_rename_moves_then_stats_the_new_path(start_hub) -> None:
    def answer(request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if request["type"] == "FILE_MOVE":
            return ACK
        return "FILE_STAT_RESPONSE", stat_payload(request["payload"]["path"])

    hub = await start_hub(serve_forever(answer))
    async with await open_sandbox(hub) as sb:
        info = await sb.files.rename("/w/a.csv", "/w/b.csv")
    assert info.path == "/w/b.csv"
    assert info.name == "b.csv"
    assert [r["type"] for r in hub.received] == ["FILE_MOVE", "FILE_STAT"]
    assert hub.received[0]["payload"] == {"src": "/w/a.csv", "dst": "/w/b.csv", "overwrite": False}
    assert hub.received[1]["payload"] == {"path": "/w/b.csv", "follow_symlinks": False}


async def test_wrong_answer_type_raises_unexpected_response(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: ACK))
    async with await open_sandbox(hub) as sb:
        with pytest.raises(UnexpectedResponseError):
            await sb.files.read("/w/a")


# --- commands ---------------------------------------------------------------------


def command_result(**fields: Any) -> tuple[str, dict[str, Any]]:
    base = {
        "stdout": "out\n",
        "stderr": "",
        "exit_code": 0,
        "timed_out": False,
        "duration_seconds": 0.25,
        "output_truncated": False,
    }
    return "COMMAND_RESULT", {**base, **fields}


async def test_run_sends_command_env_cwd_and_timeout(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: command_result()))
    seen: list[str] = []
    async with await open_sandbox(hub) as sb:
        result = await sb.commands.run(
            "ls -la", envs={"MY_VAR": "1"}, cwd="/w", timeout=30, on_stdout=seen.append
        )
    assert hub.received[0]["type"] == "EXECUTE_COMMAND"
    assert hub.received[0]["payload"] == {
        "command": "ls -la",
        "shell": "auto",
        "cwd": "/w",
        "timeout_seconds": 30,
        "env": {"MY_VAR": "1"},
    }
    assert (result.stdout, result.stderr, result.exit_code, result.error) == ("out\n", "", 0, None)
    assert (result.timed_out, result.output_truncated, result.duration_seconds) == (
        False,
        False,
        0.25,
    )
    assert seen == ["out\n"]


async def test_run_with_a_list_sends_argv(start_hub) -> None:
    hub = await start_hub(serve_forever(lambda request: command_result()))
    async with await open_sandbox(hub) as sb:
        await sb.commands.run(["ls", "-la", "/tmp"], timeout=0)
        with pytest.raises(InvalidArgumentError):
            await sb.commands.run([])
    assert len(hub.received) == 1
    assert hub.received[0]["payload"] == {"argv": ["ls", "-la", "/tmp"]}  # only what was given


async def test_run_nonzero_exit_raises_with_the_result(start_hub) -> None:
    hub = await start_hub(
        serve_forever(lambda request: command_result(stderr="boom\n", exit_code=2))
    )
    async with await open_sandbox(hub) as sb:
        with pytest.raises(CommandExitException) as caught:
            await sb.commands.run("false")
    error = caught.value
    assert isinstance(error, HubError)
    assert (error.code, error.exit_code, error.stdout, error.stderr) == (
        "COMMAND_EXIT",
        2,
        "out\n",
        "boom\n",
    )
    assert error.error == "exit status 2"
    assert error.result.exit_code == 2


async def test_run_timeout_raises_command_timeout(start_hub) -> None:
    hub = await start_hub(
        serve_forever(lambda request: command_result(exit_code=-1, timed_out=True))
    )
    async with await open_sandbox(hub) as sb:
        with pytest.raises(CommandExitException) as caught:
            await sb.commands.run("sleep 100", timeout=1)
    assert caught.value.code == "COMMAND_TIMEOUT"
    assert caught.value.timed_out is True
    assert caught.value.exit_code == -1


# --- pipelining, errors, drops, streams -----------------------------------------


async def test_fifty_pipelined_requests_answered_in_reverse(start_hub) -> None:
    count = 50

    async def script(peer: Peer) -> None:
        requests = await peer.recv_many(count)
        for request in reversed(requests):
            path = request["payload"]["path"]
            await peer.reply(
                request,
                "FILE_CONTENTS",
                {"content": path, "encoding": "utf-8", "size_bytes": len(path), "truncated": False},
                pending_capacity=0,
            )

    hub = await start_hub(script)
    async with await open_sandbox(hub, request_timeout=10) as sb:
        paths = [f"/w/file-{n}" for n in range(count)]
        results = await asyncio.gather(*(sb.files.read(path) for path in paths))
        assert sb.pending_count == 0
    assert results == paths
    assert len({r["id"] for r in hub.received}) == count


ERROR_CASES = [
    ("PATH_NOT_FOUND", NotFoundError),
    ("PATH_OUTSIDE_ALLOWED_ROOT", PermissionDeniedError),
    ("CAPABILITY_NOT_GRANTED", PermissionDeniedError),
    ("FILE_TOO_LARGE", TooLargeError),
    ("SHIM_OVERLOADED", OverloadedError),
    ("AGENT_NOT_CONNECTED", AgentUnavailableError),
    ("AGENT_DISCONNECTED", AgentUnavailableError),
    ("OUTCOME_UNKNOWN", OutcomeUnknownError),
    ("INVALID_MESSAGE", InvalidArgumentError),
    ("DUPLICATE_REQUEST_ID", InvalidArgumentError),
    ("MESSAGE_NOT_ALLOWED", InvalidArgumentError),
    ("AUTH_FAILED", AuthenticationError),
    ("SESSION_NOT_FOUND", NotFoundError),
    ("SOMETHING_NEW", HubError),
]


@pytest.mark.parametrize(("code", "error_class"), ERROR_CASES)
async def test_error_answers_raise_typed_errors(start_hub, code, error_class) -> None:
    async def script(peer: Peer) -> None:
        request = await peer.recv()
        await peer.error(request["id"], code, "it went wrong", details={"hint": 1})

    hub = await start_hub(script)
    async with await open_sandbox(hub) as sb:
        with pytest.raises(error_class) as caught:
            await sb.request("FILE_STAT", FileStat(path="/w/x"))
    assert type(caught.value) is error_class
    assert caught.value.code == code
    assert caught.value.message == "it went wrong"
    assert caught.value.details == {"hint": 1}
    assert caught.value.fatal is False


async def test_request_returns_the_terminal_frame(start_hub) -> None:
    hub = await start_hub(
        serve_forever(lambda request: ("FILE_STAT_RESPONSE", stat_payload("/w/x")))
    )
    async with await open_sandbox(hub) as sb:
        kind, payload = await sb.request("FILE_STAT", {"path": "/w/x"})
    assert kind == "FILE_STAT_RESPONSE"
    assert payload.exists is True
    assert payload.path == "/w/x"


async def test_socket_drop_fails_every_pending_request_at_once(start_hub) -> None:
    async def script(peer: Peer) -> None:
        await peer.recv_many(5)
        await peer.ws.close(code=1011, reason="hub exploded")

    hub = await start_hub(script)
    sb = await open_sandbox(hub)
    async with asyncio.timeout(5):
        results = await asyncio.gather(
            *(sb.files.read(f"/w/{n}") for n in range(5)), return_exceptions=True
        )
    assert all(isinstance(result, ConnectionLost) for result in results), results
    assert {result.close_code for result in results} == {1011}
    assert results[0].close_reason == "hub exploded"
    assert results[0] is not results[1]
    assert sb.closed
    with pytest.raises(ConnectionLost):  # later calls fail at once too
        await sb.files.exists("/w/x")
    await sb.close()


async def test_abrupt_drop_without_close_frame_fails_pending(start_hub) -> None:
    async def script(peer: Peer) -> None:
        await peer.recv_many(3)
        peer.ws.transport.abort()

    hub = await start_hub(script)
    sb = await open_sandbox(hub)
    async with asyncio.timeout(5):
        results = await asyncio.gather(
            *(sb.commands.run(f"echo {n}") for n in range(3)), return_exceptions=True
        )
    assert all(isinstance(result, ConnectionLost) for result in results), results
    assert results[0].close_code is None
    await sb.close()


async def test_close_fails_requests_still_waiting(start_hub) -> None:
    async def script(peer: Peer) -> None:
        await peer.recv()

    hub = await start_hub(script)
    sb = await open_sandbox(hub)
    waiting = asyncio.create_task(sb.files.read("/w/slow"))
    await hub.first_frame.wait()
    await sb.close()
    with pytest.raises(ConnectionLost):
        await waiting


async def test_request_timeout_gives_up_and_drops_the_late_answer(start_hub) -> None:
    async def script(peer: Peer) -> None:
        slow = await peer.recv()
        fast = await peer.recv()
        await peer.reply(slow, *ACK)  # late: the client already gave up on it
        await peer.reply(fast, *ACK)

    hub = await start_hub(script)
    async with await open_sandbox(hub, request_timeout=0.2) as sb:
        with pytest.raises(RequestTimeoutError) as caught:
            await sb.files.remove("/w/slow")
        assert isinstance(caught.value, TimeoutError)
        assert sb.pending_count == 0
        await sb.files.remove("/w/fast", request_timeout=5)
        assert sb.pending_count == 0


async def test_injected_ids_and_local_duplicate_check(start_hub) -> None:
    ids = iter(f"req-{n}" for n in range(100))

    async def script(peer: Peer) -> None:
        first = await peer.recv()
        second = await peer.recv()
        await peer.reply(second, *ACK)
        await peer.reply(first, *ACK)

    hub = await start_hub(script)
    async with await open_sandbox(hub, id_factory=lambda: next(ids)) as sb:
        first = asyncio.create_task(sb.request("FILE_DELETE", {"path": "/a"}, request_id="mine"))
        await hub.first_frame.wait()
        with pytest.raises(InvalidArgumentError) as caught:
            await sb.request("FILE_DELETE", {"path": "/b"}, request_id="mine")
        assert caught.value.code == "DUPLICATE_REQUEST_ID"
        await sb.files.remove("/c")
        assert (await first).type == "ACK"
    assert [r["id"] for r in hub.received] == ["mine", "req-0"]


async def test_connection_level_errors_are_kept_and_fatal_ones_end_the_session(
    start_hub,
) -> None:
    async def script(peer: Peer) -> None:
        await peer.error(None, "INVALID_MESSAGE", "that frame made no sense")
        first = await peer.recv()
        await peer.reply(first, *ACK)
        await peer.recv()
        await peer.error(None, "SESSION_NOT_FOUND", "session deleted", fatal=True)

    hub = await start_hub(script)
    sb = await open_sandbox(hub)
    await sb.files.remove("/w/a")
    assert [e.code for e in sb.connection_errors] == ["INVALID_MESSAGE"]
    async with asyncio.timeout(5):
        with pytest.raises(NotFoundError) as caught:
            await sb.files.remove("/w/b")
    assert caught.value.code == "SESSION_NOT_FOUND"
    assert caught.value.fatal is True
    assert sb.closed
    await sb.close()


async def test_answers_for_unknown_ids_are_ignored(start_hub) -> None:
    async def script(peer: Peer) -> None:
        request = await peer.recv()
        await peer.send({"type": "ACK", "id": "nobody-asked", "payload": {"ok": True}})
        await peer.error("nobody-either", "INTERNAL_ERROR", "stray")
        await peer.reply(request, *ACK)

    hub = await start_hub(script)
    async with await open_sandbox(hub) as sb:
        await sb.files.remove("/w/a")
        assert list(sb.connection_errors) == []


CHUNK = "LOCAL_LLM_COMPLETION_CHUNK"
LLM_REQUEST = {
    "model": "llama3.2:3b",
    "messages": [{"role": "user", "content": "Say hi"}],
    "stream": True,
}


async def test_stream_yields_chunks_then_the_terminal_frame(start_hub) -> None:
    async def script(peer: Peer) -> None:
        llm = await peer.recv()
        stat = await peer.recv()
        await peer.reply(llm, "LOCAL_LLM_COMPLETION_CHUNK", {"delta": "Hel", "finish_reason": None})
        await peer.reply(stat, "FILE_STAT_RESPONSE", stat_payload("/w/x"))  # interleaved
        await peer.reply(
            llm, "LOCAL_LLM_COMPLETION_CHUNK", {"delta": "lo", "finish_reason": "stop"}
        )
        await peer.reply(
            llm,
            "LOCAL_LLM_COMPLETION_RESPONSE",
            {"content": "Hello", "finish_reason": "stop", "tokens": None, "duration_seconds": 0.1},
        )

    hub = await start_hub(script)
    async with await open_sandbox(hub, request_timeout=5) as sb:
        async with sb.stream("LOCAL_LLM_COMPLETION", LLM_REQUEST) as frames:
            stat = asyncio.create_task(sb.files.exists("/w/x"))
            received = [frame async for frame in frames]
        assert await stat is True
    assert [f.type for f in received] == [
        "LOCAL_LLM_COMPLETION_CHUNK",
        "LOCAL_LLM_COMPLETION_CHUNK",
        "LOCAL_LLM_COMPLETION_RESPONSE",
    ]
    assert "".join(f.payload.delta for f in received[:2]) == received[2].payload.content
    assert hub.received[0]["payload"] == LLM_REQUEST


async def test_request_skips_chunks_and_stream_raises_errors(start_hub) -> None:
    async def script(peer: Peer) -> None:
        first = await peer.recv()
        await peer.reply(first, "LOCAL_LLM_COMPLETION_CHUNK", {"delta": "x", "finish_reason": None})
        await peer.reply(
            first,
            "LOCAL_LLM_COMPLETION_RESPONSE",
            {"content": "x", "finish_reason": "stop", "duration_seconds": 0.0},
        )
        second = await peer.recv()
        await peer.reply(
            second, "LOCAL_LLM_COMPLETION_CHUNK", {"delta": "y", "finish_reason": None}
        )
        await peer.error(second["id"], "LOCAL_LLM_FAILED", "backend crashed")

    hub = await start_hub(script)
    async with await open_sandbox(hub, request_timeout=5) as sb:
        kind, payload = await sb.request("LOCAL_LLM_COMPLETION", LLM_REQUEST)
        assert (kind, payload.content) == ("LOCAL_LLM_COMPLETION_RESPONSE", "x")
        deltas = []
        with pytest.raises(HubError) as caught:
            async for frame in sb.stream("LOCAL_LLM_COMPLETION", LLM_REQUEST):
                deltas.append(frame.payload.delta)
        assert deltas == ["y"]
        assert caught.value.code == "LOCAL_LLM_FAILED"
        assert sb.pending_count == 0


# --- any MessageTransport (the simulator's in-memory network) ---------------------


class MemoryTransport:
    """A `MessageTransport` fed by the test, like the simulator's network."""

    def __init__(self) -> None:
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.inbox: asyncio.Queue[bytes | Exception] = asyncio.Queue()
        self.closed_with: tuple[int, str] | None = None

    async def send(self, data: bytes) -> None:
        self.sent.put_nowait(json.loads(data))

    async def recv(self) -> bytes:
        item = await self.inbox.get()
        if isinstance(item, Exception):
            raise item
        return item

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.closed_with = (code, reason)


async def test_connector_carries_url_and_token_and_close_codes_surface() -> None:
    transport = MemoryTransport()
    opened: list[tuple[str, dict[str, str]]] = []

    async def connector(url: str, headers: Any) -> MemoryTransport:
        opened.append((url, dict(headers)))
        return transport

    sb = await HubSandbox.connect("ws://sim:1", SESSION, TOKEN, connector=connector)
    assert opened == [
        ("ws://sim:1/v1/sessions/sess-1/client", {"Authorization": f"Bearer {TOKEN}"})
    ]
    first = asyncio.create_task(sb.files.remove("/w/a"))
    second = asyncio.create_task(sb.files.remove("/w/b"))
    sent = [await transport.sent.get(), await transport.sent.get()]
    assert [frame["payload"]["path"] for frame in sent] == ["/w/a", "/w/b"]
    answer = {"type": "ACK", "id": sent[1]["id"], "payload": {"ok": True}}
    transport.inbox.put_nowait(json.dumps(answer).encode())
    await second
    transport.inbox.put_nowait(TransportClosed(4429, "platform shutdown"))
    with pytest.raises(ConnectionLost) as caught:
        await first
    assert (caught.value.close_code, caught.value.close_reason) == (4429, "platform shutdown")
    await sb.close()
    assert transport.closed_with == (1000, "")


@pytest.mark.parametrize(
    ("refusal", "error_class", "code"),
    [
        (UpgradeRefused(401, b""), AuthenticationError, "AUTH_FAILED"),
        (UpgradeRefused(404, b"not json"), NotFoundError, "SESSION_NOT_FOUND"),
        (UpgradeRefused(503, b""), ConnectFailedError, "CONNECT_FAILED"),
        (OSError("network unreachable"), ConnectFailedError, "CONNECT_FAILED"),
    ],
)
async def test_connector_failures_become_typed_errors(refusal, error_class, code) -> None:
    async def connector(url: str, headers: Any) -> MemoryTransport:
        raise refusal

    with pytest.raises(error_class) as caught:
        await HubSandbox.connect("ws://sim:1", SESSION, TOKEN, connector=connector)
    assert caught.value.code == code


async def test_llm_streams_text_and_keeps_the_response(start_hub) -> None:
    async def script(peer: Peer) -> None:
        llm = await peer.recv()
        for delta, reason in (("Hel", None), ("lo", None), ("", "stop")):
            await peer.reply(llm, CHUNK, {"delta": delta, "finish_reason": reason})
        await peer.reply(
            llm,
            "LOCAL_LLM_COMPLETION_RESPONSE",
            {"content": "Hello", "finish_reason": "stop", "tokens": None, "duration_seconds": 0.1},
        )
        whole = await peer.recv()
        await peer.reply(
            whole,
            "LOCAL_LLM_COMPLETION_RESPONSE",
            {"content": "Hi", "finish_reason": "length", "tokens": None, "duration_seconds": 0.1},
        )

    hub = await start_hub(script)
    messages = [{"role": "user", "content": "Say hi"}]
    async with await open_sandbox(hub, request_timeout=5) as sb:
        pieces = [d async for d in sb.llm.stream("llama3.2:3b", messages, max_tokens=8)]
        assert pieces == ["Hel", "lo"] and sb.llm.last.content == "Hello"  # type: ignore[union-attr]
        whole = await sb.llm.complete("llama3.2:3b", messages, temperature=0.0)
        assert (whole.content, whole.finish_reason) == ("Hi", "length")
    assert hub.received[0]["payload"] == {
        "model": "llama3.2:3b",
        "messages": messages,
        "max_tokens": 8,
        "stream": True,
    }
    assert hub.received[1]["payload"]["stream"] is False
