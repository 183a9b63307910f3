"""Who owned which session when, by the hub's own events (extra evidence only).

A hub that writes Tetherbed's event log (the reference does) says when it
acknowledged a connection, took a session over, revoked or dropped one. The
wire is the evidence `single_owner` relies on; these intervals add what the
hub admits to (a silent takeover leaves the old owner in place) and draw the
hub lane of the timeline.

- a data-plane `ack` (control false) starts an interval for (session, conn);
- it ends at the first of: a non-silent `takeover` naming it `old`, `revoke`,
  `disconnect`, `shutdown_close` or `pong_timeout` of that conn, or the hub
  process exiting or being killed (its state dies with it);
- a `takeover` with silent=true does NOT end the old interval: the old
  connection was neither told nor closed and still holds the session;
- an interval still open at the end of the history lasts until the end.

Connection ids restart when the hub restarts, so they are scoped by hub
lifetime (one per `started` event of process "hub").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tetherbed.simulator.checkers.evidence.records import (
    END,
    Key,
    fields,
    is_event,
    key,
    ordered,
    text,
)
from tetherbed.simulator.history import History, Record

#: Hub events that end the named connection's ownership.
_HUB_ENDS = ("revoke", "disconnect", "shutdown_close", "pong_timeout")
#: Hub events that show the hub reports its protocol decisions.
_HUB_PROTOCOL = frozenset({"connect", "hello", "ack", "takeover", "disconnect", "refused"})


@dataclass(slots=True)
class OwnerInterval:
    """One connection owning one session from `start` to `end` (None: still)."""

    session: str
    conn: str
    start: Record
    end: Record | None = None
    #: Silent takeovers that named this connection `old` while it still owned.
    silent_takeovers: list[Record] = field(default_factory=list)
    #: The hub lifetime (hub mode) so that restarted conn ids stay distinct.
    epoch: int = 0

    @property
    def start_key(self) -> Key:
        return key(self.start)

    @property
    def end_key(self) -> Key:
        return END if self.end is None else key(self.end)


def has_hub_events(history: History) -> bool:
    return any(r.process == "hub" and is_event(r) and r.f in _HUB_PROTOCOL for r in history)


def owner_intervals(history: History) -> list[OwnerInterval]:
    """The hub's view: who owned which session when."""
    intervals: list[OwnerInterval] = []
    open_by_conn: dict[str, OwnerInterval] = {}
    epoch = 0
    for record in ordered(history):
        if record.process != "hub" or not is_event(record):
            continue
        value = fields(record)
        if record.f == "started":
            epoch += 1
            open_by_conn.clear()
        elif record.f in ("exited", "killed"):
            for interval in open_by_conn.values():
                interval.end = record
            open_by_conn.clear()
        elif record.f == "ack":
            conn = text(value.get("conn"))
            session = record.session or text(value.get("session"))
            if conn is None or session is None or value.get("control") is True:
                continue
            previous = open_by_conn.get(conn)
            if previous is not None:  # a second ack for one conn: treat as one interval
                continue
            interval = OwnerInterval(session, conn, record, epoch=epoch)
            open_by_conn[conn] = interval
            intervals.append(interval)
        elif record.f == "takeover":
            old = open_by_conn.get(text(value.get("old")) or "")
            if old is None:
                continue
            if value.get("silent") is True:
                old.silent_takeovers.append(record)
            else:
                old.end = record
                del open_by_conn[old.conn]
        elif record.f in _HUB_ENDS:
            conn = text(value.get("conn")) or ""
            interval = open_by_conn.pop(conn, None)
            if interval is not None:
                interval.end = record
    return intervals
