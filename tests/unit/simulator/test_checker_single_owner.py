"""single_owner: owner intervals from hub events (or agents), overlaps named."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tetherbed.simulator.checkers import single_owner
from tetherbed.simulator.history import History


def hub(history: History, t: float, f: str, session: str | None = "s1", **value: object) -> int:
    return history.append(t, "hub", "event", f, value, session=session).index


def agent(history: History, t: float, name: str, f: str, **value: object) -> int:
    return history.append(t, f"agent:{name}", "event", f, value, session="s1").index


def test_reconnect_after_disconnect_is_one_owner_at_a_time() -> None:
    h = History()
    hub(h, 1, "ack", conn="c1", control=False)
    hub(h, 5, "disconnect", conn="c1", code=1006)
    hub(h, 6, "ack", conn="c2", control=False)
    verdict = single_owner.check(h)
    assert verdict.ok, verdict.summary
    assert "2 owner intervals" in verdict.summary


def test_takeover_that_closes_the_old_owner_is_not_an_overlap() -> None:
    h = History()
    hub(h, 1, "ack", conn="c1", control=False)
    hub(h, 4, "takeover", old="c1", new="c2", silent=False)
    hub(h, 4, "ack", conn="c2", control=False)  # same instant, later record
    hub(h, 4.1, "disconnect", conn="c1", code=4427)
    assert single_owner.check(h).ok


def test_silent_takeover_leaves_two_owners_and_names_the_records() -> None:
    h = History()
    first = hub(h, 1, "ack", conn="c1", control=False)
    silent = hub(h, 4, "takeover", old="c1", new="c2", silent=True)
    second = hub(h, 4, "ack", conn="c2", control=False)
    hub(h, 9, "status")
    verdict = single_owner.check(h)
    assert not verdict.ok
    assert verdict.evidence_indexes() == sorted([first, silent, second])
    assert "c1 and c2" in verdict.summary and "silent" in verdict.summary
    assert all(e["violation"] == 0 and e["why"] for e in verdict.evidence)
    roles = {e["index"]: e["role"] for e in verdict.evidence}
    assert "silent takeover" in roles[silent]


def test_sessions_are_independent_and_control_acks_own_nothing() -> None:
    h = History()
    hub(h, 1, "ack", conn="c1", control=False)
    hub(h, 1, "ack", session="s2", conn="c2", control=False)
    hub(h, 2, "ack", session=None, conn="c3", control=True)
    hub(h, 2, "ack", session=None, conn="c4", control=True)
    assert single_owner.check(h).ok


def test_revoke_shutdown_and_pong_timeout_end_ownership() -> None:
    for ending in ("revoke", "shutdown_close", "pong_timeout"):
        h = History()
        hub(h, 1, "ack", conn="c1", control=False)
        hub(h, 2, ending, conn="c1")
        hub(h, 3, "ack", conn="c2", control=False)
        assert single_owner.check(h).ok, ending


def test_hub_restart_ends_ownership_and_scopes_connection_ids() -> None:
    h = History()
    h.append(0, "hub", "event", "started", {})
    hub(h, 1, "ack", conn="c1", control=False)
    h.append(2, "hub", "event", "killed", {})
    h.append(3, "hub", "event", "started", {})
    hub(h, 4, "ack", conn="c1", control=False)  # ids restart with the hub
    hub(h, 5, "disconnect", conn="c1", code=1006)
    hub(h, 6, "ack", conn="c2", control=False)
    assert single_owner.check(h).ok


def test_owner_that_is_never_released_overlaps_a_newcomer() -> None:
    h = History()
    hub(h, 1, "ack", conn="c1", control=False)
    hub(h, 2, "ack", conn="c2", control=False)
    verdict = single_owner.check(h)
    assert not verdict.ok
    assert "never released" in verdict.summary


def test_agent_fallback_tolerates_delivery_skew_only() -> None:
    h = History()
    agent(h, 1, "a", "connected", conn="c1")
    agent(h, 5.0, "b", "connected", conn="c2")
    agent(h, 5.3, "a", "revoked", reason="another_shim_connected")
    assert single_owner.check(h).ok  # 0.3 s < 0.5 s tolerance
    assert "agent events" in single_owner.check(h).summary
    verdict = single_owner.check(h, tolerance=0.1)
    assert not verdict.ok
    assert {e["process"] for e in verdict.evidence} == {"agent:a", "agent:b"}


def test_agent_fallback_ignores_a_paused_agent() -> None:
    h = History()
    agent(h, 1, "a", "connected", conn="c1")
    agent(h, 2, "a", "paused")
    agent(h, 10, "b", "connected", conn="c2")
    agent(h, 30, "b", "lost", code=1006, handshake=True)
    agent(h, 31, "a", "resumed")
    agent(h, 31.1, "a", "lost", code=1006, handshake=True)
    assert single_owner.check(h).ok


def test_odd_records_do_not_raise() -> None:
    h = History()
    h.append(1, "hub", "event", "ack", None, session="s1")
    h.append(2, "hub", "event", "ack", {"conn": 5}, session="s1")
    h.append(3, "hub", "event", "takeover", "garbage")
    h.append(4, "hub", "event", "disconnect", {"conn": None})
    h.append(5, "agent:x", "event", "connected", [1, 2])
    assert single_owner.check(h).ok


@st.composite
def correct_hub(draw: st.DrawFn) -> History:
    """A hub that follows the spec: takeovers close the old owner, strangers get 4427."""
    h = History()
    owners: dict[str, str | None] = {"s1": None, "s2": None}
    t, next_conn = 0.0, 1
    for _ in range(draw(st.integers(0, 40))):
        t += draw(st.sampled_from([0.0, 0.001, 0.5, 3.0]))
        session = draw(st.sampled_from(sorted(owners)))
        action = draw(st.sampled_from(["connect", "drop", "revoke", "reject"]))
        owner = owners[session]
        if action == "connect":
            conn = f"c{next_conn}"
            next_conn += 1
            hub(h, t, "connect", session=session, conn=conn, user="u")
            if owner is not None:
                hub(h, t, "takeover", session=session, old=owner, new=conn, silent=False)
            hub(h, t, "ack", session=session, conn=conn, control=False)
            if owner is not None:
                hub(h, t, "disconnect", session=session, conn=owner, code=4427)
            owners[session] = conn
        elif action == "reject":
            conn = f"c{next_conn}"
            next_conn += 1
            hub(h, t, "takeover_rejected", session=session, conn=conn, owner=owner)
            hub(h, t, "disconnect", session=session, conn=conn, code=4427)
        elif owner is not None:
            ending = "disconnect" if action == "drop" else "revoke"
            hub(h, t, ending, session=session, conn=owner, code=1006)
            owners[session] = None
    return h


@settings(max_examples=100, deadline=None)
@given(correct_hub())
def test_a_hub_that_follows_the_policy_never_fails(history: History) -> None:
    verdict = single_owner.check(history)
    assert verdict.ok, verdict.summary


@settings(max_examples=100, deadline=None)
@given(correct_hub(), st.floats(0, 200, allow_nan=False))
def test_a_second_ack_while_an_owner_lives_always_fails(history: History, at: float) -> None:
    owners = single_owner.owner_intervals(history)
    live = [i for i in owners if i.end is None]
    t = max((r.time for r in history), default=0.0) + at
    hub(history, t, "connect", conn="cX", user="u")
    hub(history, t, "ack", conn="cX", control=False)
    verdict = single_owner.check(history)
    assert verdict.ok == (not any(i.session == "s1" for i in live))
