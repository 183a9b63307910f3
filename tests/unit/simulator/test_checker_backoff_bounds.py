"""backoff_bounds: delays inside the schedule, honoured, no hot loop."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tetherbed.agent.backoff import Backoff
from tetherbed.simulator.checkers import backoff_bounds
from tetherbed.simulator.history import History


def ev(h: History, t: float, f: str, name: str = "a", **value: object) -> int:
    return h.append(t, f"agent:{name}", "event", f, value, session="s1").index


def drops(h: History, delays: list[float], start: float = 0.0) -> float:
    """attempt → lost → backoff(n) → attempt … with the given delays."""
    t = start
    ev(h, t, "attempt", attempt=1)
    for n, delay in enumerate(delays):
        t += 0.01
        ev(h, t, "lost", code=1006, handshake=False)
        ev(h, t, "backoff", attempt=n, delay=delay)
        t += delay
        ev(h, t, "attempt", attempt=n + 2)
    return t


def test_the_schedule_passes() -> None:
    h = History()
    drops(h, [1.0, 2.5, 4.0, 12.9, 16.0, 32.0, 60.0, 65.0])
    verdict = backoff_bounds.check(h)
    assert verdict.ok, verdict.summary


def test_a_delay_of_0_2_s_at_attempt_3_is_named() -> None:
    h = History()
    drops(h, [1.0, 2.0, 4.0])
    t = h.records[-1].time + 0.01
    ev(h, t, "lost", code=1006, handshake=False)
    bad = ev(h, t, "backoff", attempt=3, delay=0.2)
    ev(h, t + 0.2, "attempt", attempt=5)
    verdict = backoff_bounds.check(h)
    assert not verdict.ok
    assert verdict.evidence_indexes() == [bad]
    assert "0.2 s at attempt 3" in verdict.summary and "[8, 13]" in verdict.summary


def test_the_cap_applies_from_attempt_6() -> None:
    assert Backoff().bounds(6) == (60.0, 65.0)
    h = History()
    drops(h, [1, 2, 4, 8, 16, 32, 66.0])
    assert not backoff_bounds.check(h).ok


def test_reconnecting_before_the_delay_is_over_is_too_early() -> None:
    h = History()
    ev(h, 0, "attempt", attempt=1)
    ev(h, 1, "lost", code=1006, handshake=True)
    backoff = ev(h, 1, "backoff", attempt=0, delay=3.0)
    early = ev(h, 2.0, "attempt", attempt=2)
    verdict = backoff_bounds.check(h)
    assert not verdict.ok and "too early" in verdict.summary
    assert verdict.evidence_indexes() == [backoff, early]
    assert backoff_bounds.check(h, early_tolerance=2.0).ok


def test_reconnecting_long_after_the_delay_is_late_unless_paused() -> None:
    h = History()
    ev(h, 0, "attempt", attempt=1)
    ev(h, 1, "lost", code=1006, handshake=True)
    ev(h, 1, "backoff", attempt=0, delay=1.0)
    ev(h, 9.0, "attempt", attempt=2)
    verdict = backoff_bounds.check(h)
    assert not verdict.ok and "late" in verdict.summary
    paused = History()
    for r in h:
        paused.append(r.time, r.process, r.type, r.f, r.value, session=r.session)
        if r.f == "backoff":
            ev(paused, 1.5, "paused")
            ev(paused, 8.5, "resumed")
    assert backoff_bounds.check(History.merged(paused)).ok


def test_a_pause_fault_also_excuses_lateness() -> None:
    h = History()
    ev(h, 0, "attempt", attempt=1)
    ev(h, 1, "lost", code=1006, handshake=True)
    ev(h, 1, "backoff", attempt=0, delay=1.0)
    h.append(1.2, "fault", "event", "fault_start", {"id": "f1", "kind": "pause", "target": "a"})
    h.append(8.0, "fault", "event", "fault_stop", {"id": "f1", "kind": "pause", "target": "a"})
    ev(h, 8.1, "attempt", attempt=2)
    assert backoff_bounds.check(h).ok


def test_a_reconnect_without_backoff_is_a_hot_loop() -> None:
    h = History()
    ev(h, 0, "attempt", attempt=1)
    lost = ev(h, 1, "lost", code=1000, handshake=True)
    again = ev(h, 1.001, "attempt", attempt=2)
    verdict = backoff_bounds.check(h)
    assert not verdict.ok and "hot loop" in verdict.summary
    assert verdict.evidence_indexes() == [lost, again]


def test_a_restart_begins_a_new_schedule() -> None:
    h = History()
    drops(h, [1.0, 2.0])
    ev(h, 5, "killed")
    ev(h, 6, "started")
    ev(h, 6, "attempt", attempt=1)
    ev(h, 7, "lost", code=1006, handshake=True)
    ev(h, 7, "backoff", attempt=0, delay=1.0)
    ev(h, 8, "attempt", attempt=2)
    assert backoff_bounds.check(h).ok


def test_the_attempt_number_must_grow_and_reset_after_a_healthy_connection() -> None:
    stuck = History()
    drops(stuck, [1.0, 1.0])  # n=0, then n=1 with a delay of 1.0 — out of bounds too
    stuck_verdict = backoff_bounds.check(stuck)
    assert not stuck_verdict.ok
    h = History()
    t = drops(h, [1.0, 2.0])
    ev(h, t + 1, "connected", conn="c9")
    ev(h, t + 21, "lost", code=1006, handshake=True)  # up 20 s: healthy
    ev(h, t + 21, "backoff", attempt=0, delay=1.0)
    ev(h, t + 22, "attempt", attempt=4)
    assert backoff_bounds.check(h).ok
    wrong = History()
    t = drops(wrong, [1.0, 2.0])
    ev(wrong, t + 1, "connected", conn="c9")
    ev(wrong, t + 2, "lost", code=1006, handshake=True)  # up 1 s: not healthy
    bad = ev(wrong, t + 2, "backoff", attempt=0, delay=1.0)
    ev(wrong, t + 3, "attempt", attempt=4)
    verdict = backoff_bounds.check(wrong)
    assert not verdict.ok and bad in verdict.evidence_indexes()
    assert "expected n=2" in verdict.summary
    assert backoff_bounds.check(wrong, check_sequence=False).ok


def test_malformed_backoff_is_reported_not_raised() -> None:
    h = History()
    ev(h, 0, "attempt", attempt=1)
    h.append(1, "agent:a", "event", "backoff", {"attempt": "x"})
    h.append(2, "agent:a", "event", "backoff", None)
    assert not backoff_bounds.check(h).ok


@st.composite
def real_agent(draw: st.DrawFn) -> History:
    """The runtime's loop with the real Backoff and a seeded rng."""
    h = History()
    schedule = Backoff(rng=random.Random(draw(st.integers(0, 2**32))))
    t = 0.0
    for attempts in range(1, draw(st.integers(1, 20)) + 1):
        ev(h, t, "attempt", attempt=attempts)
        up = draw(st.sampled_from([None, 0.5, 3.0, 11.0, 40.0]))
        if up is not None:
            t += 0.05
            ev(h, t, "connected", conn=f"c{attempts}")
            t += up
        t += 0.01
        ev(h, t, "lost", code=1006, handshake=up is not None)
        if up is not None and up >= 10.0:
            schedule.reset()
        n = schedule.attempt
        delay = schedule.next_delay()
        ev(h, t, "backoff", attempt=n, delay=delay)
        t += delay + draw(st.sampled_from([0.0, 0.01, 0.4]))
    return h


@settings(max_examples=100, deadline=None)
@given(real_agent())
def test_the_real_schedule_always_passes(history: History) -> None:
    verdict = backoff_bounds.check(history)
    assert verdict.ok, verdict.summary


@settings(max_examples=60, deadline=None)
@given(real_agent(), st.data())
def test_zeroing_any_delay_fails(history: History, data: st.DataObject) -> None:
    backoffs = history.events("backoff")
    target = data.draw(st.sampled_from(backoffs))
    records = [
        r if r is not target else replace(r, value={**r.value, "delay": 0.0}) for r in history
    ]
    verdict = backoff_bounds.check(History.from_records(records))
    assert not verdict.ok
    assert target.index in verdict.evidence_indexes()
