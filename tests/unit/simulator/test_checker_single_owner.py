"""single_owner: never two connections of one session carrying requests at once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.simulator.wire_histories import Scribe
from tetherbed.simulator.checkers import single_owner
from tetherbed.simulator.history import History

CMD = {"command": "true"}
RESULT = {"stdout": "", "exit_code": 0}


def test_a_reconnect_after_a_drop_is_one_owner_at_a_time() -> None:
    s = Scribe()
    first = s.connect("a", 0.0)
    first.deliver(1.0, "EXECUTE_COMMAND", "h1", CMD)
    first.answer(1.5, "COMMAND_RESULT", "h1", RESULT)
    first.end(2.0, "reset")
    second = s.connect("a", 3.0)
    second.deliver(3.5, "FILE_READ", "h2", {"path": "x"})
    second.answer(3.6, "FILE_CONTENTS", "h2", {"content": ""})
    verdict = single_owner.check(s.history)
    assert verdict.ok, verdict.summary
    assert "2 connection(s) carried requests" in verdict.summary


def test_a_takeover_that_revokes_the_old_owner_first_is_fine() -> None:
    s = Scribe()
    old = s.connect("laptop", 0.0, machine="m")
    old.deliver(1.0, "EXECUTE_COMMAND", "h1", CMD)  # in flight when the laptop sleeps
    s.event(1.2, "agent:laptop", "paused")
    new = s.connect("laptop-woken", 5.0, machine="m")
    old.revoke(5.01)
    old.close(5.01, 4427)
    new.deliver(5.1, "EXECUTE_COMMAND", "h2", CMD)
    new.answer(5.2, "COMMAND_RESULT", "h2", RESULT)
    assert single_owner.check(s.history).ok


def test_an_old_owner_still_answering_while_the_new_one_works_fails() -> None:
    s = Scribe()
    old = s.connect("a", 0.0, machine="m1")
    slow = old.deliver(1.0, "EXECUTE_COMMAND", "h1", {"command": "sleep 3"})
    new = s.connect("b", 2.0, machine="m2")
    fast = new.deliver(2.1, "EXECUTE_COMMAND", "h2", CMD)
    new.answer(2.2, "COMMAND_RESULT", "h2", RESULT)
    late = old.answer(4.0, "COMMAND_RESULT", "h1", RESULT)
    verdict = single_owner.check(s.history)
    assert verdict.failed
    assert "from 2.100 s to 2.200 s" in verdict.summary
    roles = {e["index"]: e["role"] for e in verdict.evidence}
    assert {slow.index, fast.index, late.index} <= set(roles)
    assert "same time" in roles[fast.index]


def test_an_unanswered_request_counts_until_the_connection_is_released() -> None:
    s = Scribe()
    old = s.connect("a", 0.0)
    old.deliver(1.0, "EXECUTE_COMMAND", "h1", CMD)
    old.closed_by_hub(3.0, 1001)
    new = s.connect("b", 2.0)
    new.deliver(2.5, "FILE_LIST", "h2", {"path": "."})
    new.answer(2.6, "FILE_LIST_RESPONSE", "h2", {"entries": []})
    verdict = single_owner.check(s.history)
    assert verdict.failed and "2.500 s to 2.600 s" in verdict.summary


def test_sessions_are_independent_and_a_control_connection_owns_nothing() -> None:
    s = Scribe()
    one = s.connect("a", 0.0, "s1")
    two = s.connect("b", 0.0, "s2")
    for link, rid in ((one, "h1"), (two, "h2")):
        link.deliver(1.0, "FILE_STAT", rid, {"path": "x"})
        link.answer(2.0, "FILE_STAT_RESPONSE", rid, {"exists": False})
    control = s.attempt("c", 0.5)
    control.upgrade("/ws/local-executor", 0.5)
    control.response(101, 0.5)
    assert single_owner.check(s.history).ok


def test_no_wire_and_no_traffic_are_unknown() -> None:
    assert single_owner.check(History()).unknown
    s = Scribe()
    s.connect("a", 0.0)
    verdict = single_owner.check(s.history)
    assert verdict.unknown and "no request reached" in verdict.summary


def test_a_silent_takeover_the_hub_admits_fails_even_without_traffic() -> None:
    h = History()
    h.append(0.0, "hub", "event", "ack", {"conn": "c1"}, session="s")
    h.append(1.0, "hub", "event", "ack", {"conn": "c2"}, session="s")
    take = h.append(1.0, "hub", "event", "takeover", {"old": "c1", "new": "c2", "silent": True})
    verdict = single_owner.check(h)
    assert verdict.failed and "silent" in verdict.summary
    assert take.index in verdict.evidence_indexes()
    assert single_owner.check(h, source="wire").unknown


SPANS = st.lists(st.tuples(st.floats(0.01, 5), st.floats(0.01, 5)), min_size=1, max_size=6)


@settings(max_examples=80, deadline=None)
@given(SPANS)
def test_owners_one_after_the_other_never_fail(spans: list[tuple[float, float]]) -> None:
    s, t = Scribe(), 0.0
    for n, (gap, length) in enumerate(spans):
        t += gap
        link = s.connect(f"m{n % 3}", t, machine=f"m{n % 3}")
        link.deliver(t + 0.01, "EXECUTE_COMMAND", f"h{n}", CMD)
        link.answer(t + 0.01 + length, "COMMAND_RESULT", f"h{n}", RESULT)
        t += 0.02 + length
        link.closed_by_hub(t, 1001)
        t += 0.01
    assert single_owner.check(s.history).ok


@settings(max_examples=80, deadline=None)
@given(SPANS, st.floats(0.001, 0.99))
def test_a_second_connection_working_inside_the_first_ones_request_always_fails(
    spans: list[tuple[float, float]], at: float
) -> None:
    s = Scribe()
    gap, length = spans[0]
    a = s.connect("a", gap)
    a.deliver(gap + 0.01, "EXECUTE_COMMAND", "h1", CMD)
    a.answer(gap + 0.01 + length, "COMMAND_RESULT", "h1", RESULT)
    inside = gap + 0.01 + length * at
    b = s.connect("b", inside - 0.005)
    b.deliver(inside, "FILE_READ", "h2", {"path": "x"})
    assert single_owner.check(s.history).failed
