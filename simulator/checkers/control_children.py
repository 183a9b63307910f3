"""control_children: a session's child agent runs only while the platform wants it.

Why: in control mode the machine's agent starts a child per session when the
platform activates or restores it, and must stop it when the platform
detaches it. A child that connects for a session nobody activated serves a
folder nobody chose; one that keeps serving after DETACH_SESSION, or comes
back after it, serves a chat the user closed.

From the wire only: on each node's recorded link, the control connection's
ACTIVATE_SESSION / RESTORE_SESSION / DETACH_SESSION requests and their
answers (`session_id` as the recorder keeps it), and the upgrades of the
children's data connections (`/ws/local-executor/{session}`) on a link that
carries a control connection (elsewhere a data connection is an agent serving
its session directly). For each session:

- a child connection that opens while no activation or restore of the
  session is in force is a violation: in force means requested (the child
  may connect before the answer is written) and answered with
  SESSION_ACTIVATED / SESSION_RESTORED, until a DETACH_SESSION of it;
- a child connection of the session still open when the ACK of its detach
  went up must end (Close or end of TCP) before the history does;
- the idle stops (a child closing its own connection with 1000, no detach)
  are counted, not judged: a child may idle out and come back on a restore.

No control connection that activated or restored a session: unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tetherbed.simulator.checkers.evidence.records import fields, is_event, ordered, text
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record
from tetherbed.simulator.wiretap import records as wire
from tetherbed.wire.endpoints import CONTROL_PATH, session_of_path

NAME = "control_children"

_STARTS = {"ACTIVATE_SESSION": "SESSION_ACTIVATED", "RESTORE_SESSION": "SESSION_RESTORED"}


@dataclass(slots=True)
class _Window:
    """One activation or restore of a session, from its request on."""

    request: Record
    answer: Record | None = None
    failed: Record | None = None
    detached: Record | None = None


@dataclass(slots=True)
class _Session:
    windows: list[_Window] = field(default_factory=list)
    children: list[tuple[Record, _Window | None]] = field(default_factory=list)
    open_children: dict[str, Record] = field(default_factory=dict)  # conn -> upgrade


def check(history: History) -> Verdict:
    findings = Findings(NAME)
    sessions: dict[tuple[str, str], _Session] = {}
    control_conns: set[tuple[str, str]] = set()
    pending: dict[tuple[str, str, object], tuple[str, str, Record]] = {}
    detaching: list[tuple[str, str, Record]] = []  # (node, session, ack) awaiting child ends
    idle_stops = 0
    for record in ordered(history):
        node = wire.node_of(record.process)
        if node is None or not is_event(record):
            continue
        value = fields(record)
        conn = str(value.get("conn"))
        if record.f == wire.UPGRADE:
            path = text(value.get("path")) or ""
            if path.rstrip("/") == CONTROL_PATH:
                control_conns.add((node, conn))
                continue
            session = session_of_path(path)
            if session is None or not any(n == node for n, _ in control_conns):
                continue  # an agent serving its session directly, not a child
            state = sessions.setdefault((node, session), _Session())
            window = _in_force(state)
            state.children.append((record, window))
            state.open_children[conn] = record
        elif record.f in (wire.CLOSE, wire.END):
            for (where, _), state in sessions.items():
                if where == node and conn in state.open_children:
                    closed_by_child = record.f == wire.CLOSE and value.get("by") == "node"
                    if closed_by_child and value.get("code") == 1000 and not _detached(state):
                        idle_stops += 1
                    if record.f == wire.END or value.get("by") == "node":
                        state.open_children.pop(conn, None)
        elif record.f == wire.FRAME and (node, conn) in control_conns:
            kind = text(value.get("type")) or ""
            direction = value.get("dir")
            session = text(value.get("session_id"))
            key = (node, conn, value.get("id"))
            if direction == wire.DOWN and session and kind in (*_STARTS, "DETACH_SESSION"):
                pending[key] = (kind, session, record)
                if kind in _STARTS:
                    sessions.setdefault((node, session), _Session()).windows.append(_Window(record))
            elif direction == wire.UP and key in pending:
                asked, session, _ = pending.pop(key)
                state = sessions.setdefault((node, session), _Session())
                if asked in _STARTS:
                    window = next(w for w in reversed(state.windows) if w.answer is None)
                    if kind == _STARTS[asked]:
                        window.answer = record
                    else:
                        window.failed = record
                elif kind == "ACK":  # the detach held: every window of it closes
                    for window in state.windows:
                        window.detached = window.detached or record
                    detaching.append((node, session, record))
    started = 0
    for (node, session), state in sessions.items():
        for upgrade, window in state.children:
            if window is None or window.failed is not None:
                why = (
                    "no activation or restore of it was in force"
                    if window is None
                    else "its activation failed"
                )
                findings.add(
                    f"a child of {node} connected for session {session} while {why}",
                    (upgrade, "the child's upgrade"),
                    *(((window.failed, "the refusal"),) if window and window.failed else ()),
                )
        started += sum(1 for w in state.windows if w.answer is not None)
    for node, session, ack in detaching:
        state = sessions[(node, session)]
        for upgrade in state.open_children.values():
            if upgrade.index < ack.index:
                findings.add(
                    f"session {session}'s child on {node} kept its connection after the "
                    "detach was acknowledged, to the end of the history",
                    (ack, "the detach's ACK"),
                    (upgrade, "the child's upgrade"),
                )
    children = sum(len(s.children) for s in sessions.values())
    return findings.verdict(
        f"{children} child connection(s) over {len(sessions)} session(s), each while an "
        f"activation or restore was in force ({started} answered, {idle_stops} idle stop(s))",
        no_evidence=None if started else "no activation or restore answered on a control link",
    )


def _in_force(state: _Session) -> _Window | None:
    """The latest activation or restore of the session not undone by a detach."""
    for window in reversed(state.windows):
        if window.detached is None and window.failed is None:
            return window
    return None


def _detached(state: _Session) -> bool:
    return bool(state.windows) and all(w.detached is not None for w in state.windows)
