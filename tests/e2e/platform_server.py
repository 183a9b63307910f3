"""A WebSocket server that plays the platform for real `tetherbed agent` processes.

No hub in between: the test speaks the spec's frames to the agent itself and
records every frame the agent sent, raw, so it judges from the wire. One agent
connection at a time (`accept`); requests are correlated by id.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tetherbed.wire.limits import FRAME_LIMIT_BYTES

ANSWER_TIMEOUT = 60.0


class AgentLink:
    """One agent connection after its handshake."""

    def __init__(self, conn: ServerConnection, hello: dict[str, Any]) -> None:
        self.conn = conn
        self.hello = hello
        self.frames: list[bytes] = []
        self.closed = asyncio.Event()
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)

    def _arrived(self, raw: bytes) -> None:
        self.frames.append(raw)
        frame = msgspec.json.decode(raw)
        waiter = self._waiting.pop(frame.get("id") or "", None)
        if waiter is not None and not waiter.done() and frame["type"] != "STATUS":
            waiter.set_result(frame)

    def _lost(self) -> None:
        """The connection ended: every request still waiting gets no answer."""
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError("the agent connection closed"))
        self._waiting.clear()

    async def send(self, frame: dict[str, Any]) -> None:
        await self.conn.send(msgspec.json.encode({"ts": 1.0, "version": "1.1", **frame}).decode())

    async def call(
        self, kind: str, payload: dict[str, Any], timeout: float = ANSWER_TIMEOUT
    ) -> dict[str, Any]:
        """Send one request and wait for its answer."""
        request_id = f"q{next(self._ids)}"
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        await self.send({"type": kind, "id": request_id, "payload": payload})
        return await asyncio.wait_for(waiter, timeout)


class PlatformServer:
    """Listens on loopback; `url` is what `tetherbed agent --hub` is given."""

    def __init__(self, *, max_concurrent: int = 8, max_file_size: int = 10 << 20) -> None:
        self._ack = {
            "protocol_version": "1.1",
            "max_file_size_bytes": max_file_size,
            "command_timeout_seconds": 30,
            "max_concurrent": max_concurrent,
        }
        self._links: asyncio.Queue[AgentLink] = asyncio.Queue()
        self.url = ""

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[PlatformServer]:
        async with serve(
            self._handle, "127.0.0.1", 0, compression=None, max_size=FRAME_LIMIT_BYTES
        ) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            self.url = f"ws://127.0.0.1:{port}"
            yield self

    async def accept(self, timeout: float = 30.0) -> AgentLink:
        return await asyncio.wait_for(self._links.get(), timeout)

    async def _handle(self, conn: ServerConnection) -> None:
        session_id = conn.request.path.rsplit("/", 1)[-1] if conn.request else None
        hello = msgspec.json.decode(await conn.recv(decode=False))
        link = AgentLink(conn, hello)
        await link.send(
            {
                "type": "HELLO_ACK",
                "id": hello["id"],
                "payload": {
                    "session_id": session_id,
                    "granted_capabilities": hello["payload"]["capabilities"],
                    **self._ack,
                },
            }
        )
        self._links.put_nowait(link)
        try:
            async for raw in conn:
                link._arrived(raw if isinstance(raw, bytes) else raw.encode())
        except ConnectionClosed:
            pass
        finally:
            link.closed.set()
            link._lost()
