"""Agent connections as the wire recorder saw them, one object per TCP connection.

Rebuilt from the `wire:<node>` records (`simulator/wiretap/records.py`): when
the node connected, what it asked for, how the hub answered, every frame in
both directions, the Close frames and the end. Everything here is what crossed
the node's link; nothing comes from the hub's or the agent's own journal.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from tetherbed.simulator.checkers.evidence.records import (
    fields,
    integer,
    is_event,
    ordered,
    text,
    time_of,
)
from tetherbed.simulator.history import History, Record
from tetherbed.simulator.wiretap import records as wire
from tetherbed.wire import serial_io
from tetherbed.wire.catalog import CONTROL_REQUESTS, DATA_REQUESTS, STREAMING_RESPONSES
from tetherbed.wire.codes import is_fatal_close
from tetherbed.wire.endpoints import CONTROL_PATH, is_agent_path, session_of_path

#: Request types the hub sends an agent (data and control planes, and the
#: serial I/O extension's, which only an agent that negotiated it gets).
REQUEST_TYPES = frozenset(str(t) for t in (*DATA_REQUESTS, *CONTROL_REQUESTS, *serial_io.REQUESTS))
_STREAMING = frozenset(str(t) for t in STREAMING_RESPONSES)


@dataclass(slots=True)
class Request:
    """One request frame that reached the node, and the node's answer to it."""

    frame: Record
    answer: Record | None = None

    @property
    def kind(self) -> str:
        return text(fields(self.frame).get("type")) or ""

    @property
    def id(self) -> object:
        return fields(self.frame).get("id")

    @property
    def digest(self) -> str | None:
        return text(fields(self.frame).get("digest"))


@dataclass(slots=True)
class Connection:
    node: str
    conn: str
    connect: Record
    leg: str = "agent"
    request: Record | None = None  # the upgrade (or plain HTTP) request
    opened: Record | None = None  # 101
    refused: Record | None = None  # another HTTP status
    unreachable: Record | None = None
    end: Record | None = None
    frames: list[Record] = field(default_factory=list)
    closes: list[Record] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)

    # --- what it was ----------------------------------------------------------------

    @property
    def path(self) -> str | None:
        return text(fields(self.request).get("path")) if self.request is not None else None

    @property
    def is_attempt(self) -> bool:
        """An attempt to (re)connect as an agent: an upgrade to an agent path, or
        a connection that never showed a request (the hub was not there)."""
        if self.request is None:
            return True
        if self.request.f != wire.UPGRADE:
            return False
        path = self.path
        return path is None or is_agent_path(path)

    @property
    def is_control(self) -> bool:
        return (self.path or "").rstrip("/") == CONTROL_PATH

    @property
    def session(self) -> str | None:
        found = session_of_path(self.path or "")
        if found is None and self.hello_ack is not None:
            found = text((fields(self.hello_ack).get("payload") or {}).get("session_id"))
        return found

    @property
    def machine(self) -> str | None:
        if self.hello is None:
            return None
        return text((fields(self.hello).get("payload") or {}).get("machine_id"))

    def first_frame(self, kind: str, direction: str) -> Record | None:
        for frame in self.frames:
            value = fields(frame)
            if value.get("type") == kind and value.get("dir") == direction:
                return frame
        return None

    @property
    def hello(self) -> Record | None:
        return self.first_frame("HELLO", wire.UP)

    @property
    def hello_ack(self) -> Record | None:
        return self.first_frame("HELLO_ACK", wire.DOWN)

    @property
    def served(self) -> bool:
        """The hub accepted it as an agent connection (HELLO_ACK reached the node)."""
        return self.hello_ack is not None

    # --- how it ended ---------------------------------------------------------------

    @property
    def revoked(self) -> Record | None:
        return self.first_frame("SESSION_REVOKED", wire.DOWN)

    @property
    def close_received(self) -> Record | None:
        """The first Close frame that reached the node."""
        for close in self.closes:
            if fields(close).get("dir") == wire.DOWN:
                return close
        return None

    @property
    def close_sent(self) -> Record | None:
        for close in self.closes:
            if fields(close).get("dir") == wire.UP:
                return close
        return None

    @property
    def fatal(self) -> Record | None:
        """What told the node not to come back: SESSION_REVOKED, or a close
        4426-4429 that reached it (whichever came first)."""
        close = self.close_received
        candidates = [self.revoked]
        if close is not None and is_fatal_close(integer(fields(close).get("code"))):
            candidates.append(close)
        found = [c for c in candidates if c is not None]
        return min(found, key=time_of) if found else None

    @property
    def lost_at(self) -> Record | None:
        """When the node learnt the connection was over: the first Close it
        received or sent, or the failed upgrade, or the end."""
        found = [
            r
            for r in (
                self.close_received,
                self.close_sent,
                self.refused,
                self.unreachable,
                self.end,
            )
            if r is not None
        ]
        return min(found, key=time_of) if found else None

    @property
    def released(self) -> Record | None:
        """When the hub let go of it, or it of the hub: SESSION_REVOKED or a Close
        in either direction, or the end."""
        found = [r for r in (self.revoked, self.close_received, self.close_sent, self.end) if r]
        return min(found, key=time_of) if found else None


def has_wire(history: History) -> bool:
    return any(wire.node_of(r.process) is not None for r in history)


def connections(history: History, *, leg: str | None = "agent") -> list[Connection]:
    """Every recorded connection, in the order they were opened."""
    found: list[Connection] = []
    by_conn: dict[tuple[str, str], Connection] = {}
    for record in ordered(history):
        node = wire.node_of(record.process)
        if node is None or not is_event(record):
            continue
        value = fields(record)
        conn = text(value.get("conn"))
        if conn is None:
            continue
        key = (node, conn)
        connection = by_conn.get(key)
        if record.f == wire.CONNECT or connection is None:
            if connection is not None:
                continue  # a second connect for one conn id: ignore it
            connection = Connection(node, conn, record, leg=text(value.get("leg")) or "agent")
            by_conn[key] = connection
            found.append(connection)
            if record.f == wire.CONNECT:
                continue
        _add(connection, record)
    if leg is not None:
        found = [c for c in found if c.leg == leg]
    return found


def by_node(found: list[Connection]) -> dict[str, list[Connection]]:
    nodes: dict[str, list[Connection]] = defaultdict(list)
    for connection in found:
        nodes[connection.node].append(connection)
    return dict(nodes)


def _add(connection: Connection, record: Record) -> None:
    f = record.f
    if f in (wire.UPGRADE, wire.REQUEST):
        connection.request = connection.request or record
    elif f == wire.OPEN:
        connection.opened = connection.opened or record
    elif f in (wire.REFUSED, wire.RESPONSE):
        connection.refused = connection.refused or record
    elif f == wire.UNREACHABLE:
        connection.unreachable = connection.unreachable or record
    elif f == wire.END:
        connection.end = connection.end or record
    elif f == wire.CLOSE:
        connection.closes.append(record)
    elif f == wire.FRAME:
        connection.frames.append(record)
        _pair(connection, record)


def _pair(connection: Connection, frame: Record) -> None:
    value = fields(frame)
    kind = text(value.get("type"))
    if kind is None:
        return
    if value.get("dir") == wire.DOWN and kind in REQUEST_TYPES:
        connection.requests.append(Request(frame))
    elif value.get("dir") == wire.UP and kind not in _STREAMING and value.get("id") is not None:
        for request in reversed(connection.requests):
            if request.answer is None and request.id == value.get("id"):
                request.answer = frame
                return
