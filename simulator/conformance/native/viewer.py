"""A viewer of a native adapter's video: the browser side of the loopback WebSocket.

It opens the URL `video_open` returned with the panel's Origin, presents the
ticket as its first text message, and records every binary frame; it acks
frames when told to (or never: a stalled viewer), asks for keyframes, and
can send what a browser should not (a message over the size limit).
`parse_frame` reads the CDV1 / CDN1 headers the spec lays out.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from websockets.asyncio.client import connect
from websockets.exceptions import InvalidHandshake, InvalidStatus

from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.recorded_socket import Frame, RecordedSocket
from tetherbed.wire import crossdesk


@dataclass(frozen=True, slots=True)
class VideoFrame:
    magic: int
    generation: int
    sequence: int
    timestamp_us: int
    flags: int
    body: bytes
    width: int | None = None
    height: int | None = None

    @property
    def keyframe(self) -> bool:
        return bool(self.flags & crossdesk.FLAG_IDR)

    def nal_types(self) -> set[int]:
        """H.264 NAL unit types in an Annex B body."""
        types, data, index = set(), self.body, 0
        while True:
            index = data.find(b"\x00\x00\x01", index)
            if index < 0 or index + 3 >= len(data):
                return types
            types.add(data[index + 3] & 0x1F)
            index += 3


class BadFrame(ValueError):
    pass


def parse_frame(data: bytes) -> VideoFrame:
    if len(data) < crossdesk.HEADER.size:
        raise BadFrame(f"{len(data)} bytes: shorter than the 24-byte header")
    magic, generation, sequence, stamp, flags = crossdesk.HEADER.unpack_from(data)
    if magic == crossdesk.MAGIC_H264:
        return VideoFrame(magic, generation, sequence, stamp, flags, data[24:])
    if magic == crossdesk.MAGIC_NV12:
        if len(data) < 32:
            raise BadFrame("an NV12 frame shorter than its 32-byte header")
        width, height = crossdesk.NV12_SIZE.unpack_from(data, 24)
        return VideoFrame(magic, generation, sequence, stamp, flags, data[32:], width, height)
    raise BadFrame(f"magic {magic:#010x} is neither CDV1 nor CDN1")


class ViewerRefused(Exception):
    pass


class Viewer:
    def __init__(self, evidence: Evidence, channel: str) -> None:
        self.evidence = evidence
        self.channel = channel
        self.socket: RecordedSocket | None = None
        self.auto_ack = False
        self._acks: set[asyncio.Task[None]] = set()

    async def open(self, url: str, origin: str, *, headers: dict[str, str] | None = None) -> None:
        self.evidence.add(self.channel, "sent", "upgrade", f"GET {url} (Origin {origin})")
        try:
            ws = await connect(
                url,
                origin=origin,  # type: ignore[arg-type]
                additional_headers=headers or {},
                compression=None,
                max_size=64 * 1024 * 1024,
                max_queue=None,
                ping_interval=None,
                open_timeout=5,
                close_timeout=2,
            )
        except InvalidStatus as exc:
            self.evidence.add(
                self.channel, "received", "refused", f"HTTP {exc.response.status_code}"
            )
            raise ViewerRefused(f"HTTP {exc.response.status_code}") from None
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            self.evidence.add(self.channel, "received", "refused", f"{type(exc).__name__}: {exc}")
            raise ViewerRefused(str(exc)) from None
        self.socket = RecordedSocket(ws, self.evidence, self.channel, on_frame=self._on_frame)
        self.socket.start_reader()

    def _on_frame(self, frame: Frame) -> None:
        if self.auto_ack and isinstance(frame.data, bytes):
            task = asyncio.ensure_future(self.ack(frame))
            self._acks.add(task)
            task.add_done_callback(self._acks.discard)

    async def present(self, ticket: str) -> None:
        assert self.socket is not None
        await self.socket.send(json.dumps({"ticket": ticket}))

    def video(self) -> list[VideoFrame]:
        if self.socket is None:
            return []
        return [parse_frame(f.data) for f in self.socket.received if isinstance(f.data, bytes)]

    def binary(self) -> list[Frame]:
        if self.socket is None:
            return []
        return [f for f in self.socket.received if isinstance(f.data, bytes)]

    async def ack(self, frame: Frame | VideoFrame) -> None:
        video = frame if isinstance(frame, VideoFrame) else parse_frame(frame.data)  # type: ignore[arg-type]
        assert self.socket is not None
        await self.socket.send(
            json.dumps({"type": "ack", "generation": video.generation, "sequence": video.sequence})
        )

    async def ack_all(self) -> None:
        for frame in self.binary():
            await self.ack(frame)

    async def keyframe(self) -> None:
        assert self.socket is not None
        await self.socket.send(json.dumps({"type": "keyframe"}))

    async def wait_frames(self, count: int, timeout: float) -> list[Frame]:
        assert self.socket is not None
        await self.socket.wait_for(lambda f: len(self.binary()) >= count, timeout)
        return self.binary()

    async def shutdown(self) -> None:
        if self.socket is not None:
            await self.socket.shutdown()
