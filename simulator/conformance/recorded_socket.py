"""One WebSocket connection held by a peer of the suite, every frame recorded.

The scripted platform an agent dials, the raw agents a hub serves and the
viewers of a native adapter's video all talk through this: what it sends and
what it receives goes into the case's evidence as it happens, and cases wait
for frames by predicate (`wait_for`), never consuming them, so one case can
ask "did an ERROR with this id come back" and later "was anything sent after
the revocation" over the same record. How the connection ended is kept too:
who closed it, with which code and reason, or that it ended without a close.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.connection import Connection
from websockets.exceptions import ConnectionClosed

from tetherbed.simulator.conformance.evidence import Evidence


@dataclass(slots=True)
class Frame:
    """A message received, with its JSON parsed when it is JSON."""

    t: float
    data: str | bytes
    envelope: dict[str, Any] | None = None

    @property
    def type(self) -> str | None:
        value = (self.envelope or {}).get("type")
        return value if isinstance(value, str) else None

    @property
    def id(self) -> Any:
        return (self.envelope or {}).get("id")

    @property
    def payload(self) -> dict[str, Any]:
        value = (self.envelope or {}).get("payload")
        return value if isinstance(value, dict) else {}

    def describe(self) -> str:
        if self.envelope is None:
            return f"a non-JSON frame of {len(self.data)} bytes"
        code = self.payload.get("code") if self.type == "ERROR" else None
        return f"{self.type}" + (f" {code}" if code else "") + f" (id {self.id!r})"


@dataclass(slots=True)
class Ending:
    """How the connection ended, as seen from this side."""

    #: "peer" (it sent the first Close), "us", or "abnormal" (no Close frame).
    by: str
    code: int | None
    reason: str
    t: float


@dataclass(slots=True)
class RecordedSocket:
    ws: Connection
    evidence: Evidence
    channel: str
    received: list[Frame] = field(default_factory=list)
    ending: Ending | None = None
    #: Called with every frame as it arrives (a raw agent answers PINGs so).
    on_frame: Callable[[Frame], None] | None = None
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _reader: asyncio.Task[None] | None = None

    def start_reader(self) -> None:
        """For a client connection: read in the background."""
        self._reader = asyncio.ensure_future(self.read_until_closed())

    async def read_until_closed(self) -> None:
        """Record every message until the connection ends (a server handler awaits this)."""
        try:
            async for message in self.ws:
                parsed = _parse(message)
                self.evidence.received(self.channel, message)
                frame = Frame(self.evidence.now(), message, parsed)
                async with self._changed:
                    self.received.append(frame)
                    self._changed.notify_all()
                if self.on_frame is not None:
                    self.on_frame(frame)
        except ConnectionClosed as exc:
            self._ended(exc)
        except Exception as exc:  # a transport error: the connection is gone all the same
            self._note_end("abnormal", None, f"{type(exc).__name__}: {exc}")
        else:
            self._ended(None)
        async with self._changed:
            self._changed.notify_all()

    def _ended(self, exc: ConnectionClosed | None) -> None:
        protocol = self.ws.protocol
        rcvd = exc.rcvd if exc is not None else protocol.close_rcvd
        sent = exc.sent if exc is not None else protocol.close_sent
        rcvd_first = exc.rcvd_then_sent if exc is not None else protocol.close_rcvd_then_sent
        if rcvd is not None and (sent is None or rcvd_first):
            self._note_end("peer", rcvd.code, rcvd.reason)
        elif sent is not None:
            self._note_end("us", sent.code, sent.reason)
        else:
            self._note_end("abnormal", None, "the connection ended without a Close frame")

    def _note_end(self, by: str, code: int | None, reason: str) -> None:
        if self.ending is not None:
            return
        self.ending = Ending(by, code, reason, self.evidence.now())
        who = {"peer": "the peer closed", "us": "we closed", "abnormal": "ended"}[by]
        text = f"{who}" + (f" with {code}" if code is not None else "")
        self.evidence.add(self.channel, "event", "close", f"{text} {reason}".strip())

    @property
    def closed(self) -> bool:
        return self.ending is not None

    # --- sending ------------------------------------------------------------------

    async def send(self, message: str | bytes | dict[str, Any]) -> bool:
        """Send and record; False when the connection is already gone."""
        data = json.dumps(message, separators=(",", ":")) if isinstance(message, dict) else message
        self.evidence.sent(self.channel, data)
        try:
            await self.ws.send(data)
        except ConnectionClosed:
            return False
        return True

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.evidence.add(self.channel, "sent", "close", f"{code} {reason}".strip())
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(code, reason), 5)
        self._note_end("us", code, reason)

    def abort(self) -> None:
        """Drop the TCP connection without a Close: a crash or a network cut."""
        self.evidence.add(self.channel, "sent", "close", "TCP connection dropped (no Close)")
        transport = self.ws.transport
        if transport is not None:
            transport.abort()

    # --- waiting ------------------------------------------------------------------

    async def wait_for(
        self, predicate: Callable[[Frame], bool], timeout: float, *, after: float = -1.0
    ) -> Frame | None:
        """The first frame received after `after` (case time) that matches, within
        `timeout` seconds; None if none came (or the connection ended first)."""
        deadline = time.monotonic() + timeout
        async with self._changed:
            while True:
                for frame in self.received:
                    if frame.t > after and predicate(frame):
                        return frame
                left = deadline - time.monotonic()
                if left <= 0 or self.ending is not None:
                    return None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await self._changed.wait()

    async def wait_closed(self, timeout: float) -> Ending | None:
        deadline = time.monotonic() + timeout
        async with self._changed:
            while self.ending is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await self._changed.wait()
        return self.ending

    def frames(self, predicate: Callable[[Frame], bool], *, after: float = -1.0) -> list[Frame]:
        return [f for f in self.received if f.t > after and predicate(f)]

    async def shutdown(self) -> None:
        """Release the connection at the end of a case."""
        if not self.closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ws.close(1001, "case over"), 2)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader


def _parse(message: str | bytes) -> dict[str, Any] | None:
    if not isinstance(message, str):
        return None
    try:
        value = json.loads(message)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def of_type(kind: str, request_id: Any = None) -> Callable[[Frame], bool]:
    """A predicate: a frame of this type (and this id, when given)."""
    return lambda f: f.type == kind and (request_id is None or f.id == request_id)


def answering(request_id: Any) -> Callable[[Frame], bool]:
    """A predicate: any frame under this id (an answer, an ERROR, a chunk)."""
    return lambda f: f.envelope is not None and f.id == request_id and f.type != "STATUS"
