"""no_reconnect_after_fatal: no attempt after 4426-4429 / revocation without a restart."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tetherbed.simulator.checkers import reconnect_after_fatal as no_reconnect_after_fatal
from tetherbed.simulator.history import History, Record


def ev(h: History, t: float, f: str, name: str = "a", **value: object) -> int:
    return h.append(t, f"agent:{name}", "event", f, value, session="s1").index


def test_ordinary_reconnects_pass() -> None:
    h = History()
    ev(h, 0, "attempt", attempt=1)
    ev(h, 1, "lost", code=1006, handshake=True)
    ev(h, 1, "backoff", attempt=0, delay=1.5)
    ev(h, 2.5, "attempt", attempt=2)
    assert no_reconnect_after_fatal.check(h).ok


def test_an_attempt_after_4427_names_the_close_and_the_attempt() -> None:
    h = History()
    ev(h, 0, "attempt", attempt=1)
    fatal = ev(h, 1, "fatal_close", code=4427)
    ev(h, 1, "lost", code=4427, handshake=True)
    ev(h, 1, "backoff", attempt=0, delay=1.2)
    again = ev(h, 2.2, "attempt", attempt=2)
    ev(h, 3.2, "attempt", attempt=3)
    verdict = no_reconnect_after_fatal.check(h)
    assert not verdict.ok
    assert verdict.evidence_indexes() == [fatal, again]
    assert "4427" in verdict.summary and "1 more attempt" in verdict.summary


def test_every_fatal_signal_counts() -> None:
    signals = [
        ("revoked", {"reason": "user_revoked", "new_machine": None}),
        ("lost", {"code": 4426, "handshake": True}),
        ("stop", {"exit_code": 28, "reason": "revoked"}),
        ("stop", {"exit_code": 29, "reason": "shutdown"}),
    ]
    for f, value in signals:
        h = History()
        ev(h, 0, "attempt", attempt=1)
        ev(h, 1, f, **value)
        ev(h, 5, "attempt", attempt=2)
        assert not no_reconnect_after_fatal.check(h).ok, f
    h = History()
    ev(h, 0, "attempt", attempt=1)
    ev(h, 1, "stop", exit_code=0, reason="idle")
    ev(h, 5, "attempt", attempt=2)
    assert no_reconnect_after_fatal.check(h).ok


def test_a_runner_restart_allows_connecting_again() -> None:
    h = History()
    ev(h, 0, "attempt", attempt=1)
    ev(h, 1, "fatal_close", code=4429)
    ev(h, 1, "stop", exit_code=29, reason="shutdown")
    ev(h, 1.1, "exited", code=29)
    ev(h, 10, "started")
    ev(h, 10, "attempt", attempt=1)
    assert no_reconnect_after_fatal.check(h).ok


def test_agents_are_judged_separately() -> None:
    h = History()
    ev(h, 1, "fatal_close", name="a", code=4427)
    ev(h, 2, "attempt", name="b", attempt=5)
    assert no_reconnect_after_fatal.check(h).ok


def test_custom_codes_and_odd_values() -> None:
    h = History()
    ev(h, 1, "lost", code=4000)
    ev(h, 2, "attempt", attempt=2)
    ev(h, 3, "lost", code="garbage")
    assert no_reconnect_after_fatal.check(h).ok
    assert not no_reconnect_after_fatal.check(h, fatal_codes=[4000]).ok


@st.composite
def obedient_agent(draw: st.DrawFn) -> History:
    """An agent that reconnects after ordinary drops and stops after fatal ones."""
    h = History()
    t, attempts, stopped = 0.0, 0, False
    for _ in range(draw(st.integers(0, 25))):
        t += 1
        if stopped:
            if draw(st.booleans()):
                ev(h, t, "started")
                stopped = False
            continue
        attempts += 1
        ev(h, t, "attempt", attempt=attempts)
        code = draw(st.sampled_from([1000, 1006, 1011, 4426, 4427, 4428, 4429]))
        if code >= 4426:
            ev(h, t, "fatal_close", code=code)
            ev(h, t, "lost", code=code, handshake=True)
            ev(h, t, "stop", exit_code=code - 4400, reason="fatal")
            stopped = True
        else:
            ev(h, t, "lost", code=code, handshake=True)
            ev(h, t, "backoff", attempt=0, delay=1.0)
    return h


@settings(max_examples=100, deadline=None)
@given(obedient_agent())
def test_obedient_agents_pass(history: History) -> None:
    assert no_reconnect_after_fatal.check(history).ok


@settings(max_examples=60, deadline=None)
@given(obedient_agent())
def test_reconnecting_right_after_any_fatal_close_fails(history: History) -> None:
    fatal = history.events("fatal_close")
    if not fatal:
        return
    records = list(history)
    cut = fatal[0].index + 1
    attempt = Record(cut, fatal[0].time, "agent:a", "event", "attempt", {})
    shifted = [*records[:cut], attempt, *records[cut:]]
    verdict = no_reconnect_after_fatal.check(History.merged(shifted))
    assert not verdict.ok
