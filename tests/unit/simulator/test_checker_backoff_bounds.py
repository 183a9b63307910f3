"""backoff_bounds: delays between a lost connection and the next attempt, from the wire."""

from __future__ import annotations

from tests.unit.simulator.wire_histories import Scribe
from tetherbed.simulator.checkers import backoff_bounds
from tetherbed.simulator.history import History, Record
from tetherbed.wire.backoff import BackoffSchedule


def outage(s: Scribe, delays: list[float], *, node: str = "w", start: float = 0.0) -> list[Record]:
    """A served connection is reset; then an attempt after each delay, all failing."""
    link = s.connect(node, start)
    link.end(start + 20.0, "reset")
    attempts, t = [], start + 20.0
    for delay in delays:
        attempts.append(s.unreachable(node, t + delay))
        t = s.last.time
    return attempts


def test_the_spec_schedule_passes_up_to_the_cap() -> None:
    s = Scribe()
    outage(s, [1.0, 2.5, 4.0, 12.9, 16.0, 32.0, 60.0, 65.0])
    verdict = backoff_bounds.check(s.history)
    assert verdict.ok, verdict.summary
    assert verdict.summary.startswith("8 reconnect delay(s)")


def test_the_bounds_come_from_the_spec() -> None:
    bounds = BackoffSchedule().bounds
    assert bounds(0) == (1.0, 6.0)
    assert bounds(5) == (32.0, 37.0)
    assert bounds(6) == bounds(600) == (60.0, 65.0)


def test_a_delay_too_short_for_its_attempt_is_named() -> None:
    s = Scribe()
    attempts = outage(s, [1.0, 2.0, 4.0, 0.2])
    verdict = backoff_bounds.check(s.history)
    assert verdict.failed
    assert set(verdict.evidence_indexes()) >= {attempts[3].index}
    assert "0.201 s" in verdict.summary and "[8, 13]" in verdict.summary


def test_reconnecting_at_once_is_a_hot_loop() -> None:
    s = Scribe()
    outage(s, [0.0])
    verdict = backoff_bounds.check(s.history)
    assert verdict.failed and "hot loop" in verdict.summary


def test_late_is_a_violation_unless_the_agent_was_frozen() -> None:
    s = Scribe()
    outage(s, [1.0, 30.0])
    assert backoff_bounds.check(s.history).failed
    s = Scribe()
    outage(s, [1.0, 30.0])
    s.event(22.0, "agent:w", "paused")
    s.event(45.0, "agent:w", "resumed")
    assert backoff_bounds.check(s.history).ok


def test_a_restart_begins_a_new_schedule() -> None:
    s = Scribe()
    outage(s, [1.0, 2.0, 4.0])
    s.event(40.0, "agent:w", "killed")
    s.event(41.0, "agent:w", "started")
    s.unreachable("w", 41.5)
    s.unreachable("w", 43.0)  # 1.5 s after: attempt 0 again
    assert backoff_bounds.check(s.history).ok


def test_either_reset_rule_is_allowed_but_not_one_that_never_grows() -> None:
    """After a short-lived accepted connection an agent may count from 0 again
    or go on counting; a 1 s delay after five straight failures is neither."""
    s = Scribe()
    outage(s, [1.0, 2.0, 4.0])
    short = s.connect("w", 40.0)
    short.end(41.0, "reset")
    s.unreachable("w", 42.5)  # n = 0 (reset on HELLO_ACK): [1, 6]
    assert backoff_bounds.check(s.history).ok
    s = Scribe()
    outage(s, [1.0, 2.0, 4.0, 8.0, 16.0, 1.0])
    assert backoff_bounds.check(s.history).failed


def test_attempts_counted_from_one_are_allowed() -> None:
    s = Scribe()
    outage(s, [2.5, 4.5, 8.5])
    assert backoff_bounds.check(s.history).ok


def test_a_fatal_close_is_not_a_reconnect_here() -> None:
    s = Scribe()
    link = s.connect("w", 0.0)
    link.closed_by_hub(5.0, 4428)
    s.unreachable("w", 5.01)
    verdict = backoff_bounds.check(s.history)
    assert verdict.unknown


def test_a_delay_the_agent_says_it_chose_outside_the_bounds_convicts() -> None:
    s = Scribe()
    outage(s, [1.0])
    confession = s.event(30.0, "agent:w", "backoff", attempt=6, delay=30.0)
    verdict = backoff_bounds.check(s.history)
    assert verdict.failed and confession.index in verdict.evidence_indexes()


def test_no_reconnect_is_unknown() -> None:
    assert backoff_bounds.check(History()).unknown
    s = Scribe()
    s.connect("w", 0.0)
    assert backoff_bounds.check(s.history).unknown


def test_options_hold_agents_to_their_own_schedule() -> None:
    s = Scribe()
    outage(s, [0.1, 0.2, 0.4])
    assert backoff_bounds.check(s.history).failed
    assert backoff_bounds.check(s.history, base=0.1, jitter=0.0).ok
