"""control_children: children connect only while an activation or restore is in force."""

from __future__ import annotations

from tests.unit.simulator.wire_histories import Link, Scribe
from tetherbed.simulator.checkers import control_children


def control_link(scribe: Scribe, t: float = 0.0) -> Link:
    wire = scribe.attempt("desk", t)
    attempt = scribe.last
    wire.upgrade("/ws/local-executor", t + 0.001)
    wire.response(101, t + 0.002)
    return Link(scribe, wire, attempt)


def start(control: Link, t: float, kind: str, request_id: str, answer: str = "") -> None:
    payload = {"session_id": "s1", "revision": 1}
    control.deliver(t, kind, request_id, payload)
    answer = answer or {"ACTIVATE_SESSION": "SESSION_ACTIVATED"}.get(kind, "SESSION_RESTORED")
    body = {**payload, "allowed_root": "/r", "fingerprint": "f"}
    if answer == "ERROR":
        body = {"code": "SESSION_NOT_ATTACHED", "message": "no"}
    control.answer(t + 0.001, answer, request_id, body)


def detach(control: Link, t: float, request_id: str = "d") -> None:
    control.deliver(t, "DETACH_SESSION", request_id, {"session_id": "s1"})
    control.answer(t + 0.001, "ACK", request_id, {"ok": True})


def test_children_between_activation_idle_stop_restore_and_detach_pass() -> None:
    scribe = Scribe()
    control = control_link(scribe)
    start(control, 1.0, "ACTIVATE_SESSION", "a")
    child = scribe.connect("desk", 1.01, session="s1")
    child.close(7.0, 1000, "up")  # idle stop
    child.end(7.01)
    start(control, 9.0, "RESTORE_SESSION", "r")
    again = scribe.connect("desk", 9.01, session="s1")
    detach(control, 12.0)
    again.close(12.01, 1000, "up")
    again.end(12.02)
    verdict = control_children.check(scribe.history)
    assert verdict.ok, verdict
    assert "2 child connection(s)" in verdict.summary and "2 idle stop(s)" not in verdict.summary


def test_a_child_without_an_activation_fails() -> None:
    scribe = Scribe()
    control = control_link(scribe)
    start(control, 1.0, "ACTIVATE_SESSION", "a", answer="ERROR")
    scribe.connect("desk", 1.01, session="s1")
    verdict = control_children.check(scribe.history)
    assert verdict.failed and "no activation or restore" in verdict.summary


def test_a_child_after_the_detach_fails() -> None:
    scribe = Scribe()
    control = control_link(scribe)
    start(control, 1.0, "ACTIVATE_SESSION", "a")
    first = scribe.connect("desk", 1.01, session="s1")
    detach(control, 2.0)
    first.close(2.01, 1000, "up")
    first.end(2.02)
    scribe.connect("desk", 3.0, session="s1")  # back with nobody asking
    verdict = control_children.check(scribe.history)
    assert verdict.failed


def test_a_child_that_outlives_its_detach_fails() -> None:
    scribe = Scribe()
    control = control_link(scribe)
    start(control, 1.0, "ACTIVATE_SESSION", "a")
    scribe.connect("desk", 1.01, session="s1")
    detach(control, 2.0)
    verdict = control_children.check(scribe.history)
    assert verdict.failed and "kept its connection" in str(verdict.evidence) + verdict.summary


def test_no_control_link_is_unknown() -> None:
    scribe = Scribe()
    scribe.connect("laptop", 0.0, session="s1")
    assert control_children.check(scribe.history).unknown
