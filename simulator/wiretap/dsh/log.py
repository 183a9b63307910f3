"""The recorder's core for a dsh-computers link: what crossed, as records.

Sans-I/O: a byte-stream reader (`stream.HttpStreamTap`, on sim and in the
proxy) tells a `DshWireConnection` what it read and when; the connection
numbers the exchanges, summarises bodies (`summary.py`) and hands each
record to the sink. Body digests are taken after the scrubber (the sim's
host folder), as on the WebSocket legs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from tetherbed.simulator.wiretap import records as r
from tetherbed.simulator.wiretap.digest import payload_digest
from tetherbed.simulator.wiretap.dsh import records as d
from tetherbed.simulator.wiretap.dsh import summary


class DshWireLog:
    """Every connection of one agent's link, numbered in the order they were opened."""

    def __init__(
        self,
        node: str,
        sink: r.WireSink,
        *,
        scrub: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self.node = node
        self.sink = sink
        self.scrub = scrub
        self._numbers = itertools.count(1)

    def connect(self, now: float) -> DshWireConnection:
        connection = DshWireConnection(self, f"{self.node}#{next(self._numbers)}")
        connection.emit(r.CONNECT, {}, now)
        return connection

    def stream_tap(self, now: float) -> Any:
        """A byte-stream reader for a new connection (what the proxy feeds)."""
        from tetherbed.simulator.wiretap.dsh.stream import HttpStreamTap

        return HttpStreamTap(self.connect(now))


class DshWireConnection:
    def __init__(self, log: DshWireLog, conn: str) -> None:
        self.log = log
        self.conn = conn
        self.ended = False

    def emit(self, f: str, value: dict[str, Any], now: float) -> None:
        value = {"conn": self.conn, "leg": d.LEG, **value}
        self.log.sink(r.WireRecord(f, value, now))

    def _body(self, raw: bytes) -> tuple[Any, str]:
        if self.log.scrub is not None:
            raw = self.log.scrub(raw)
        try:
            value = json.loads(raw) if raw else None
        except ValueError:
            value = None
        return value, payload_digest(raw)

    def request(self, n: int, method: str, path: str, body: bytes, now: float) -> None:
        value, digest = self._body(body)
        self.emit(
            d.HTTP_REQUEST,
            {
                "n": n,
                "method": method,
                "path": path,
                "size": len(body),
                "digest": digest,
                "body": summary.request_fields(path, value),
            },
            now,
        )

    def response(  # noqa: PLR0917 - one exchange's facts, in order
        self, n: int, method: str, path: str, status: int, body: bytes, now: float
    ) -> None:
        value, digest = self._body(body)
        error = value.get("error") if status >= 400 and isinstance(value, dict) else None
        self.emit(
            d.HTTP_RESPONSE,
            {
                "n": n,
                "method": method,
                "path": path,
                "status": status,
                "size": len(body),
                "digest": digest,
                "error": error if isinstance(error, str) else None,
                "body": summary.response_fields(path, status, value),
            },
            now,
        )

    def sse_open(self, n: int, path: str, status: int, now: float) -> None:
        self.emit(d.SSE_OPEN, {"n": n, "path": path, "status": status}, now)

    def sse_event(self, n: int, event: str, event_id: str | None, data: str, now: float) -> None:
        raw = data.encode("utf-8")
        value, digest = self._body(raw)
        self.emit(
            d.SSE_EVENT,
            {
                "n": n,
                "event": event,
                "id": event_id,
                "size": len(raw),
                "digest": digest,
                "data": summary.event_fields(event, value),
            },
            now,
        )

    def sse_end(self, n: int, how: str, now: float) -> None:
        self.emit(d.SSE_END, {"n": n, "how": how}, now)

    def unreachable(self, now: float) -> None:
        self.emit(r.UNREACHABLE, {}, now)

    def end(self, how: str, now: float) -> None:
        if self.ended:
            return
        self.ended = True
        self.emit(r.END, {"how": how}, now)
