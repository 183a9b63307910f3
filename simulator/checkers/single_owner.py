"""single_owner: at most one connection serves a session at any moment.

Why: two owners is split-brain — two machines executing one conversation's
commands, diverging files and forked audit chains. The spec's policy (first
shim wins; a same-machine reconnect takes over after SESSION_REVOKED; another
machine gets 4427) exists to prevent exactly this, and the v0 "silent
last-write-wins" behaviour it replaced is the classic way to get it.

Judged from the wire, whatever the hub says about itself. Each agent data
connection (the session from its upgrade path or HELLO_ACK) carries request
traffic from the first request that reached the node until the last request
it was working on ended: a request ends with the node's answer or, unanswered,
when the connection was released (SESSION_REVOKED or a Close in either
direction, or its end), when the node's process was frozen, or at the end of
the run — never at the last record the node happened to write. Two
connections of one session whose traffic intervals overlap by more than
`tolerance` seconds (default 0) are a violation; the evidence is a request of
each that was in progress at the same time.

Extra evidence: a hub that writes Tetherbed's event log admits to overlapping
owners itself (a silent takeover keeps the old owner, `evidence/
hub_ownership.py`); such an admission counts as a violation for sessions the
wire did not already convict. It can never make a verdict pass.

No recorded agent link, or no request that reached any agent: unknown.
Option `source`: "auto" (the wire plus the hub's events), "wire" or "hub".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tetherbed.simulator.checkers.evidence.connections import (
    Connection,
    Request,
    connections,
    has_wire,
)
from tetherbed.simulator.checkers.evidence.hub_ownership import (
    OwnerInterval,
    has_hub_events,
    owner_intervals,
)
from tetherbed.simulator.checkers.evidence.lifecycle import Period, pauses
from tetherbed.simulator.checkers.evidence.records import (
    fields,
    seconds,
    text,
    time_of,
)
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record

NAME = "single_owner"

__all__ = ["NAME", "OwnerInterval", "Traffic", "check", "owner_intervals", "traffic"]


@dataclass(frozen=True, slots=True)
class Span:
    """One request a node worked on, from its arrival to its end."""

    request: Request
    start: float
    end: float
    #: The record that ended it: the answer, the release, the pause, or None (run end).
    until: Record | None


@dataclass(frozen=True, slots=True)
class Traffic:
    """The request traffic one connection carried for one session."""

    connection: Connection
    session: str
    spans: tuple[Span, ...]

    @property
    def start(self) -> float:
        return min(s.start for s in self.spans)

    @property
    def end(self) -> float:
        return max(s.end for s in self.spans)


def traffic(history: History) -> list[Traffic]:
    """Every agent data connection that carried requests, with its spans."""
    run_end = max((time_of(r) for r in history), default=0.0)
    frozen = pauses(history)
    found: list[Traffic] = []
    for connection in connections(history):
        session = connection.session
        if session is None or connection.is_control or not connection.requests:
            continue
        periods = frozen.get(f"agent:{connection.node}", [])
        spans = tuple(_span(r, connection, periods, run_end) for r in connection.requests)
        found.append(Traffic(connection, session, spans))
    return found


def _span(request: Request, connection: Connection, frozen: list[Period], run_end: float) -> Span:
    start = time_of(request.frame)
    if request.answer is not None:
        return Span(request, start, time_of(request.answer), request.answer)
    ends: list[tuple[float, Record | None]] = [(run_end, None)]
    released = connection.released
    if released is not None and time_of(released) >= start:
        ends.append((time_of(released), released))
    for period in frozen:
        if time_of(period.start) >= start:
            ends.append((time_of(period.start), period.start))
    end, until = min(ends, key=lambda item: item[0])
    return Span(request, start, end, until)


def check(history: History, *, tolerance: float = 0.0, source: str = "auto") -> Verdict:
    findings = Findings(NAME)
    slack = max(float(tolerance), 0.0)
    use_wire = source in ("auto", "wire")
    use_hub = source in ("auto", "hub") and has_hub_events(history)
    convicted: set[str] = set()
    carried: list[Traffic] = traffic(history) if use_wire else []
    by_session: dict[str, list[Traffic]] = defaultdict(list)
    for item in carried:
        by_session[item.session].append(item)
    for session in sorted(by_session):
        if _wire_overlaps(session, by_session[session], slack, findings):
            convicted.add(session)
    admitted = 0
    if use_hub:
        admitted = _hub_overlaps(history, convicted, findings)
    wired = use_wire and has_wire(history)
    summary = (
        f"{len(carried)} connection(s) carried requests for {len(by_session)} session(s), "
        "never two at once (wire)"
    )
    if use_hub:
        summary += "; the hub's own events agree"
    if not carried and not admitted:
        why = (
            "no agent link was recorded"
            if not wired and not use_hub
            else "no request reached any agent connection"
        )
        return findings.verdict(summary, no_evidence=why)
    if not wired and use_wire:
        findings.undecided("only the hub's own events: no wire recording of agent links")
    return findings.verdict(summary)


def _wire_overlaps(session: str, carried: list[Traffic], slack: float, findings: Findings) -> bool:
    found = False
    ordered_ = sorted(carried, key=lambda t: (t.start, t.connection.connect.index))
    for i, first in enumerate(ordered_):
        for second in ordered_[i + 1 :]:
            if second.connection is first.connection:
                continue
            begin = max(first.start, second.start)
            finish = min(first.end, second.end)
            if finish - begin <= slack and not _inside(begin, finish, first, second, slack):
                continue
            found = True
            _report(session, first, second, begin=begin, finish=finish, findings=findings)
    return found


def _inside(begin: float, finish: float, first: Traffic, second: Traffic, slack: float) -> bool:
    """A request answered at once (zero length) while the other connection was
    in the middle of one: they overlap though the intersection has no length."""
    if slack > 0 or finish < begin:
        return False
    return any(t.start < begin < t.end for t in (first, second))


def _busy(traffic_: Traffic, begin: float, finish: float) -> Span:
    """A span of `traffic_` in progress during [begin, finish] (else its nearest)."""
    for span in traffic_.spans:
        if span.start < finish and span.end > begin:
            return span
    return min(traffic_.spans, key=lambda s: abs(s.start - begin))


def _report(
    session: str,
    first: Traffic,
    second: Traffic,
    *,
    begin: float,
    finish: float,
    findings: Findings,
) -> None:
    a, b = first.connection, second.connection
    span_a, span_b = _busy(first, begin, finish), _busy(second, begin, finish)
    why = (
        f"session {session}: {a.conn} and {b.conn} both carried its requests from "
        f"{seconds(begin)} to {seconds(finish)} "
        f"({span_a.request.kind} {span_a.request.id} on {a.conn}, "
        f"{span_b.request.kind} {span_b.request.id} on {b.conn})"
    )
    if a.released is None or time_of(a.released) > finish:
        why += f"; {a.conn} was never released"
    records: list[tuple[Record | None, str]] = [
        (a.hello_ack, f"{a.conn} accepted for the session"),
        (span_a.request.frame, f"a request reaches {a.conn}"),
        (span_a.until, f"that request's end on {a.conn}"),
        (b.hello_ack, f"{b.conn} accepted while {a.conn} still carried requests"),
        (span_b.request.frame, f"a request reaches {b.conn} at the same time"),
        (span_b.until, f"that request's end on {b.conn}"),
    ]
    findings.add(why, *records)


def _hub_overlaps(history: History, convicted: set[str], findings: Findings) -> int:
    """Overlapping owners by the hub's own account; the sessions not yet convicted."""
    last = max((time_of(r) for r in history), default=0.0)
    by_session: dict[str, list[OwnerInterval]] = defaultdict(list)
    for interval in owner_intervals(history):
        by_session[interval.session].append(interval)
    admitted = 0
    for session in sorted(set(by_session) - convicted):
        active: list[OwnerInterval] = []
        for interval in sorted(by_session[session], key=lambda i: i.start_key):
            active = [a for a in active if a.end_key > interval.start_key]
            for earlier in active:
                admitted += 1
                finish = min(
                    last if earlier.end is None else time_of(earlier.end),
                    last if interval.end is None else time_of(interval.end),
                )
                _report_admitted(session, earlier, interval, finish, findings)
            active.append(interval)
    return admitted


def _report_admitted(
    session: str, first: OwnerInterval, second: OwnerInterval, finish: float, findings: Findings
) -> None:
    silent = [t for t in first.silent_takeovers if text(fields(t).get("new")) == second.conn]
    why = (
        f"session {session}: by the hub's own events {first.conn} and {second.conn} both "
        f"owned it from {seconds(time_of(second.start))} to {seconds(finish)}"
    )
    if silent:
        why += f"; the takeover was silent (last-write-wins), {first.conn} was never closed"
    records: list[tuple[Record | None, str]] = [
        (first.start, f"hub: {first.conn} becomes owner"),
        (second.start, f"hub: {second.conn} becomes owner while {first.conn} still owns"),
    ]
    records += [(t, "hub: silent takeover, the old owner is not closed") for t in silent]
    records.append((first.end, f"hub: {first.conn} stops owning"))
    findings.add(why, *records)
