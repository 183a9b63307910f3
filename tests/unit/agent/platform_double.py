"""A scripted platform for one in-process agent: the test plays the hub's side.

`Platform.serve(config, operations)` runs a real `AgentRuntime` over an
in-memory transport on the running loop; the test sends frames with `send` and
reads every frame the agent produced, raw, with `next_frame` or by id with
`answer`. Raw bytes are kept so a test can judge exactly what crossed the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from tetherbed.agent.audit.sink import NullAuditSink
from tetherbed.agent.config import AgentConfig
from tetherbed.agent.runtime import AgentRuntime, Operations
from tetherbed.runtime.transport import TransportClosed

ANSWER_TIMEOUT = 30.0


class Wire:
    """The agent's end of an in-memory connection; records every frame it sends."""

    def __init__(self) -> None:
        self.to_agent: asyncio.Queue[bytes | TransportClosed] = asyncio.Queue()
        self.frames: list[bytes] = []
        self._arrived = asyncio.Condition()
        self.closed_with: tuple[int, str] | None = None

    async def send(self, data: bytes) -> None:
        if self.closed_with is not None:
            raise TransportClosed(*self.closed_with)
        async with self._arrived:
            self.frames.append(bytes(data))
            self._arrived.notify_all()

    async def recv(self) -> bytes:
        item = await self.to_agent.get()
        if isinstance(item, TransportClosed):
            self.closed_with = (item.code or 1006, item.reason)
            raise item
        return item

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.closed_with is None:
            self.closed_with = (code, reason)
            self.to_agent.put_nowait(TransportClosed(code, reason))

    async def wait_for(self, predicate: Any, timeout: float = ANSWER_TIMEOUT) -> dict[str, Any]:
        """The first recorded frame (decoded) for which `predicate` holds."""

        def found() -> dict[str, Any] | None:
            for raw in self.frames:
                frame = msgspec.json.decode(raw)
                if predicate(frame):
                    return frame
            return None

        async with asyncio.timeout(timeout), self._arrived:
            while (frame := found()) is None:
                await self._arrived.wait()
            return frame


class Platform:
    """Plays the platform for one agent connection."""

    def __init__(self, wire: Wire, runtime: AgentRuntime) -> None:
        self.wire = wire
        self.runtime = runtime
        self._ids = itertools.count(1)

    @classmethod
    @contextlib.asynccontextmanager
    async def serve(
        cls,
        config: AgentConfig,
        operations: Operations | None = None,
        *,
        granted: list[str] | None = None,
        ack: dict[str, Any] | None = None,
    ) -> AsyncIterator[Platform]:
        """Connect an agent, complete the handshake, yield; stop the agent after."""
        wire = Wire()

        async def connector(url: str, headers: Any) -> Wire:
            return wire

        runtime = AgentRuntime(
            config, connector=connector, operations=operations, audit=NullAuditSink()
        )
        task = asyncio.ensure_future(runtime.run())
        platform = cls(wire, runtime)
        try:
            hello = await wire.wait_for(lambda f: f["type"] == "HELLO")
            payload = {
                "session_id": config.session_id,
                "connection_id": None if config.session_id else "conn-1",
                "protocol_version": "1.1",
                "granted_capabilities": (
                    hello["payload"]["capabilities"] if granted is None else granted
                ),
                "max_file_size_bytes": 10 * 1024 * 1024,
                "command_timeout_seconds": 30,
                "max_concurrent": 4,
                **(ack or {}),
            }
            platform.send({"type": "HELLO_ACK", "id": hello["id"], "payload": payload})
            await wire.wait_for(lambda f: f["type"] == "STATUS")
            yield platform
        finally:
            await runtime.shutdown()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 30)
            await runtime.close()

    def send(self, frame: dict[str, Any]) -> None:
        """Send one frame; `ts` and `version` are filled in when missing."""
        self.send_raw(msgspec.json.encode({"ts": 1.0, "version": "1.1", **frame}))

    def send_raw(self, data: bytes) -> None:
        self.wire.to_agent.put_nowait(data)

    def request(self, kind: str, payload: dict[str, Any], request_id: str | None = None) -> str:
        """Send a request; returns its id."""
        request_id = request_id or f"r{next(self._ids)}"
        self.send({"type": kind, "id": request_id, "payload": payload})
        return request_id

    async def answer(self, request_id: str | None, timeout: float = ANSWER_TIMEOUT) -> dict:
        """The agent's (first) answer under `request_id`."""
        return await self.wire.wait_for(
            lambda f: f.get("id") == request_id and f["type"] not in ("HELLO", "STATUS"),
            timeout,
        )

    async def call(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.answer(self.request(kind, payload))
