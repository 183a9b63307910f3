"""revocation_holds, on hand-written wire histories: judged from the wire and the
test bed's own revoke step, with the records that show a violation as evidence."""

from __future__ import annotations

from tests.unit.simulator.wire_histories import Scribe
from tetherbed.simulator.checkers import revocation


def _revoked_then_back(*, admitted: bool) -> Scribe:
    scribe = Scribe()
    first = scribe.connect("laptop", 0.0)
    scribe.event(5.0, "runner", "step", name="revoke", detail="s")
    first.revoke(5.001, reason="user_revoked")
    first.closed_by_hub(5.002, 4428)
    # The operator restarts the agent; the hub admits it (or refuses it).
    again = scribe.connect("laptop", 9.0, accepted=admitted)
    if admitted:
        again.deliver(9.5, "FILE_READ", "h9", {"path": "a"})
    return scribe


def test_a_revoked_session_that_admits_an_agent_fails_naming_both_records() -> None:
    scribe = _revoked_then_back(admitted=True)
    verdict = revocation.check(scribe.history)
    assert verdict.failed, verdict.summary
    assert "session s was revoked at 5.000 s" in verdict.summary
    roles = {(e["process"], e["f"], e["role"]) for e in verdict.evidence}
    assert ("runner", "step", "the revocation") in roles
    assert ("wire:laptop", "frame", "after the revocation") in roles
    blamed = next(e for e in verdict.evidence if e["role"] == "after the revocation")
    assert blamed["value"]["type"] == "HELLO_ACK"


def test_a_refused_reconnect_passes() -> None:
    scribe = _revoked_then_back(admitted=False)
    verdict = revocation.check(scribe.history)
    assert verdict.ok, verdict.summary


def test_the_wire_alone_shows_a_revocation() -> None:
    """No runner step (another tool revoked it): SESSION_REVOKED user_revoked counts."""
    scribe = Scribe()
    first = scribe.connect("laptop", 0.0)
    first.revoke(3.0, reason="user_revoked")
    first.closed_by_hub(3.001, 4428)
    scribe.connect("laptop", 8.0)
    verdict = revocation.check(scribe.history)
    assert verdict.failed and "revoked at 3.000 s" in verdict.summary


def test_a_takeover_is_not_a_revocation_and_no_revocation_is_unknown() -> None:
    scribe = Scribe()
    first = scribe.connect("laptop", 0.0)
    first.revoke(3.0)  # another_shim_connected
    first.closed_by_hub(3.001, 4427)
    scribe.connect("laptop-2", 3.5)
    verdict = revocation.check(scribe.history)
    assert verdict.unknown and "no session was revoked" in verdict.summary
