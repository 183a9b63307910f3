"""The agent's HTTP client on asyncio streams: POSTs on kept-alive connections,
and the long-lived SSE response on a connection of its own.

Thin by design: framing is `http.ResponseParser`'s, SSE is
`wire.dsh.sse.SseDecoder`'s. A hub URL may carry a path prefix
(`https://host/dsh`); every route is appended to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tetherbed.agent.dsh.http import Body, End, Head, HttpError, ResponseParser, encode_request
from tetherbed.agent.dsh.version import AGENT_VERSION

CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
READ_SIZE = 64 * 1024
#: JSON answers from the hub are small; anything bigger is not one.
ANSWER_LIMIT = 1024 * 1024
_IDLE_CONNECTIONS = 4


class TransportError(ConnectionError):
    """The hub could not be reached, or broke HTTP."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


@dataclass(slots=True)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


#: Opens one connection to the hub: what `asyncio.open_connection` returns.
Opener = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


class HubHttp:
    def __init__(
        self, base_url: str, token: str | None = None, *, open_connection: Opener | None = None
    ) -> None:
        """`open_connection` replaces the TCP (and TLS) connect to `base_url`'s
        host and port: a test bed's own network (the simulator's, in virtual
        time). Requests still name `base_url`'s host and path."""
        parts = urllib.parse.urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"hub URL {base_url!r} must be http:// or https:// with a host")
        self.base_url = base_url.rstrip("/")
        self._tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        default = 443 if self._tls else 80
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_header = host if self._port == default else f"{host}:{self._port}"
        self._prefix = parts.path.rstrip("/")
        self.token = token
        self._idle: list[_Connection] = []
        self._ssl = ssl.create_default_context() if self._tls else None
        self._open = open_connection

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"User-Agent": f"tetherbed-dsh-agent/{AGENT_VERSION}"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return {**headers, **(extra or {})}

    async def _connect(self) -> _Connection:
        if self._open is not None:
            try:
                reader, writer = await self._open()
            except (OSError, TimeoutError) as exc:
                raise TransportError(f"cannot connect to {self.base_url}: {exc}") from None
            return _Connection(reader, writer)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._tls else None,
                    limit=READ_SIZE * 2,
                ),
                CONNECT_TIMEOUT_S,
            )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise TransportError(f"cannot connect to {self.base_url}: {exc}") from None
        return _Connection(reader, writer)

    async def post_json(
        self, path: str, body: Any, *, timeout: float = REQUEST_TIMEOUT_S
    ) -> Answer:
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json; charset=utf-8", "Accept": "application/json"}
        return await self.request("POST", path, data, headers, timeout=timeout)

    async def get(
        self, path: str, *, timeout: float = REQUEST_TIMEOUT_S, limit: int = ANSWER_LIMIT
    ) -> Answer:
        return await self.request("GET", path, None, {}, timeout=timeout, limit=limit)

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
        *,
        timeout: float = REQUEST_TIMEOUT_S,
        limit: int = ANSWER_LIMIT,
    ) -> Answer:
        """One request on a pooled connection (a fresh one if a kept one died)."""
        for fresh in (False, True):
            connection = None if fresh or not self._idle else self._idle.pop()
            reused = connection is not None
            if connection is None:
                connection = await self._connect()
            try:
                answer, keep = await asyncio.wait_for(
                    self._exchange(
                        connection,
                        method=method,
                        path=path,
                        body=body,
                        headers=headers,
                        limit=limit,
                    ),
                    timeout,
                )
            except (OSError, HttpError, asyncio.IncompleteReadError) as exc:
                connection.close()
                if reused:
                    continue  # the hub closed an idle connection: try a new one
                raise TransportError(f"{method} {path}: {exc}") from None
            except TimeoutError:
                connection.close()
                raise TransportError(f"{method} {path}: no answer within {timeout} s") from None
            except BaseException:
                connection.close()
                raise
            if keep and len(self._idle) < _IDLE_CONNECTIONS:
                self._idle.append(connection)
            else:
                connection.close()
            return answer
        raise AssertionError("unreachable")

    async def _exchange(
        self,
        connection: _Connection,
        *,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
        limit: int,
    ) -> tuple[Answer, bool]:
        connection.writer.write(
            encode_request(
                method, self._prefix + path, self._host_header, self._headers(headers), body
            )
        )
        await connection.writer.drain()
        parser = ResponseParser(limit, head_only=method == "HEAD")
        head: Head | None = None
        chunks: list[bytes] = []
        while True:
            data = await connection.reader.read(READ_SIZE)
            events = parser.feed(data) if data else parser.feed_eof()
            for event in events:
                if isinstance(event, Head):
                    head = event
                elif isinstance(event, Body):
                    chunks.append(event.data)
                elif isinstance(event, End):
                    assert head is not None
                    return Answer(head.status, head.headers, b"".join(chunks)), event.keep_alive

    async def open_stream(self, path: str) -> EventStream:
        """GET a streaming response; the caller reads `chunks()` until it ends."""
        connection = await self._connect()
        try:
            connection.writer.write(
                encode_request(
                    "GET",
                    self._prefix + path,
                    self._host_header,
                    self._headers({"Accept": "text/event-stream", "Cache-Control": "no-store"}),
                )
            )
            await connection.writer.drain()
            parser = ResponseParser()
            pending: list[bytes] = []
            head: Head | None = None
            while head is None:
                data = await asyncio.wait_for(connection.reader.read(READ_SIZE), REQUEST_TIMEOUT_S)
                for event in parser.feed(data) if data else parser.feed_eof():
                    if isinstance(event, Head):
                        head = event
                    elif isinstance(event, Body):
                        pending.append(event.data)
        except (OSError, HttpError, TimeoutError) as exc:
            connection.close()
            raise TransportError(f"GET {path}: {exc or 'no answer'}") from None
        except BaseException:
            connection.close()
            raise
        return EventStream(head, connection, parser, pending)

    async def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


class EventStream:
    def __init__(
        self, head: Head, connection: _Connection, parser: ResponseParser, pending: list[bytes]
    ) -> None:
        self.head = head
        self._connection = connection
        self._parser = parser
        self._pending = pending

    async def read_all(self, limit: int = ANSWER_LIMIT) -> bytes:
        """The whole (small) body of a refused stream."""
        data = b"".join(self._pending)
        async for chunk in self.chunks():
            data += chunk
            if len(data) > limit:
                break
        return data

    async def chunks(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive; ends when the response or connection does."""
        while self._pending:
            yield self._pending.pop(0)
        if self._parser.done:
            return
        reader = self._connection.reader
        while True:
            try:
                data = await reader.read(READ_SIZE)
            except OSError as exc:
                raise TransportError(f"the stream broke: {exc}") from None
            try:
                events = self._parser.feed(data) if data else self._parser.feed_eof()
            except HttpError as exc:
                raise TransportError(f"the stream broke: {exc}") from None
            for event in events:
                if isinstance(event, Body):
                    yield event.data
                elif isinstance(event, End):
                    return

    def close(self) -> None:
        self._connection.close()
