"""The message transport that drivers are given instead of opening sockets.

A transport moves whole messages. The `websockets` adapter wraps a real
WebSocket; the simulator supplies an in-memory one with the same shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol


class TransportClosed(Exception):
    """The peer or the network ended the connection.

    `code` is the close code received (None when the connection dropped without
    a close frame); `reason` is its text.
    """

    def __init__(self, code: int | None, reason: str = "") -> None:
        super().__init__(f"connection closed: {code} {reason}".rstrip())
        self.code = code
        self.reason = reason


class UpgradeRefused(Exception):
    """The server answered the WebSocket upgrade with an HTTP error status."""

    def __init__(self, status: int, body: bytes = b"") -> None:
        super().__init__(f"upgrade refused with HTTP {status}")
        self.status = status
        self.body = body


class MessageTransport(Protocol):
    async def send(self, data: bytes) -> None:
        """Send one text message; the bytes are UTF-8 JSON."""

    async def recv(self) -> bytes:
        """The next message; raises TransportClosed when the connection ends."""

    async def close(self, code: int = 1000, reason: str = "") -> None: ...


#: Opens a transport to `url` with extra request headers.
Connector = Callable[[str, Mapping[str, str]], Awaitable[MessageTransport]]
