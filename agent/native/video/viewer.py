"""A reference viewer for the loopback video listener: ticket, frames, in-order acks.

What a browser panel does, in Python, for tests, benches and conformance runs.
`ack=False` makes a viewer that never acknowledges (a stalled viewer).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from websockets.asyncio.client import ClientConnection, connect

from tetherbed.agent.native.video.frames import VideoMessage, parse


@dataclass
class Received:
    message: VideoMessage
    size: int
    received_at: float  # time.monotonic()


@dataclass
class Viewer:
    ws: ClientConnection
    ack: bool = True
    frames: list[Received] = field(default_factory=list)

    @classmethod
    async def open(cls, url: str, ticket: str, *, origin: str | None, ack: bool = True) -> Viewer:
        ws = await connect(
            url,
            origin=origin,  # type: ignore[arg-type]
            compression=None,
            max_size=32 * 1024 * 1024,
            proxy=None,
            open_timeout=5,
        )
        await ws.send(json.dumps({"ticket": ticket}))
        return cls(ws, ack)

    async def receive(self, *, keep: Callable[[VideoMessage], bool] = lambda m: True) -> Received:
        data = await self.ws.recv()
        assert isinstance(data, bytes), "video messages are binary"
        now = time.monotonic()
        message = parse(data)
        if self.ack:
            await self.ws.send(
                json.dumps(
                    {"type": "ack", "generation": message.generation, "sequence": message.sequence}
                )
            )
        received = Received(message, len(data), now)
        if keep(message):
            self.frames.append(received)
        return received

    async def request_keyframe(self) -> None:
        await self.ws.send(json.dumps({"type": "keyframe"}))

    async def close(self) -> None:
        await self.ws.close()
