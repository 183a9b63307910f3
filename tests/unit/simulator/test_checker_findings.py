"""The six hand-written histories the old checkers judged wrong, each judged right.

Each is what a system under test did, as the recorder writes it, with the
misleading journal entries the old checkers believed. Every failing verdict
must name the records that show the fault, not only fail.
"""

from __future__ import annotations

import importlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.simulator.wire_histories import Scribe
from tetherbed.simulator.checkers import (
    backoff_bounds,
    double_execution,
    reconnect_after_fatal,
    single_owner,
)
from tetherbed.simulator.checkers.verdict import Verdict
from tetherbed.simulator.history import Record


def blamed(verdict: Verdict) -> set[int]:
    return set(verdict.evidence_indexes())


def test_1_a_hub_that_says_it_took_over_but_never_closed_the_old_owner_fails() -> None:
    """The hub logs `takeover {silent: false}`; on the wire the old connection is
    never closed and both agents keep executing for 25 s."""
    s = Scribe()
    s.event(0.0, "hub", "started")
    a = s.connect("laptop-a", 0.1, "chat", "laptop-1")
    s.event(0.11, "hub", "ack", session="chat", conn="c1")
    b = s.connect("laptop-b", 5.0, "chat", "laptop-1")
    s.event(5.01, "hub", "ack", session="chat", conn="c2")
    s.event(5.01, "hub", "takeover", session="chat", old="c1", new="c2", silent=False)
    for n in range(25):
        t = 6.0 + n
        a.deliver(t, "EXECUTE_COMMAND", f"a{n}", {"command": f"step {n}"})
        a.answer(t + 0.5, "COMMAND_RESULT", f"a{n}", {"stdout": "", "exit_code": 0})
        b.deliver(t + 0.1, "EXECUTE_COMMAND", f"b{n}", {"command": f"step {n}"})
        b.answer(t + 0.6, "COMMAND_RESULT", f"b{n}", {"stdout": "", "exit_code": 0})
    first_a = next(f for f in a.scribe.history if f.value.get("id") == "a0")
    first_b = next(f for f in b.scribe.history if f.value.get("id") == "b0")
    verdict = single_owner.check(s.history)
    assert verdict.failed
    assert "laptop-a#1 and laptop-b#1 both carried its requests" in verdict.summary
    assert "never released" in verdict.summary
    assert {first_a.index, first_b.index} <= blamed(verdict)


def test_2_two_machines_executing_with_a_short_tail_fail_to_the_end_of_the_run() -> None:
    """Both connected and both executing; the history ends 0.4 s later."""
    s = Scribe()
    a = s.connect("laptop-a", 0.0, "chat")
    s.event(0.01, "agent:laptop-a", "connected", session="chat")
    b = s.connect("laptop-b", 10.0, "chat")
    s.event(10.01, "agent:laptop-b", "connected", session="chat")
    on_a = a.deliver(10.0, "EXECUTE_COMMAND", "h1", {"command": "make"})
    on_b = b.deliver(10.0, "EXECUTE_COMMAND", "h2", {"command": "make install"})
    s.event(10.4, "runner", "note", text="the run ends")
    verdict = single_owner.check(s.history)
    assert verdict.failed, verdict.summary
    assert "from 10.000 s to 10.400 s" in verdict.summary
    assert {on_a.index, on_b.index} <= blamed(verdict)


def test_3_a_reissue_with_a_retry_counter_is_a_second_execution() -> None:
    """The hub re-sends `git push` after a reconnect with a retry counter in the
    payload; the agent runs it twice. Matched by the client's request, not by
    the payload's digest."""
    s = Scribe()
    request = {"command": "git push"}
    invoke = s.invoke(0.0, "alice", "push", "EXECUTE_COMMAND", request)
    first = s.connect("w", 0.0)
    first_run = first.deliver(0.1, "EXECUTE_COMMAND", "h1", request)
    first.end(1.0, "reset")
    second = s.connect("w", 2.0)
    retried = {"command": "git push", "retry": 1}
    second_run = second.deliver(2.1, "EXECUTE_COMMAND", "h7", retried)
    result = {"stdout": "pushed", "exit_code": 0, "duration_seconds": 0.8}
    second.answer(2.9, "COMMAND_RESULT", "h7", result)
    s.complete(2.95, "alice", "push", "EXECUTE_COMMAND", "COMMAND_RESULT", payload=result)
    verdict = double_execution.check(s.history)
    assert verdict.failed, verdict.summary
    assert "reached the agent 2 times" in verdict.summary
    assert {invoke.index, first_run.index, second_run.index} <= blamed(verdict)


def test_3b_a_hub_that_rewrites_beyond_recognition_is_unknown_never_a_pass() -> None:
    s = Scribe()
    s.invoke(0.0, "alice", "push", "EXECUTE_COMMAND", {"command": "git push"})
    link = s.connect("w", 0.0)
    stranger = link.deliver(0.1, "EXECUTE_COMMAND", "x-9", {"cmd": "git push", "n": 2})
    verdict = double_execution.check(s.history)
    assert verdict.unknown, verdict.summary
    assert blamed(verdict) == {stranger.index}


