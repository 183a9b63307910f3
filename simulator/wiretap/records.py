"""The wire recorder's records: what crossed one node's link, event by event.

Every record is an `event` of process `wire:<node>` (the agent or client the
link belongs to), with `session` (from the upgrade path or HELLO_ACK) and
`machine` (from HELLO) once the connection has shown them. Every value has
`conn` (`<node>#<n>`, one per TCP connection, in the order they were opened)
and `leg` (`agent`). Directions are `up` (node → hub) and `down` (hub → node),
and everything is seen from the node's side of the recorder: `down` is what
reached the node, `up` is what the node sent, before any fault acted on it.

| event | value | when |
|---|---|---|
| `connect` | | the node opened a TCP connection toward the hub: an attempt |
| `upgrade` | `path` | its HTTP upgrade request (headers are not kept: they carry the token) |
| `request` | `method`, `path` | a plain HTTP request instead (a health probe, say) |
| `response` | `status` | the answer to a plain HTTP request |
| `open` | `path`, `status` (101) | the hub accepted the upgrade |
| `refused` | `status` | the hub answered the upgrade with another HTTP status |
| `unreachable` | | the recorder could not reach the hub: the node's connection is closed |
| `frame` | `dir`, `type`, `id`, `version`, `size`, `digest`, `payload` | one WebSocket message |
| `close` | `dir`, `by` (`node`/`hub`), `code`, `reason`, `first` | a Close frame |
| `end` | `how` (`closed`/`reset`), `clean` | the TCP connection is over |

A frame also has `pending_capacity` when its envelope carries one, and
`session_id` when it is a control-plane frame naming a session
(`SESSION_NAMED`: attach, activate, restore, detach and their answers; the
rest of their payload, a root grant among it, is not kept).
`frame.type` is the envelope's `type`, or `ws.ping`, `ws.pong`, `ws.binary`,
`ws.text` (text that is no JSON envelope). `digest` is `wiretap.digest.
payload_digest` of the payload: the same digest the scenario client records
for what it sent and received, so a request can be followed across the hub.
`payload` is kept only for the frames whose content checkers and people read
(`PAYLOAD_KEPT`); `size` is the message's length in bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tetherbed.wire import serial_io

#: The process name of a node's recorded link.
PREFIX = "wire:"

CONNECT = "connect"
UPGRADE = "upgrade"
REQUEST = "request"
RESPONSE = "response"
OPEN = "open"
REFUSED = "refused"
UNREACHABLE = "unreachable"
FRAME = "frame"
CLOSE = "close"
END = "end"
EVENTS = (CONNECT, UPGRADE, REQUEST, RESPONSE, OPEN, REFUSED, UNREACHABLE, FRAME, CLOSE, END)

UP, DOWN = "up", "down"

#: Frames whose payload the record keeps (the rest: type, id, size, digest):
#: those of the serial I/O extension too, small but for their data (cut to
#: TEXT_KEPT), so the port each one names can be followed.
PAYLOAD_KEPT = frozenset(
    {"HELLO", "HELLO_ACK", "SESSION_REVOKED", "ERROR", "STATUS"}
    | {str(kind) for kind in serial_io.SerialMessageType}
)
#: Control-plane frames whose `session_id` the record keeps (see the module).
SESSION_NAMED = frozenset(
    {"ATTACH_SESSION", "ACTIVATE_SESSION", "RESTORE_SESSION", "DETACH_SESSION"}
    | {"SESSION_ATTACHED", "SESSION_ACTIVATED", "SESSION_RESTORED"}
)
#: Longest text kept inside a kept payload (an ERROR message, say).
TEXT_KEPT = 200


def process_of(node: str) -> str:
    return PREFIX + node


def node_of(process: Any) -> str | None:
    if isinstance(process, str) and process.startswith(PREFIX):
        return process[len(PREFIX) :]
    return None


@dataclass(frozen=True, slots=True)
class WireRecord:
    """One record before it enters the history."""

    f: str
    value: dict[str, Any]
    time: float
    session: str | None = None
    machine: str | None = None


WireSink = Callable[[WireRecord], None]


def file_sink(write: Callable[..., None]) -> WireSink:
    """Records as event-log lines (`runtime.event_log.EventLog`): `{"t", "event",
    "session", "machine", ...value}` — how a proxy in a container hands its
    recording to the backend, which reads it back like a journal."""

    def sink(record: WireRecord) -> None:
        write(record.f, session=record.session, machine=record.machine, **record.value)

    return sink
