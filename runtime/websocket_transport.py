"""`MessageTransport` over the `websockets` library (agents and test clients)."""

from __future__ import annotations

from collections.abc import Mapping
from ssl import SSLContext

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tetherbed.runtime.transport import TransportClosed, UpgradeRefused
from tetherbed.wire.limits import FRAME_LIMIT_BYTES


class WebsocketsTransport:
    """Adapts a `websockets` connection; text frames are passed as raw bytes."""

    __slots__ = ("_conn",)

    def __init__(self, conn: ClientConnection) -> None:
        self._conn = conn

    async def send(self, data: bytes) -> None:
        try:
            await self._conn.send(data, text=True)
        except ConnectionClosed as exc:
            raise _closed(exc) from None

    async def recv(self) -> bytes:
        try:
            message = await self._conn.recv(decode=False)
        except ConnectionClosed as exc:
            raise _closed(exc) from None
        return message

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self._conn.close(code, reason)


def _closed(exc: ConnectionClosed) -> TransportClosed:
    frame = exc.rcvd
    if frame is None:
        return TransportClosed(None, "no close frame")
    return TransportClosed(frame.code, frame.reason)


async def connect_websocket(
    url: str,
    headers: Mapping[str, str],
    *,
    open_timeout: float = 10.0,
    ssl: SSLContext | None = None,
) -> WebsocketsTransport:
    """Open a WebSocket the way every Tetherbed peer must: no compression, a
    16 MiB message limit, and library pings off (the protocol has its own).
    `ssl` verifies a `wss://` peer (default: the system's trust store)."""
    extra = {"ssl": ssl} if ssl is not None and url.startswith("wss://") else {}
    try:
        conn = await connect(
            url,
            additional_headers=dict(headers),
            compression=None,
            max_size=FRAME_LIMIT_BYTES,
            ping_interval=None,
            open_timeout=open_timeout,
            proxy=None,
            **extra,
        )
    except InvalidStatus as exc:
        raise UpgradeRefused(exc.response.status_code, exc.response.body or b"") from None
    return WebsocketsTransport(conn)
