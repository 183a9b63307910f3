"""single_owner: at most one connection owns a session at any moment.

Why: two owners is split-brain — two machines executing one conversation's
commands, diverging files and forked audit chains. The spec's policy (first
shim wins; a same-machine reconnect takes over after SESSION_REVOKED; another
machine gets 4427) exists to prevent exactly this, and the v0 "silent
last-write-wins" behaviour it replaced is the classic way to get it.

Owner intervals come from the hub's own events when the history has them:

- a data-plane `ack` (control false) starts an interval for (session, conn);
- it ends at the first of: a non-silent `takeover` naming it `old`, `revoke`,
  `disconnect`, `shutdown_close` or `pong_timeout` of that conn, or the hub
  process exiting or being killed (its state dies with it);
- a `takeover` with silent=true does NOT end the old interval: the old
  connection was neither told nor closed and still holds the session;
- an interval still open at the end of the history lasts until the end.

Connection ids restart when the hub restarts, so they are scoped by hub
lifetime (one per `started` event of process "hub").

Two intervals of one session that overlap (compared by (time, index), so an
interval that ends at the very record before another starts does not overlap
it) are a violation; the evidence is both acks, any silent takeover between
them and the end of the first interval.

Without hub protocol events (a third-party hub), intervals come from the
agents instead: `connected` starts one for (session, agent process), and
`lost`, `revoked`, `stop`, `fatal_close`, `exited` or `killed` ends it; while
the process is paused it cannot act, so the interval is suspended. Agents learn
of a takeover a little after the hub decided it, so an overlap must last longer
than `tolerance` seconds to count.

Options: `source` ("auto", "hub" or "agent"), `tolerance` (agent mode only,
default 0.5 s).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from tetherbed.simulator.checkers.evidence.records import (
    END,
    Key,
    fields,
    is_agent,
    is_event,
    key,
    ordered,
    seconds,
    text,
    time_of,
)
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record

NAME = "single_owner"

#: Hub events that end the named connection's ownership.
_HUB_ENDS = ("revoke", "disconnect", "shutdown_close", "pong_timeout")
#: Hub events that show the hub reports its protocol decisions.
_HUB_PROTOCOL = frozenset({"connect", "hello", "ack", "takeover", "disconnect", "refused"})
#: Agent events (and lifecycle events) that end an agent-side interval.
_AGENT_ENDS = ("lost", "revoked", "stop", "fatal_close", "exited", "killed")


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


def agent_intervals(history: History) -> list[OwnerInterval]:
    """The agents' view: when each agent believed it served its session."""
    intervals: list[OwnerInterval] = []
    current: dict[str, OwnerInterval] = {}
    suspended: dict[str, OwnerInterval] = {}
    for record in ordered(history):
        process = record.process
        if not is_agent(process) or not is_event(record):
            continue
        if record.f == "connected":
            session = record.session
            if session is None:
                continue
            conn = text(fields(record).get("conn")) or process
            interval = OwnerInterval(session, conn, record)
            current[process] = interval
            suspended.pop(process, None)
            intervals.append(interval)
        elif record.f == "paused" and process in current:
            interval = current.pop(process)
            interval.end = record
            suspended[process] = interval
        elif record.f == "resumed" and process in suspended:
            held = suspended.pop(process)
            interval = OwnerInterval(held.session, held.conn, record)
            current[process] = interval
            intervals.append(interval)
        elif record.f in _AGENT_ENDS:
            suspended.pop(process, None)
            interval = current.pop(process, None)
            if interval is not None:
                interval.end = record
    return intervals


def check(
    history: History,
    *,
    source: str = "auto",
    tolerance: float = 0.5,
) -> Verdict:
    findings = Findings(NAME)
    use_hub = source == "hub" or (source == "auto" and has_hub_events(history))
    if use_hub:
        intervals = owner_intervals(history)
        slack = 0.0
        origin = "hub events"
    else:
        intervals = agent_intervals(history)
        slack = max(float(tolerance), 0.0)
        origin = f"agent events, tolerance {slack:g} s"
    last = max((time_of(r) for r in history), default=0.0)
    by_session: dict[str, list[OwnerInterval]] = defaultdict(list)
    for interval in intervals:
        by_session[interval.session].append(interval)
    for session in sorted(by_session):
        _overlaps(
            session,
            intervals=by_session[session],
            findings=findings,
            slack=slack,
            last=last,
            hub_mode=use_hub,
        )
    sessions = len(by_session)
    return findings.verdict(
        f"{len(intervals)} owner intervals over {sessions} session(s), "
        f"never two owners at once ({origin})"
    )


def _overlaps(
    session: str,
    *,
    intervals: list[OwnerInterval],
    findings: Findings,
    slack: float,
    last: float,
    hub_mode: bool,
) -> None:
    active: list[OwnerInterval] = []
    for interval in sorted(intervals, key=lambda i: i.start_key):
        active = [a for a in active if a.end_key > interval.start_key]
        for earlier in active:
            if earlier.conn == interval.conn and not hub_mode:
                continue  # one agent resuming after a pause: not a second owner
            begin = time_of(interval.start)
            finish = min(
                last if earlier.end is None else time_of(earlier.end),
                last if interval.end is None else time_of(interval.end),
            )
            if not hub_mode and finish - begin <= slack:
                continue
            _report(
                session,
                first=earlier,
                second=interval,
                begin=begin,
                finish=finish,
                findings=findings,
            )
        active.append(interval)


def _report(
    session: str,
    *,
    first: OwnerInterval,
    second: OwnerInterval,
    begin: float,
    finish: float,
    findings: Findings,
) -> None:
    silent = [t for t in first.silent_takeovers if text(fields(t).get("new")) == second.conn]
    why = (
        f"session {session}: {first.conn} and {second.conn} both owned it from "
        f"{seconds(begin)} to {seconds(finish)}"
    )
    if silent:
        why += f"; the takeover was silent (last-write-wins), {first.conn} was never closed"
    elif first.end is None:
        why += f"; {first.conn} was never released"
    records: list[tuple[Record | None, str]] = [
        (first.start, f"{first.conn} becomes owner"),
        (second.start, f"{second.conn} becomes owner while {first.conn} still owns"),
    ]
    records += [(t, "silent takeover: the old owner is not closed") for t in silent]
    records.append((first.end, f"{first.conn} stops owning"))
    findings.add(why, *records)
