"""no_reconnect_after_fatal: a fatally closed agent stays away until restarted.

Why: close codes 4426-4429 and SESSION_REVOKED mean "do not come back without
an operator" — a version mismatch that reconnecting cannot fix, a session
another shim took over, a revoked session whose token would just get 401, a
platform going down. An agent that reconnects anyway produces the hot
reconnect storms and takeover ping-pong the spec forbids.

Judged from the wire, per node: once a Close with a code in `fatal_codes`
(default 4426-4429) or a SESSION_REVOKED frame has reached it, every later
connection it opens toward an agent path is a violation — unless its process
was started again in between (a `started` event: the operator's restart).

4429 (and SESSION_REVOKED `platform_shutdown`) has its own reading: the
close-code table says reconnect attempts "SHOULD wait for platform health
probe", so under the default profile `health-probe` a connection after it is
allowed when the hub accepted it (101: the platform was healthy again); one
the hub was not there to answer is the storm the table forbids. Profile
`halts` ("today the shim just halts") forbids any.

Extra evidence: the agent's own `attempt` events (the reference journal) and
the hub's `hello` events from the same machine for the same session (when no
other node shares that machine and session) count as reconnects too; they can
convict, never acquit. One violation per fatal episode; the evidence is the
fatal record and the first reconnect after it, the summary counts the rest.
No fatal close in the history: unknown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from tetherbed.simulator.checkers.evidence.connections import connections, has_wire
from tetherbed.simulator.checkers.evidence.records import (
    fields,
    integer,
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
from tetherbed.wire.codes import FATAL_CLOSE_CODES, CloseCode

NAME = "no_reconnect_after_fatal"
PROFILES = ("health-probe", "halts")
_SHUTDOWN = int(CloseCode.PLATFORM_SHUTDOWN)


@dataclass(frozen=True, slots=True)
class _Fatal:
    record: Record
    code: int | None  # None: SESSION_REVOKED (reason in the record)
    shutdown: bool  # 4429 or SESSION_REVOKED platform_shutdown

    def describe(self) -> str:
        if self.code is not None:
            via = "received" if self.record.process.startswith("wire:") else "reported"
            return f"close {self.code} ({via})"
        reason = text((fields(self.record).get("payload") or {}).get("reason")) or text(
            fields(self.record).get("reason")
        )
        return f"SESSION_REVOKED ({reason})"


@dataclass(frozen=True, slots=True)
class _Attempt:
    record: Record
    succeeded: bool  # the hub accepted it: the platform was healthy
    via: str  # wire, agent journal, hub events


@dataclass(slots=True)
class _Node:
    """One agent process's fatal closes, restarts and reconnects, in time order."""

    items: list[tuple[tuple[float, int], str, object]] = field(default_factory=list)
    machine_sessions: set[tuple[str, str]] = field(default_factory=set)


def check(
    history: History,
    *,
    fatal_codes: Iterable[int] = FATAL_CLOSE_CODES,
    profile: str = "health-probe",
) -> Verdict:
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, not {profile!r}")
    findings = Findings(NAME)
    codes = frozenset(int(c) for c in fatal_codes)
    nodes = _collect(history, codes)
    episodes = 0
    for name in sorted(nodes):
        episodes += _judge(name, nodes[name], profile, findings)
    summary = f"{episodes} fatal close(s), none followed by a reconnect (profile {profile})"
    if not episodes:
        why = "no fatal close happened" if (has_wire(history) or nodes) else "nothing recorded"
        return findings.verdict(summary, no_evidence=why)
    return findings.verdict(summary)


def _collect(history: History, codes: frozenset[int]) -> dict[str, _Node]:
    nodes: dict[str, _Node] = defaultdict(_Node)
    for connection in connections(history):
        node = nodes[connection.node]
        if connection.is_attempt:
            attempt = _Attempt(connection.connect, connection.opened is not None, "wire")
            node.items.append((key(connection.connect), "attempt", attempt))
        fatal = _wire_fatal(connection.closes, connection.revoked, codes)
        if fatal is not None:
            node.items.append((key(fatal.record), "fatal", fatal))
        if connection.session and connection.machine:
            node.machine_sessions.add((connection.machine, connection.session))
    records = ordered(history)
    for index, record in enumerate(records):
        if not (is_agent(record.process) and is_event(record)):
            continue
        name = record.process.split(":", 1)[1]
        node = nodes[name]
        if record.machine and record.session:
            node.machine_sessions.add((record.machine, record.session))
        if record.f == "started":
            node.items.append((key(record), "restart", record))
        elif record.f == "attempt":
            ok = _journal_connected(records, index)
            node.items.append((key(record), "attempt", _Attempt(record, ok, "agent journal")))
        else:
            fatal = _journal_fatal(record, codes)
            if fatal is not None:
                node.items.append((key(record), "fatal", fatal))
    _hub_hellos(records, nodes)
    for node in nodes.values():
        node.items.sort(key=lambda item: item[0])
    return dict(nodes)


