"""Python client for one session on the Tetherbed hub, shaped like E2B's AsyncSandbox.

Platforms duck-type E2B's `AsyncSandbox`, so `HubSandbox` offers the same
`files.*` and `commands.run` calls and result shapes, translated to the
local-executor wire messages the hub relays to the session's agent. One
reader task routes every answer to its request by id, so any number of calls
may be in flight at once over the single socket; when the socket ends, every
waiting call fails at once with `ConnectionLost` instead of hanging.

    async with HubSandbox.connect("ws://127.0.0.1:8765", session_id, token) as sb:
        await sb.files.write("/work/a.txt", "hello")
        result = await sb.commands.run("cat a.txt", cwd="/work")

See docs/hub-api.md for the endpoint, the error codes and the full API.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import contextlib
import inspect
import json
import re
import urllib.parse
from collections.abc import Callable, Coroutine, Generator, Mapping, Sequence
from typing import Any, Generic, Literal, Self, TypeVar, overload

import msgspec
from websockets.exceptions import WebSocketException

from tetherbed.client.core import (
    ClientCore,
    ConnectionLevelError,
    Failure,
    Reply,
    RequestPayload,
    new_request_id,
)
from tetherbed.client.errors import (
    CONNECT_FAILED,
    REQUEST_TIMEOUT,
    UNEXPECTED_RESPONSE,
    AgentUnavailableError,
    AuthenticationError,
    CommandExitException,
    ConnectFailedError,
    ConnectionLost,
    HubError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    OverloadedError,
    PermissionDeniedError,
    RequestTimeoutError,
    TooLargeError,
    UnexpectedResponseError,
    error_from_code,
)
from tetherbed.client.local_llm import LocalLlm
from tetherbed.client.models import (
    CommandResult,
    EntryInfo,
    EntryList,
    FileType,
    Frame,
    WriteInfo,
    base_name,
    command_result,
    entry_from_list,
    entry_from_stat,
)
from tetherbed.client.paths import is_absolute, join_root
from tetherbed.runtime.clock import Clock
from tetherbed.runtime.transport import Connector, MessageTransport, TransportClosed, UpgradeRefused
from tetherbed.runtime.websocket_transport import connect_websocket
from tetherbed.wire import strict
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.hub_api import SESSION_INFO_REQUEST, SESSION_INFO_RESPONSE, SessionInfo
from tetherbed.wire.limits import DEFAULT_LIST_MAX_ENTRIES
from tetherbed.wire.messages import (
    Ack,
    FileContents,
    FileListResponse,
    FileStatResponse,
    MessageType,
    Payload,
    ShellName,
)
from tetherbed.wire.messages import (
    CommandResult as WireCommandResult,
)

__all__ = [
    "AgentUnavailableError",
    "AuthenticationError",
    "CommandExitException",
    "CommandResult",
    "ConnectFailedError",
    "Connecting",
    "ConnectionLost",
    "EntryInfo",
    "EntryList",
    "FileType",
    "Frame",
    "HubError",
    "HubSandbox",
    "InvalidArgumentError",
    "NotFoundError",
    "OutcomeUnknownError",
    "OverloadedError",
    "PermissionDeniedError",
    "RequestTimeoutError",
    "ResponseStream",
    "TooLargeError",
    "UnexpectedResponseError",
    "WriteInfo",
    "client_url",
]

#: Extra wait granted to `commands.run` beyond the command's own timeout, so a
#: client-wide `request_timeout` does not cut off a command the agent still runs.
COMMAND_GRACE_SECONDS = 10.0

#: How many connection-level errors (ERROR with id null) are kept for inspection.
CONNECTION_ERRORS_KEPT = 100


def _lost(exc: TransportClosed) -> ConnectionLost:
    if exc.code is None:
        return ConnectionLost("connection to the hub was lost without a close frame")
    return ConnectionLost(
        f"hub closed the connection ({exc.code} {exc.reason})".rstrip(),
        close_code=exc.code,
        close_reason=exc.reason,
    )


def client_url(hub_url: str, session_id: str) -> str:
    """`{hub_url}/v1/sessions/{session_id}/client`, with http(s) mapped to ws(s)."""
    base = hub_url.rstrip("/")
    for web, socket in (("http://", "ws://"), ("https://", "wss://")):
        if base.startswith(web):
            base = socket + base[len(web) :]
    return f"{base}/v1/sessions/{urllib.parse.quote(session_id, safe='')}/client"


def _refusal(status: int, body: bytes | None) -> HubError:
    """The typed error for an upgrade the hub refused with an HTTP status."""
    code = message = None
    try:
        error = json.loads(body or b"")["error"]
        code, message = str(error["code"]), str(error.get("message", ""))
    except (ValueError, TypeError, KeyError):
        pass
    if code is None:
        code = {401: ErrorCode.AUTH_FAILED, 404: ExtensionCode.SESSION_NOT_FOUND}.get(status)
    if code is None:
        return ConnectFailedError(
            CONNECT_FAILED, f"hub refused the upgrade with HTTP {status}", http_status=status
        )
    message = message or f"hub refused the upgrade with HTTP {status}"
    return error_from_code(code, message, http_status=status)


def _copy_error(error: HubError) -> HubError:
    """A fresh instance per waiter, so concurrent raisers never share a traceback."""
    copy = type(error).__new__(type(error))
    copy.__dict__.update(error.__dict__)
    copy.args = error.args
    return copy


class HubConnection:
    """One client WebSocket to the hub: pipelined requests correlated by id.

    `HubSandbox` (a session) and `MachineControl` (a machine's control
    connection) are its two faces; they differ only in the endpoint and in the
    convenience calls they offer on top of `request`/`stream`.
    """

    def __init__(
        self,
        transport: MessageTransport,
        session_id: str,
        *,
        request_timeout: float | None = None,
        id_factory: Callable[[], str] = new_request_id,
        clock: Clock | None = None,
    ) -> None:
        self.session_id = session_id
        #: Default seconds to wait for a terminal answer; None waits forever.
        self.request_timeout = request_timeout
        #: ERROR frames with id null (not tied to a request), newest last.
        self.connection_errors: collections.deque[HubError] = collections.deque(
            maxlen=CONNECTION_ERRORS_KEPT
        )
        self._transport = transport
        self._core = ClientCore(id_factory=id_factory, clock=clock)
        self._queues: dict[str, asyncio.Queue[Reply | HubError]] = {}
        self._failure: HubError | None = None
        self._reader = asyncio.get_running_loop().create_task(
            self._read_frames(), name=f"hub-client-reader:{session_id}"
        )

    @staticmethod
    def endpoint(hub_url: str, name: str) -> str:
        """The WebSocket URL this kind of connection opens for `name`."""
        return client_url(hub_url, name)

    @classmethod
    def connect(
        cls,
        hub_url: str,
        session_id: str,
        token: str,
        *,
        request_timeout: float | None = None,
        open_timeout: float = 10.0,
        id_factory: Callable[[], str] = new_request_id,
        clock: Clock | None = None,
        connector: Connector | None = None,
    ) -> Connecting[Any]:
        """Open the client WebSocket of `session_id` on the hub at `hub_url`.

        Await it (`sb = await HubSandbox.connect(...)`) or enter it directly
        (`async with HubSandbox.connect(...) as sb:`). A refused upgrade raises
        the typed error from the hub's JSON body (`AuthenticationError` for
        401, `NotFoundError` for 404); a network or handshake failure raises
        `ConnectFailedError`. `connector` replaces the real WebSocket (the
        simulator passes its in-memory network's).
        """
        return Connecting(
            cls._open(
                hub_url,
                session_id,
                token,
                request_timeout=request_timeout,
                open_timeout=open_timeout,
                id_factory=id_factory,
                clock=clock,
                connector=connector,
            )
        )

    @classmethod
    async def _open(
        cls,
        hub_url: str,
        session_id: str,
        token: str,
        *,
        request_timeout: float | None,
        open_timeout: float,
        id_factory: Callable[[], str],
        clock: Clock | None,
        connector: Connector | None,
    ) -> Any:
        url = cls.endpoint(hub_url, session_id)
        headers = {"Authorization": f"Bearer {token}"}
        try:
            if connector is None:
                # No compression and a 16 MiB message limit, as for every peer.
                transport = await connect_websocket(url, headers, open_timeout=open_timeout)
            else:
                transport = await connector(url, headers)
        except UpgradeRefused as exc:
            raise _refusal(exc.status, exc.body) from exc
        except (OSError, TimeoutError, WebSocketException, TransportClosed) as exc:
            raise ConnectFailedError(CONNECT_FAILED, f"cannot open {url}: {exc}") from exc
        return cls(
            transport,
            session_id,
            request_timeout=request_timeout,
            id_factory=id_factory,
            clock=clock,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        """True once the connection has ended; every call then fails at once."""
        return self._failure is not None

    @property
    def pending_count(self) -> int:
        """Requests sent and still waiting for their terminal answer."""
        return len(self._queues)

    async def close(self) -> None:
        """Close the socket; calls still waiting fail with `ConnectionLost`."""
        self._fail_all(ConnectionLost("the client closed the connection"))
        if not self._reader.done():
            self._reader.cancel()
            await asyncio.wait([self._reader])
        await self._close_transport()

    # --- low-level requests --------------------------------------------------

    async def request(
        self,
        message_type: str,
        payload: RequestPayload,
        *,
        request_timeout: float | None = None,
        request_id: str | None = None,
    ) -> Frame:
        """Send one request and return its terminal answer as `(type, payload)`.

        Streamed chunks are skipped; use `stream` to see them. An ERROR answer
        raises its typed `HubError`. `request_timeout` overrides the client's.
        """
        async with self.stream(
            message_type, payload, request_timeout=request_timeout, request_id=request_id
        ) as frames:
            last: Frame | None = None
            async for frame in frames:
                last = frame
        assert last is not None, "a stream always ends with a terminal frame or raises"
        return last

    def stream(
        self,
        message_type: str,
        payload: RequestPayload,
        *,
        request_timeout: float | None = None,
        request_id: str | None = None,
    ) -> ResponseStream:
        """Send one request and iterate over every answer frame, terminal last.

        Use for LOCAL_LLM_COMPLETION: chunks, then the RESPONSE frame. The
        request is sent on entering `async with` or on the first iteration.
        """
        timeout = self.request_timeout if request_timeout is None else request_timeout
        return ResponseStream(self, str(message_type), payload, timeout, request_id)

    async def _send(
        self, kind: str, payload: RequestPayload, request_id: str | None
    ) -> tuple[str, asyncio.Queue[Reply | HubError]]:
        if self._failure is not None:
            raise _copy_error(self._failure)
        rid, data = self._core.start_request(kind, payload, request_id)
        queue: asyncio.Queue[Reply | HubError] = asyncio.Queue()
        self._queues[rid] = queue
        try:
            await self._transport.send(data)
        except BaseException as exc:
            self._forget(rid)
            if isinstance(exc, TransportClosed):
                raise _lost(exc) from exc
            if isinstance(exc, Exception) and not isinstance(exc, HubError):
                raise ConnectionLost(f"sending to the hub failed: {exc!r}") from exc
            raise
        return rid, queue

    async def _close_transport(self) -> None:
        with contextlib.suppress(TransportClosed):  # the peer may have closed it first
            await self._transport.close()

    def _forget(self, request_id: str) -> None:
        self._core.forget(request_id)
        self._queues.pop(request_id, None)

    async def _read_frames(self) -> None:
        """Route every received frame; however this ends, no request is left waiting."""
        ended: HubError = ConnectionLost("the connection's reader stopped")
        try:
            while True:
                data = await self._transport.recv()
                event = self._core.receive(data)
                if isinstance(event, Reply):
                    self._deliver(event.request_id, event, final=event.final)
                elif isinstance(event, Failure):
                    self._deliver(event.request_id, event.error, final=True)
                elif isinstance(event, ConnectionLevelError):
                    self.connection_errors.append(event.error)
                    if event.error.fatal:
                        ended = event.error
                        self._fail_all(ended)  # before the closing handshake, not after
                        await self._close_transport()
                        return
        except TransportClosed as exc:
            ended = _lost(exc)
        except ConnectionLost as exc:
            ended = exc
        except Exception as exc:  # a transport that ends some other way
            ended = ConnectionLost(f"connection to the hub failed: {exc!r}")
        finally:
            self._fail_all(ended)  # a no-op when close() got there first

    def _deliver(self, request_id: str, item: Reply | HubError, *, final: bool) -> None:
        queue = self._queues.pop(request_id, None) if final else self._queues.get(request_id)
        if queue is not None:
            queue.put_nowait(item)

    def _fail_all(self, error: HubError) -> None:
        """End the connection's life: every waiter, and every later call, gets `error`."""
        if self._failure is not None:
            return
        self._failure = error
        self._core.forget_all()
        queues, self._queues = self._queues, {}
        for queue in queues.values():
            queue.put_nowait(_copy_error(error))


C = TypeVar("C", bound=HubConnection)


class Connecting(Generic[C]):
    """What `connect` returns: awaitable, or usable as `async with`."""

    def __init__(self, opening: Coroutine[Any, Any, C]) -> None:
        self._opening = opening
        self._sandbox: C | None = None

    def __await__(self) -> Generator[Any, None, C]:
        return self._opening.__await__()

    async def __aenter__(self) -> C:
        self._sandbox = await self._opening
        return self._sandbox

    async def __aexit__(self, *exc_info: object) -> None:
        if self._sandbox is not None:
            await self._sandbox.close()


class ResponseStream:
    """The answer frames of one request, as an async iterator.

    Iteration ends after the terminal frame; an ERROR answer raises. Leaving
    early (`aclose`, or the `async with` block) stops waiting for the rest.
    """

    def __init__(
        self,
        sandbox: HubConnection,
        message_type: str,
        payload: RequestPayload,
        request_timeout: float | None,
        request_id: str | None,
    ) -> None:
        self._sandbox = sandbox
        self._message_type = message_type
        self._payload = payload
        self._timeout = request_timeout
        self._requested_id = request_id
        self._request_id: str | None = None
        self._queue: asyncio.Queue[Reply | HubError] | None = None
        self._deadline: float | None = None
        self._done = False

    @property
    def request_id(self) -> str | None:
        """The id the request went out with; None until it is sent."""
        return self._request_id

    async def _start(self) -> None:
        if self._queue is not None or self._done:
            return
        self._request_id, self._queue = await self._sandbox._send(
            self._message_type, self._payload, self._requested_id
        )
        if self._timeout is not None:
            self._deadline = asyncio.get_running_loop().time() + self._timeout

    async def __aenter__(self) -> ResponseStream:
        await self._start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __aiter__(self) -> ResponseStream:
        return self

    async def __anext__(self) -> Frame:
        if self._done:
            raise StopAsyncIteration
        await self._start()
        assert self._queue is not None and self._request_id is not None
        try:
            async with asyncio.timeout_at(self._deadline):
                item = await self._queue.get()
        except TimeoutError:
            self._finish()
            raise RequestTimeoutError(
                REQUEST_TIMEOUT,
                f"{self._message_type} {self._request_id} got no answer within "
                f"{self._timeout:g}s; it may still run",
            ) from None
        except BaseException:
            self._finish()
            raise
        if isinstance(item, HubError):
            self._done = True
            raise item
        if item.final:
            self._done = True
        return item.frame

    async def aclose(self) -> None:
        """Stop waiting; frames that still arrive for this request are dropped."""
        self._finish()

    def _finish(self) -> None:
        if not self._done and self._request_id is not None:
            self._sandbox._forget(self._request_id)
        self._done = True


def expect_answer(frame: Frame, kind: MessageType, model: type[Payload]) -> Any:
    """The payload when the answer has the type the request calls for."""
    if frame.type != kind or not isinstance(frame.payload, model):
        raise UnexpectedResponseError(
            UNEXPECTED_RESPONSE, f"expected {kind}, the hub answered {frame.type}"
        )
    return frame.payload


class HubSandbox(HubConnection):
    """One session on the hub, used like E2B's AsyncSandbox.

    Build it with `await HubSandbox.connect(...)`; the constructor wraps a
    `MessageTransport` that is already open (the simulator's in-memory
    network) and must be called inside a running event loop.
    """

    def __init__(self, transport: MessageTransport, session_id: str, **options: Any) -> None:
        """Same arguments as `HubConnection`."""
        super().__init__(transport, session_id, **options)
        self.files = Files(self)
        self.commands = Commands(self)
        self.llm = LocalLlm(self)
        self._root: asyncio.Future[str] | None = None

    async def session_info(self, *, request_timeout: float | None = None) -> SessionInfo:
        """What the hub knows of the session: its agent's `allowed_root`,
        machine and connection (None while no agent is connected)."""
        frame = await self.request(
            SESSION_INFO_REQUEST, strict.Nothing(), request_timeout=request_timeout
        )
        if frame.type != SESSION_INFO_RESPONSE or not isinstance(frame.payload, dict):
            raise UnexpectedResponseError(
                UNEXPECTED_RESPONSE,
                f"expected {SESSION_INFO_RESPONSE}, the hub answered {frame.type}",
            )
        try:
            return msgspec.convert(frame.payload, SessionInfo)
        except msgspec.ValidationError as exc:
            raise UnexpectedResponseError(UNEXPECTED_RESPONSE, f"bad session info: {exc}") from None

    async def allowed_root(self) -> str:
        """The root the session's agent serves (asked once per connection)."""
        if self._root is None or (self._root.done() and self._root.exception() is not None):
            self._root = asyncio.ensure_future(self._fetch_root())
        return await asyncio.shield(self._root)

    async def _fetch_root(self) -> str:
        try:
            info = await self.session_info()
        except InvalidArgumentError as exc:  # a hub without the session-info call
            raise InvalidArgumentError(
                exc.code,
                "this hub does not report the session's allowed root, so relative paths "
                "cannot be resolved; use absolute paths",
            ) from exc
        if info.allowed_root is None:
            raise AgentUnavailableError(
                ExtensionCode.AGENT_NOT_CONNECTED,
                "no agent serves the session, so its allowed root is unknown",
            )
        return info.allowed_root

    async def absolute(self, path: str) -> str:
        """`path` as sent on the wire: relative paths are joined to the allowed root."""
        if is_absolute(path):
            return path
        try:
            root = await self.allowed_root()
        except HubError as exc:
            raise type(exc)(
                exc.code,
                f"relative path {path!r}: {exc.message} (or pass an absolute path)",
                details=exc.details,
            ) from exc
        return join_root(root, path)


class Files:
    """`sandbox.files`: E2B's file calls over FILE_* messages."""

    def __init__(self, sandbox: HubSandbox) -> None:
        self._sandbox = sandbox

    @overload
    async def read(
        self,
        path: str,
        format: Literal["text"] = "text",
        *,
        offset: int = 0,
        length: int | None = None,
        request_timeout: float | None = None,
    ) -> str: ...

    @overload
    async def read(
        self,
        path: str,
        format: Literal["bytes"],
        *,
        offset: int = 0,
        length: int | None = None,
        request_timeout: float | None = None,
    ) -> bytes: ...

    async def read(
        self,
        path: str,
        format: Literal["text", "bytes"] = "text",
        *,
        offset: int = 0,
        length: int | None = None,
        request_timeout: float | None = None,
    ) -> str | bytes:
        """File content as `str` (UTF-8, line endings untouched) or `bytes`.

        Sends both `format` and `encoding`, as the spec requires of adapters.
        `offset`/`length` read a byte range (a Tetherbed addition to E2B's call).
        """
        if format not in ("text", "bytes"):
            raise InvalidArgumentError(
                ExtensionCode.INVALID_MESSAGE, f"format must be 'text' or 'bytes', not {format!r}"
            )
        encoding: Literal["utf-8", "base64"] = "utf-8" if format == "text" else "base64"
        path = await self._sandbox.absolute(path)
        frame = await self._sandbox.request(
            MessageType.FILE_READ,
            strict.FileRead(
                path=path, encoding=encoding, format=format, offset=offset, length=length
            ),
            request_timeout=request_timeout,
        )
        contents: FileContents = expect_answer(frame, MessageType.FILE_CONTENTS, FileContents)
        if contents.truncated and length is None:
            raise TooLargeError(
                ErrorCode.FILE_TOO_LARGE,
                f"the agent returned only part of {path}; read it in ranges",
            )
        raw = _content_bytes(contents)
        if format == "bytes":
            return raw
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnexpectedResponseError(
                UNEXPECTED_RESPONSE, f"text read of {path} is not UTF-8: {exc}"
            ) from None

    async def write(
        self,
        path: str,
        data: str | bytes | bytearray | memoryview,
        *,
        request_timeout: float | None = None,
    ) -> WriteInfo:
        """Write a whole file, creating missing parent directories as E2B does.

        `str` goes as UTF-8 text, anything bytes-like as base64 (FILE_WRITE has
        no `format`: only `encoding` says which).
        """
        path = await self._sandbox.absolute(path)
        if isinstance(data, str):
            payload = strict.FileWrite(
                path=path, content=data, encoding="utf-8", create_parents=True
            )
        elif isinstance(data, bytes | bytearray | memoryview):
            payload = strict.FileWrite(
                path=path,
                content=base64.b64encode(data).decode("ascii"),
                encoding="base64",
                create_parents=True,
            )
        else:
            raise InvalidArgumentError(
                ExtensionCode.INVALID_MESSAGE,
                f"data must be str or bytes, not {type(data).__name__}",
            )
        frame = await self._sandbox.request(
            MessageType.FILE_WRITE, payload, request_timeout=request_timeout
        )
        expect_answer(frame, MessageType.ACK, Ack)
        return WriteInfo(name=base_name(path), type=FileType.FILE, path=path)

    async def list(
        self,
        path: str,
        depth: int = 1,
        *,
        include_hidden: bool = True,
        max_entries: int = DEFAULT_LIST_MAX_ENTRIES,
        request_timeout: float | None = None,
    ) -> EntryList:
        """Entries under `path` down to `depth` levels (1 = direct children).

        Depth > 1 asks the agent for a recursive listing and keeps the levels
        asked for. Hidden entries are included, as E2B lists them; the result's
        `truncated` is True when the agent stopped at `max_entries`.
        """
        if depth < 1:
            raise InvalidArgumentError(ExtensionCode.INVALID_MESSAGE, "depth should be at least 1")
        path = await self._sandbox.absolute(path)
        frame = await self._sandbox.request(
            MessageType.FILE_LIST,
            strict.FileList(
                path=path,
                recursive=depth > 1,
                include_hidden=include_hidden,
                max_entries=max_entries,
            ),
            request_timeout=request_timeout,
        )
        listing: FileListResponse = expect_answer(
            frame, MessageType.FILE_LIST_RESPONSE, FileListResponse
        )
        entries = [entry_from_list(entry) for entry in listing.entries]
        if depth > 1:
            entries = _within_depth(entries, path, depth)
        result = EntryList(entries)
        result.truncated = listing.truncated
        return result

    async def exists(self, path: str, *, request_timeout: float | None = None) -> bool:
        """Whether `path` exists (a link counts, even a dangling one).

        A missing path is False; a path outside the allowed root still raises
        `PermissionDeniedError`, since the spec keeps the two cases apart.
        """
        try:
            response = await self._stat(
                path, follow_symlinks=False, request_timeout=request_timeout
            )
        except NotFoundError as exc:
            if exc.code == ErrorCode.PATH_NOT_FOUND:
                return False
            raise
        return response.exists

    async def get_info(self, path: str, *, request_timeout: float | None = None) -> EntryInfo:
        """Metadata of `path` itself (not of a link's target), via FILE_STAT.

        For a link, a second stat that follows it fills `symlink_target` with
        the resolved path (left None when the target is missing or outside
        the allowed root). Raises `NotFoundError` when `path` does not exist.
        """
        response = await self._stat(path, follow_symlinks=False, request_timeout=request_timeout)
        if not response.exists:
            raise NotFoundError(ErrorCode.PATH_NOT_FOUND, f"{path} does not exist")
        target = None
        if response.is_symlink:
            try:
                resolved = await self._stat(
                    path, follow_symlinks=True, request_timeout=request_timeout
                )
            except (NotFoundError, PermissionDeniedError) as exc:
                if exc.code == ExtensionCode.SESSION_NOT_FOUND:
                    raise
                resolved = None
            if resolved is not None and resolved.exists:
                target = resolved.path
        return entry_from_stat(response, path, target)

    async def remove(
        self, path: str, *, missing_ok: bool = False, request_timeout: float | None = None
    ) -> None:
        """Remove a file or a whole directory tree (recursive, as E2B does)."""
        frame = await self._sandbox.request(
            MessageType.FILE_DELETE,
            strict.FileDelete(
                path=await self._sandbox.absolute(path), recursive=True, missing_ok=missing_ok
            ),
            request_timeout=request_timeout,
        )
        expect_answer(frame, MessageType.ACK, Ack)

    async def rename(
        self,
        old_path: str,
        new_path: str,
        *,
        overwrite: bool = False,
        request_timeout: float | None = None,
    ) -> EntryInfo:
        """Move `old_path` to `new_path` and return the new entry's info.

        An existing `new_path` raises (PATH_EXISTS) unless `overwrite`. FILE_MOVE
        is not idempotent: after `OutcomeUnknownError`, check before retrying.
        """
        old_path = await self._sandbox.absolute(old_path)
        new_path = await self._sandbox.absolute(new_path)
        frame = await self._sandbox.request(
            MessageType.FILE_MOVE,
            strict.FileMove(src=old_path, dst=new_path, overwrite=overwrite),
            request_timeout=request_timeout,
        )
        expect_answer(frame, MessageType.ACK, Ack)
        return await self.get_info(new_path, request_timeout=request_timeout)

    async def _stat(
        self, path: str, *, follow_symlinks: bool, request_timeout: float | None
    ) -> FileStatResponse:
        frame = await self._sandbox.request(
            MessageType.FILE_STAT,
            strict.FileStat(
                path=await self._sandbox.absolute(path), follow_symlinks=follow_symlinks
            ),
            request_timeout=request_timeout,
        )
        return expect_answer(frame, MessageType.FILE_STAT_RESPONSE, FileStatResponse)


def _content_bytes(contents: FileContents) -> bytes:
    """FILE_CONTENTS as raw bytes, decoded by the encoding the agent declared."""
    if contents.encoding == "utf-8":
        return contents.content.encode("utf-8")
    try:
        return base64.b64decode(contents.content, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UnexpectedResponseError(
            UNEXPECTED_RESPONSE, f"FILE_CONTENTS is not valid base64: {exc}"
        ) from None


_WINDOWS_PATH = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")


def _component_count(path: str) -> int:
    separators = r"[\\/]+" if _WINDOWS_PATH.match(path) else r"/+"
    return len([part for part in re.split(separators, path) if part])


def _relative_depth(path: str, base: str) -> int | None:
    """Levels below `base` (1 = direct child), or None if `path` is not under it."""
    trimmed = base.rstrip("/\\")
    for separator in ("/", "\\"):
        prefix = trimmed + separator
        if path.startswith(prefix) and len(path) > len(prefix):
            return path[len(prefix) :].strip(separator).count(separator) + 1
    return None


def _within_depth(entries: list[EntryInfo], base: str, depth: int) -> list[EntryInfo]:
    """Entries at most `depth` levels below `base`.

    The agent may report canonical paths that do not start with the path
    asked for (a relative path, a link); then the shallowest entries are
    taken as level 1, since a recursive listing includes every parent.
    """
    levels = [_relative_depth(entry.path, base) for entry in entries]
    if any(level is None for level in levels):
        counts = [_component_count(entry.path) for entry in entries]
        lowest = min(counts, default=0)
        levels = [count - lowest + 1 for count in counts]
    return [entry for entry, level in zip(entries, levels, strict=True) if level <= depth]


OutputHandler = Callable[[str], Any]


class Commands:
    """`sandbox.commands`: E2B's `run` over EXECUTE_COMMAND."""

    def __init__(self, sandbox: HubSandbox) -> None:
        self._sandbox = sandbox

    async def run(
        self,
        cmd: str | Sequence[str],
        *,
        background: bool = False,
        envs: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = 60,
        shell: ShellName = "auto",
        on_stdout: OutputHandler | None = None,
        on_stderr: OutputHandler | None = None,
        request_timeout: float | None = None,
    ) -> CommandResult:
        """Run a command on the agent and wait for it, as E2B's `commands.run`.

        A string runs through `shell`; a list runs as argv with no shell.
        `envs` becomes the wire `env`, `timeout` its `timeout_seconds` (0 or
        None: the agent's own limit, which also caps larger values). Like E2B,
        a non-zero exit code raises `CommandExitException` carrying the whole
        result (code COMMAND_TIMEOUT when the agent killed the command).
        `on_stdout`/`on_stderr` are called once with the whole output, since
        the protocol does not stream it. EXECUTE_COMMAND is not idempotent.
        """
        if background:
            raise InvalidArgumentError(
                ExtensionCode.INVALID_MESSAGE, "the local-executor protocol has no background runs"
            )
        # Only what is given goes out: the spec's `env` is an object and `cwd`
        # a string, and a strict peer drops a request that sends either as null.
        common: dict[str, Any] = {}
        if cwd is not None:
            common["cwd"] = await self._sandbox.absolute(cwd)
        if envs is not None:
            common["env"] = {str(k): str(v) for k, v in envs.items()}
        if timeout:
            common["timeout_seconds"] = timeout
        if isinstance(cmd, str):
            payload = strict.ExecuteCommand(command=cmd, shell=shell, **common)
        else:
            argv = [str(arg) for arg in cmd]
            if not argv:
                raise InvalidArgumentError(ExtensionCode.INVALID_MESSAGE, "argv must not be empty")
            payload = strict.ExecuteCommand(argv=argv, **common)

        wait = request_timeout
        if wait is None and self._sandbox.request_timeout is not None and timeout:
            wait = max(self._sandbox.request_timeout, timeout + COMMAND_GRACE_SECONDS)
        frame = await self._sandbox.request(
            MessageType.EXECUTE_COMMAND, payload, request_timeout=wait
        )
        result = command_result(expect_answer(frame, MessageType.COMMAND_RESULT, WireCommandResult))
        for handler, text in ((on_stdout, result.stdout), (on_stderr, result.stderr)):
            if handler is not None and text:
                outcome = handler(text)
                if inspect.isawaitable(outcome):
                    await outcome
        if result.exit_code != 0:
            raise CommandExitException(result)
        return result
