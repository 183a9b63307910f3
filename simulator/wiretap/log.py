"""The recorder's core: what crossed one node's link, turned into records.

Sans-I/O: the network (sim) or the proxy's byte-stream tap (process, docker)
tells a `WireLog` what happened and when; it keeps per-connection state (the
session from the upgrade path or HELLO_ACK, the machine from HELLO, whether a
Close was seen) and hands each record to its sink. It never looks at
anything the node or hub says about itself beyond what is on the wire.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import msgspec

from tetherbed.simulator.wiretap import records as r
from tetherbed.simulator.wiretap.digest import payload_digest
from tetherbed.wire.endpoints import session_of_path


class _Envelope(msgspec.Struct):
    type: Any = None
    id: Any = None
    version: Any = None
    pending_capacity: Any = None
    payload: msgspec.Raw = msgspec.Raw(b"{}")


_decode_envelope = msgspec.json.Decoder(_Envelope).decode


class WireLog:
    """Every connection of one node, numbered in the order they were opened."""

    def __init__(
        self,
        node: str,
        sink: r.WireSink,
        *,
        leg: str = "agent",
        scrub: Callable[[bytes], bytes] | None = None,
    ) -> None:
        """`scrub` rewrites a payload before it is digested or kept (`scrub.py`)."""
        self.node = node
        self.leg = leg
        self.sink = sink
        self.scrub = scrub
        self._numbers = itertools.count(1)

    def connect(self, now: float) -> WireConnection:
        """A new TCP connection from the node: an attempt to reach the hub."""
        connection = WireConnection(self, f"{self.node}#{next(self._numbers)}")
        connection.emit(r.CONNECT, {}, now)
        return connection

    def stream_tap(self, now: float) -> Any:
        """A byte-stream reader for a new connection (what the proxy feeds)."""
        from tetherbed.simulator.wiretap.stream import StreamTap

        return StreamTap(self.connect(now))


class WireConnection:
    def __init__(self, log: WireLog, conn: str) -> None:
        self.log = log
        self.conn = conn
        self.session: str | None = None
        self.machine: str | None = None
        self.path: str | None = None
        self.closes: dict[str, bool] = {}
        self.ended = False
        self.upgrading = True

    def emit(self, f: str, value: dict[str, Any], now: float) -> None:
        value = {"conn": self.conn, "leg": self.log.leg, **value}
        self.log.sink(r.WireRecord(f, value, now, self.session, self.machine))

    # --- the HTTP upgrade -------------------------------------------------------

    def upgrade(self, path: str, now: float) -> None:
        self.path = path
        self.session = session_of_path(path)
        self.emit(r.UPGRADE, {"path": path}, now)

    def plain_request(self, method: str, path: str, now: float) -> None:
        """An HTTP request that asks for no WebSocket (a health probe, say)."""
        self.upgrading = False
        self.emit(r.REQUEST, {"method": method, "path": path}, now)

    def response(self, status: int, now: float) -> None:
        if not self.upgrading:
            self.emit(r.RESPONSE, {"status": status}, now)
        elif status == 101:
            self.emit(r.OPEN, {"path": self.path, "status": status}, now)
        else:
            self.emit(r.REFUSED, {"status": status}, now)

    def unreachable(self, now: float) -> None:
        self.emit(r.UNREACHABLE, {}, now)

    # --- WebSocket messages -----------------------------------------------------

    def message(self, direction: str, data: bytes, now: float, *, text: bool = True) -> None:
        value: dict[str, Any] = {"dir": direction, "size": len(data)}
        if not text:
            value.update(type="ws.binary", digest=payload_digest(data))
            self.emit(r.FRAME, value, now)
            return
        try:
            envelope = _decode_envelope(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            envelope = None
        if envelope is None or not isinstance(envelope.type, str):
            value.update(type="ws.text", digest=payload_digest(data))
            self.emit(r.FRAME, value, now)
            return
        payload = bytes(envelope.payload)
        if self.log.scrub is not None:
            payload = self.log.scrub(payload)
        value.update(
            type=envelope.type,
            id=envelope.id if isinstance(envelope.id, str | int) else None,
            version=envelope.version if isinstance(envelope.version, str) else None,
            digest=payload_digest(payload),
        )
        if envelope.pending_capacity is not None:
            value["pending_capacity"] = envelope.pending_capacity
        if envelope.type in r.PAYLOAD_KEPT:
            kept = _kept(payload)
            value["payload"] = kept
            self._learn(envelope.type, kept)
        elif envelope.type in r.SESSION_NAMED:
            named = _kept(payload)
            if isinstance(named, dict) and isinstance(named.get("session_id"), str):
                value["session_id"] = named["session_id"]
        self.emit(r.FRAME, value, now)

    def control(self, direction: str, kind: str, now: float) -> None:
        """A WebSocket-level ping or pong (`kind`: `ws.ping`, `ws.pong`)."""
        self.emit(r.FRAME, {"dir": direction, "type": kind, "size": 0}, now)

    def close(self, direction: str, code: int | None, reason: str, now: float) -> None:
        first = not self.closes
        self.closes[direction] = True
        by = "node" if direction == r.UP else "hub"
        value = {"dir": direction, "by": by, "code": code, "reason": reason, "first": first}
        self.emit(r.CLOSE, value, now)

    def end(self, how: str, now: float) -> None:
        """The TCP connection is over: `closed` (FIN, or closed by us) or `reset`."""
        if self.ended:
            return
        self.ended = True
        clean = len(self.closes) == 2
        self.emit(r.END, {"how": how, "clean": clean}, now)

    def _learn(self, kind: str, payload: Any) -> None:
        if not isinstance(payload, dict):
            return
        if kind == "HELLO" and isinstance(payload.get("machine_id"), str):
            self.machine = payload["machine_id"]
        elif kind == "HELLO_ACK" and isinstance(payload.get("session_id"), str):
            self.session = self.session or payload["session_id"]


def _kept(payload: bytes) -> Any:
    try:
        value = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return None
    return _trim(value)


def _trim(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= r.TEXT_KEPT else value[: r.TEXT_KEPT - 1] + "…"
    if isinstance(value, dict):
        return {str(k): _trim(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trim(v) for v in value[:64]]
    return value