def test_4_reconnects_the_hub_logged_after_4427_fail_though_the_agent_logs_none() -> None:
    """After 4427 the hub logs two more upgrades and HELLOs from the refused machine."""
    s = Scribe()
    s.connect("laptop-a", 0.0, "chat", "laptop-a")
    b = s.connect("laptop-b", 1.0, "chat", "laptop-b", accepted=False)
    s.event(1.0, "agent:laptop-b", "attempt", session="chat", attempt=1)
    fatal = b.closed_by_hub(1.01, 4427)
    for t in (4.0, 9.0):
        s.history.append(t, "hub", "event", "connect", {"conn": f"c{t}"}, session="chat")
        s.history.append(
            t + 0.01, "hub", "event", "hello", {"conn": f"c{t}"}, session="chat", machine="laptop-b"
        )
    first_hello = s.history.records[-3]
    verdict = reconnect_after_fatal.check(s.history)
    assert verdict.failed, verdict.summary
    assert "hub events" in verdict.summary and "close 4427" in verdict.summary
    assert blamed(verdict) == {fatal.index, first_hello.index}


def test_4b_the_same_reconnects_on_the_wire_fail_with_the_wire_records() -> None:
    s = Scribe()
    b = s.connect("laptop-b", 1.0, "chat", "laptop-b", accepted=False)
    fatal = b.closed_by_hub(1.01, 4427)
    again = s.connect("laptop-b", 4.0, "chat", "laptop-b", accepted=False)
    verdict = reconnect_after_fatal.check(s.history)
    assert verdict.failed
    assert blamed(verdict) == {fatal.index, again.attempt.index}


def _shutdown_then(s: Scribe, *, reconnect_at: float, hub_back_at: float | None) -> Record:
    link = s.connect("one", 0.0, "s1", "m1")
    s.event(0.0, "hub", "started")
    fatal = link.closed_by_hub(10.0, 4429)
    s.event(10.1, "hub", "exited", code=0)
    if hub_back_at is not None:
        s.event(hub_back_at, "hub", "started")
    if hub_back_at is not None and reconnect_at >= hub_back_at:
        s.connect("one", reconnect_at, "s1", "m1")
    else:
        s.unreachable("one", reconnect_at, "s1")
    return fatal


def test_5_reconnecting_after_4429_once_the_hub_is_healthy_passes() -> None:
    s = Scribe()
    _shutdown_then(s, reconnect_at=45.0, hub_back_at=40.0)
    verdict = reconnect_after_fatal.check(s.history)
    assert verdict.ok, verdict.summary
    halts = reconnect_after_fatal.check(s.history, profile="halts")
    assert halts.failed and "profile halts" not in halts.summary


def test_5b_hammering_a_hub_that_is_down_after_4429_fails() -> None:
    s = Scribe()
    fatal = _shutdown_then(s, reconnect_at=12.0, hub_back_at=None)
    verdict = reconnect_after_fatal.check(s.history)
    assert verdict.failed and "no health probe" in verdict.summary
    assert fatal.index in blamed(verdict)


def _outage(s: Scribe, delays: list[float]) -> list[Record]:
    """A served connection drops; then failed attempts after each delay."""
    link = s.connect("w", 0.0)
    lost = link.end(20.0, "reset")
    attempts, t = [], lost.time
    for delay in delays:
        attempts.append(s.unreachable("w", t + delay))
        t = s.last.time  # the attempt's end: the next delay starts here
    return attempts


def test_6_a_30_s_cap_fails_whatever_the_agent_module_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch the reference agent's cap to 30 s: the checker's bounds do not move."""
    agent_backoff = importlib.import_module("tetherbed.agent.backoff")
    monkeypatch.setattr(agent_backoff, "CAP_SECONDS", 30.0)
    s = Scribe()
    attempts = _outage(s, [1.5, 2.5, 4.5, 8.5, 16.5, 30.0, 30.0])
    verdict = backoff_bounds.check(s.history)
    assert verdict.failed, verdict.summary
    assert "30.00" in verdict.summary and "[32, 37]" in verdict.summary
    assert attempts[5].index in blamed(verdict)


def spec_delay(n: int, rng: random.Random) -> float:
    """The spec's sentence, written out here: min(2^attempt · 1 s, 60 s) + jitter(0-5 s)."""
    return min(2.0**n, 60.0) + rng.uniform(0.0, 5.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.randoms(use_true_random=False))
def test_6b_any_schedule_the_spec_allows_passes(failures: int, rng: random.Random) -> None:
    s = Scribe()
    _outage(s, [spec_delay(n, rng) for n in range(failures)])
    verdict = backoff_bounds.check(s.history)
    assert verdict.ok, verdict.summary


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 9), st.randoms(use_true_random=False), st.data())
def test_6c_halving_any_delay_fails_and_is_named(
    failures: int, rng: random.Random, data: st.DataObject
) -> None:
    delays = [spec_delay(n, rng) for n in range(failures)]
    broken = data.draw(st.integers(1, failures - 1))
    delays[broken] = min(2.0**broken, 60.0) / 2 - 0.1
    s = Scribe()
    attempts = _outage(s, delays)
    verdict = backoff_bounds.check(s.history)
    assert verdict.failed, verdict.summary
    assert attempts[broken].index in blamed(verdict)
