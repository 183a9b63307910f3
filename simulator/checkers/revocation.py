"""revocation_holds: a revoked session admits no agent and reaches none again.

Why: revoking a session is how a user takes a machine away from a platform
(a stolen laptop, a leaked token). The spec closes the agent with
SESSION_REVOKED and 4428 and says a reconnect "would just 401"; a hub that
admits the next connection anyway hands the session straight back.

When a session was revoked: the moment the test bed's own `revoke` step ran
(the runner's record of the action it took, not anything the system under
test says), or the first SESSION_REVOKED `user_revoked` frame that reached an
agent of that session on the wire, whichever came first. After it, from the
wire: a HELLO_ACK reaching an agent connection of that session, or a request
reaching one, is a violation. The evidence is the revocation and the frame.

No revocation in the history: unknown.
"""

from __future__ import annotations

from tetherbed.simulator.checkers.evidence.connections import REQUEST_TYPES, connections
from tetherbed.simulator.checkers.evidence.records import fields, seconds, text, time_of
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record
from tetherbed.simulator.wiretap import records as wire

NAME = "revocation_holds"
#: SESSION_REVOKED reasons that revoke the session itself (not a takeover).
_USER_REASONS = frozenset({"user_revoked"})


def revocations(history: History) -> dict[str, Record]:
    """Session → the first record that shows it revoked."""
    found: dict[str, Record] = {}

    def note(session: str | None, record: Record) -> None:
        if session and (session not in found or time_of(record) < time_of(found[session])):
            found[session] = record

    for record in history:
        if record.process == "runner" and record.type == "event" and record.f == "step":
            value = fields(record)
            if value.get("name") == "revoke":
                note(text(value.get("detail")), record)
    for connection in connections(history):
        for frame in connection.frames:
            value = fields(frame)
            if value.get("type") != "SESSION_REVOKED" or value.get("dir") != wire.DOWN:
                continue
            payload = value.get("payload")
            reason = payload.get("reason") if isinstance(payload, dict) else None
            if reason in _USER_REASONS:
                note(connection.session, frame)
    return found


def check(history: History) -> Verdict:
    findings = Findings(NAME)
    revoked = revocations(history)
    if not revoked:
        return findings.verdict("", no_evidence="no session was revoked")
    watched = 0
    for connection in connections(history):
        session = connection.session
        if session not in revoked or connection.is_control:
            continue
        since = revoked[session]
        watched += 1
        for frame in connection.frames:
            value = fields(frame)
            if value.get("dir") != wire.DOWN or time_of(frame) <= time_of(since):
                continue
            kind = value.get("type")
            if kind == "HELLO_ACK":
                what = "admitted"
            elif kind in REQUEST_TYPES:
                what = f"sent {kind}"
            else:
                continue
            findings.add(
                f"session {session} was revoked at {seconds(time_of(since))}, yet "
                f"{connection.conn} was {what} at {seconds(time_of(frame))}",
                (since, "the revocation"),
                (frame, "after the revocation"),
            )
            break
    return findings.verdict(
        f"{len(revoked)} revoked session(s); none admitted an agent or reached one after "
        f"({watched} connection(s) of them on the wire)"
    )
