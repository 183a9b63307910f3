"""The aiohttp hub in this test's event loop, and small peers to poke it with.

`running_hub` serves a `HubServer` on an ephemeral loopback port. `FakeAgent`
speaks just enough of the agent side (HELLO, PONG, canned answers) over a real
WebSocket; `StalledClient` opens a client WebSocket by hand and then never
reads, which is what a hung or malicious client looks like to the hub's TCP
stack.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tetherbed.hub.config import HubConfig
from tetherbed.hub.server import HubServer
from tetherbed.hub.store import HubStore
from tetherbed.wire.limits import FRAME_LIMIT_BYTES


@dataclass
class RunningHub:
    url: str
    store: HubStore
    server: HubServer
    host: str
    port: int

    def token(self, user: str, kind: str) -> str:
        return self.store.create_token(user, kind)


@contextlib.asynccontextmanager
async def running_hub(**config: Any) -> AsyncIterator[RunningHub]:
    store = HubStore(":memory:")
    server = HubServer(HubConfig(**config), store)
    host, port = await server.start("127.0.0.1", 0)
    try:
        yield RunningHub(f"ws://{host}:{port}", store, server, host, port)
    finally:
        await server.stop()
        store.close()


def hello(machine: str = "m1", root: str = "/srv/root") -> dict[str, Any]:
    return {
        "type": "HELLO",
        "id": f"hello-{machine}",
        "ts": 1.0,
        "version": "1.1",
        "payload": {
            "shim_version": "test",
            "protocol_version": "1.1",
            "machine_id": machine,
            "platform": "linux",
            "arch": "x86_64",
            "screen_resolution": None,
            "capabilities": ["files"],
            "allowed_root": root,
            "local_llm_models": [],
            "hardware_devices": [],
        },
    }


Answer = Callable[[dict[str, Any]], tuple[str, dict[str, Any]] | None]


def default_answer(request: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """FILE_STAT → not found; FILE_READ of "/big/N" → N bytes of content; writes → ACK."""
    kind, payload = request["type"], request["payload"]
    if kind == "FILE_STAT":
        return "FILE_STAT_RESPONSE", {"exists": False}
    if kind == "FILE_READ":
        size = int(payload["path"].rsplit("/", 1)[-1])
        content = base64.b64encode(os.urandom(size * 3 // 4)).decode()
        return "FILE_CONTENTS", {
            "content": content,
            "encoding": "base64",
            "size_bytes": size,
            "truncated": False,
        }
    if kind in ("FILE_WRITE", "FILE_DELETE"):
        return "ACK", {"ok": True}
    return None


@dataclass
class FakeAgent:
    """A session's agent: HELLO, answers from `answer`, PONG to every PING."""

    conn: ClientConnection
    ack: dict[str, Any]
    answer: Answer = default_answer
    received: list[dict[str, Any]] = field(default_factory=list)
    sent_sizes: list[int] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    @classmethod
    async def connect(
        cls, hub: RunningHub, session: str, token: str, *, machine: str = "m1", **kw: Any
    ) -> FakeAgent:
        conn = await connect(
            f"{hub.url}/ws/local-executor/{session}",
            additional_headers={"Authorization": f"Bearer {token}"},
            compression=None,
            max_size=FRAME_LIMIT_BYTES,
            ping_interval=None,
            proxy=None,
        )
        await conn.send(msgspec.json.encode(hello(machine)).decode())
        ack = msgspec.json.decode(await conn.recv())
        agent = cls(conn, ack, **kw)
        agent.task = asyncio.ensure_future(agent._serve())
        return agent

    async def _serve(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for data in self.conn:
                frame = msgspec.json.decode(data)
                self.received.append(frame)
                if frame["type"] == "PING":
                    await self._send("PONG", frame["id"], {})
                    continue
                answer = self.answer(frame)
                if answer is not None:
                    await self._send(answer[0], frame["id"], answer[1])

    @staticmethod
    def _frame(kind: str, request_id: str, payload: Any) -> bytes:
        frame = {"type": kind, "id": request_id, "ts": 1.0, "version": "1.1"}
        frame["pending_capacity"] = 4
        frame["payload"] = payload
        return msgspec.json.encode(frame)

    def frame_size(self, kind: str, request_id: str, payload: Any) -> int:
        """The size of the frame `_send` would send for these."""
        return len(self._frame(kind, request_id, payload))

    async def _send(self, kind: str, request_id: str, payload: Any) -> None:
        data = self._frame(kind, request_id, payload)
        self.sent_sizes.append(len(data))
        await self.conn.send(data.decode())

    async def close(self) -> None:
        await self.conn.close()
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)


class StalledClient:
    """A client WebSocket opened by hand: it sends frames and never reads."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, hub: RunningHub, path: str, token: str) -> StalledClient:
        reader, writer = await asyncio.open_connection(hub.host, hub.port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: {hub.host}:{hub.port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                f"Authorization: Bearer {token}\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        status = await reader.readuntil(b"\r\n\r\n")
        assert status.startswith(b"HTTP/1.1 101"), status
        return cls(reader, writer)

    def send_text(self, data: bytes) -> None:
        """One masked text frame (mask key 0: the payload goes unchanged)."""
        length = len(data)
        if length < 126:
            header = bytes([0x81, 0x80 | length])
        elif length < 65536:
            header = bytes([0x81, 0x80 | 126]) + length.to_bytes(2, "big")
        else:
            header = bytes([0x81, 0x80 | 127]) + length.to_bytes(8, "big")
        self.writer.write(header + b"\x00\x00\x00\x00" + data)

    def close(self) -> None:
        self.writer.transport.abort()


def request(kind: str, request_id: str, payload: dict[str, Any]) -> bytes:
    return msgspec.json.encode(
        {"type": kind, "id": request_id, "ts": 1.0, "version": "1.1", "payload": payload}
    )
