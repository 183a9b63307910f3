"""One WebSocket on the sync `websocket-client` library, for users on gevent.

Locust patches the standard library with gevent, so a blocking `recv` here
parks one greenlet, not the process. A link carries whole messages as bytes
(no text decoding on the hot path), remembers the Close it was sent, and
reports a refused upgrade with its HTTP status.
"""

from __future__ import annotations

import struct
from typing import Any

import websocket

#: Largest message a link accepts (the spec's frame limit).
MAX_MESSAGE = 16 * 1024 * 1024


class Refused(Exception):
    """The server answered the upgrade with another status than 101."""

    def __init__(self, status: int, body: bytes = b"") -> None:
        super().__init__(f"upgrade refused with HTTP {status}")
        self.status = status
        self.body = body


class Closed(Exception):
    """The connection is gone: `code` is the Close code received (None: no Close)."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        super().__init__(f"closed with {code}" + (f" {reason}" if reason else ""))
        self.code = code
        self.reason = reason


class Link:
    """A connected WebSocket: `send` and `recv` whole messages as bytes."""

    def __init__(self, ws: websocket.WebSocket) -> None:
        self._ws = ws
        self.close_code: int | None = None
        self.close_reason = ""

    @classmethod
    def open(
        cls,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        origin: str | None = None,
        timeout: float = 10.0,
    ) -> Link:
        """Connect and upgrade; `Refused` for another status, `OSError` when unreachable."""
        options: dict[str, Any] = {
            "header": [f"{name}: {value}" for name, value in (headers or {}).items()],
            "timeout": timeout,
            "skip_utf8_validation": True,
            "enable_multithread": True,
        }
        if origin is not None:
            options["origin"] = origin
        else:
            options["suppress_origin"] = True
        try:
            ws = websocket.create_connection(url, **options)
        except websocket.WebSocketBadStatusException as exc:
            raise Refused(exc.status_code, exc.resp_body or b"") from None
        except (websocket.WebSocketException, ConnectionError, TimeoutError) as exc:
            # No URL in the message: Locust groups failures by their text.
            raise OSError(f"cannot connect: {exc}") from None
        ws.settimeout(None)
        return cls(ws)

    def settimeout(self, seconds: float | None) -> None:
        self._ws.settimeout(seconds)

    def send(self, data: bytes, *, binary: bool = False) -> None:
        opcode = websocket.ABNF.OPCODE_BINARY if binary else websocket.ABNF.OPCODE_TEXT
        try:
            self._ws.send(data, opcode)
        except (websocket.WebSocketException, OSError) as exc:
            raise Closed(self.close_code, str(exc)) from None

    def recv(self) -> bytes:
        """The next message; `Closed` once the peer closed or the connection broke.
        `TimeoutError` after the timeout set with `settimeout`."""
        try:
            opcode, data = self._ws.recv_data()
        except websocket.WebSocketTimeoutException:
            raise TimeoutError("no message in time") from None
        except (websocket.WebSocketException, OSError) as exc:
            raise Closed(self.close_code, str(exc)) from None
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            if len(data) >= 2:
                self.close_code = struct.unpack("!H", data[:2])[0]
                self.close_reason = data[2:].decode("utf-8", "replace")
            else:
                self.close_code = 1005
            self._ws.shutdown()
            raise Closed(self.close_code, self.close_reason)
        return data if isinstance(data, bytes) else bytes(data)

    def close(self, code: int = 1000, reason: str = "") -> None:
        try:
            self._ws.close(status=code, reason=reason.encode("utf-8")[:123], timeout=1)
        except Exception:
            self._ws.shutdown()

    def abort(self) -> None:
        """Drop the TCP connection without a Close (a machine going to sleep)."""
        self._ws.shutdown()

    @property
    def connected(self) -> bool:
        return bool(self._ws.connected)