def _wire_fatal(
    closes: list[Record], revoked: Record | None, codes: frozenset[int]
) -> _Fatal | None:
    candidates: list[_Fatal] = []
    if revoked is not None:
        reason = (fields(revoked).get("payload") or {}).get("reason")
        candidates.append(_Fatal(revoked, None, reason == "platform_shutdown"))
    for close in closes:
        value = fields(close)
        code = integer(value.get("code"))
        if value.get("dir") == "down" and code in codes:
            candidates.append(_Fatal(close, code, code == _SHUTDOWN))
            break
    return min(candidates, key=lambda f: key(f.record)) if candidates else None


def _journal_fatal(record: Record, codes: frozenset[int]) -> _Fatal | None:
    value = fields(record)
    if record.f == "fatal_close":
        code = integer(value.get("code"))
        return _Fatal(record, code, code == _SHUTDOWN)
    if record.f == "revoked":
        return _Fatal(record, None, value.get("reason") == "platform_shutdown")
    if record.f == "lost":
        code = integer(value.get("code"))
        if code in codes:
            return _Fatal(record, code, code == _SHUTDOWN)
    return None


def _journal_connected(records: list[Record], index: int) -> bool:
    """The agent's attempt at `index` reached `connected` before its next attempt."""
    process = records[index].process
    for record in records[index + 1 :]:
        if record.process != process or not is_event(record):
            continue
        if record.f == "connected":
            return True
        if record.f in ("attempt", "lost", "started", "exited", "killed"):
            return False
    return False


def _hub_hellos(records: list[Record], nodes: dict[str, _Node]) -> None:
    """The hub's HELLOs, attributed to the one node with that machine and session."""
    owners: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name, node in nodes.items():
        for pair in node.machine_sessions:
            owners[pair].append(name)
    for index, record in enumerate(records):
        if record.process != "hub" or not is_event(record, "hello"):
            continue
        machine = record.machine or text(fields(record).get("machine"))
        session = record.session or text(fields(record).get("session"))
        if machine is None or session is None:
            continue
        named = owners.get((machine, session), [])
        if len(named) == 1:
            accepted = _hub_accepted(records, index)
            attempt = _Attempt(record, accepted, "hub events")
            nodes[named[0]].items.append((key(record), "attempt", attempt))


def _hub_accepted(records: list[Record], index: int) -> bool:
    conn = fields(records[index]).get("conn")
    for record in records[index + 1 :]:
        if (
            record.process == "hub"
            and is_event(record, "ack", "refused", "takeover_rejected")
            and fields(record).get("conn") == conn
        ):
            return record.f == "ack"
    return False


def _judge(name: str, node: _Node, profile: str, findings: Findings) -> int:
    episodes = 0
    fatal: _Fatal | None = None
    offending: list[_Attempt] = []

    def close_episode() -> None:
        if fatal is None or not offending:
            return
        on_wire = [a for a in offending if a.via == "wire"]
        first = on_wire[0] if on_wire else offending[0]
        more = f" and {len(offending) - 1} more" if len(offending) > 1 else ""
        why = (
            f"{name} reconnected at {seconds(time_of(first.record))} ({first.via}) after "
            f"{fatal.describe()} at {seconds(time_of(fatal.record))}{more}, without a restart"
        )
        if fatal.shutdown and profile == "health-probe":
            why += "; the hub was not up to accept it (no health probe waited for)"
        findings.add(
            why,
            (fatal.record, "fatal: must not reconnect"),
            (first.record, "reconnect after the fatal close"),
        )

    for _, kind, item in node.items:
        if kind == "restart":
            close_episode()
            fatal, offending = None, []
        elif kind == "fatal" and fatal is None:
            assert isinstance(item, _Fatal)
            fatal = item
            episodes += 1
        elif kind == "attempt" and fatal is not None:
            assert isinstance(item, _Attempt)
            if time_of(item.record) <= time_of(fatal.record):
                continue  # the fatal close's own connection, logged a moment late
            if fatal.shutdown and profile == "health-probe" and item.succeeded:
                continue  # reconnecting once the platform is healthy is allowed
            offending.append(item)
    close_episode()
    return episodes
