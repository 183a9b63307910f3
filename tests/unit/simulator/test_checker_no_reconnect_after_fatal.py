"""no_reconnect_after_fatal: after 4426-4429 or SESSION_REVOKED, no new connection."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.simulator.wire_histories import Scribe
from tetherbed.simulator.checkers import reconnect_after_fatal
from tetherbed.simulator.history import History


def test_without_a_fatal_close_there_is_nothing_to_judge() -> None:
    s = Scribe()
    s.connect("a", 0.0).closed_by_hub(5.0, 1001)
    s.connect("a", 7.0)
    verdict = reconnect_after_fatal.check(s.history)
    assert verdict.unknown and "no fatal close" in verdict.summary
    assert reconnect_after_fatal.check(History()).unknown


@pytest.mark.parametrize("code", [4426, 4427, 4428, 4429])
def test_a_new_connection_after_a_fatal_close_names_both(code: int) -> None:
    s = Scribe()
    fatal = s.connect("a", 0.0).closed_by_hub(5.0, code)
    again = s.unreachable("a", 8.0)
    verdict = reconnect_after_fatal.check(s.history)
    assert verdict.failed, verdict.summary
    assert verdict.evidence_indexes() == [fatal.index, again.index]
    assert f"close {code}" in verdict.summary


def test_session_revoked_is_fatal_even_before_a_close() -> None:
    s = Scribe()
    link = s.connect("a", 0.0)
    revoked = link.revoke(5.0, "user_revoked")
    link.end(5.5, "reset")
    s.connect("a", 9.0)
    verdict = reconnect_after_fatal.check(s.history)
    assert verdict.failed and revoked.index in verdict.evidence_indexes()
    assert "SESSION_REVOKED (user_revoked)" in verdict.summary


def test_an_operator_restart_allows_connecting_again() -> None:
    s = Scribe()
    s.connect("a", 0.0).closed_by_hub(5.0, 4428)
    s.event(9.0, "agent:a", "started")
    s.connect("a", 9.5)
    assert reconnect_after_fatal.check(s.history).ok


def test_nodes_are_judged_one_by_one() -> None:
    s = Scribe()
    s.connect("a", 0.0).closed_by_hub(5.0, 4427)
    s.connect("b", 0.0).closed_by_hub(5.0, 1006)
    s.connect("b", 7.0)
    assert reconnect_after_fatal.check(s.history).ok


def test_an_agent_confessing_an_attempt_convicts_it() -> None:
    s = Scribe()
    s.connect("a", 0.0).closed_by_hub(5.0, 4427)
    confession = s.event(9.0, "agent:a", "attempt", attempt=2)
    verdict = reconnect_after_fatal.check(s.history)
    assert verdict.failed and confession.index in verdict.evidence_indexes()
    assert "agent journal" in verdict.summary


def test_custom_codes_and_profiles() -> None:
    s = Scribe()
    s.connect("a", 0.0).closed_by_hub(5.0, 4000)
    s.unreachable("a", 8.0)
    assert reconnect_after_fatal.check(s.history).unknown
    assert reconnect_after_fatal.check(s.history, fatal_codes=[4000]).failed
    with pytest.raises(ValueError, match="profile"):
        reconnect_after_fatal.check(s.history, profile="lenient")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([4426, 4427, 4428]), st.floats(0.001, 500), st.booleans())
def test_any_connection_after_a_fatal_close_fails(code: int, after: float, up: bool) -> None:
    s = Scribe()
    s.connect("a", 0.0).closed_by_hub(5.0, code)
    if up:
        s.connect("a", 5.01 + after)
    else:
        s.unreachable("a", 5.01 + after)
    assert reconnect_after_fatal.check(s.history).failed
