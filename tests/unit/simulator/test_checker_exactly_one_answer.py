"""exactly_one_answer: one completion per invoke, none without an invoke."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tetherbed.simulator.checkers import exactly_one_answer
from tetherbed.simulator.history import History


def op(h: History, t: float, kind: str, req: str, client: str = "alice", **value: object) -> int:
    return h.append(t, f"client:{client}", kind, "FILE_READ", value, session="s1", req=req).index


def test_every_request_answered_once_passes() -> None:
    h = History()
    op(h, 1, "invoke", "r1")
    op(h, 1, "invoke", "r2")
    op(h, 2, "ok", "r2", type="FILE_CONTENTS")
    op(h, 3, "info", "r1", type="ERROR", code="OUTCOME_UNKNOWN")
    op(h, 3, "invoke", "r1", client="bob")  # another client may reuse the number
    op(h, 4, "fail", "r1", client="bob", type="ERROR", code="PATH_NOT_FOUND")
    verdict = exactly_one_answer.check(h)
    assert verdict.ok, verdict.summary
    assert "3 request(s)" in verdict.summary


def test_a_missing_completion_names_the_invoke() -> None:
    h = History()
    lost = op(h, 1, "invoke", "r1")
    op(h, 2, "invoke", "r2")
    op(h, 3, "ok", "r2")
    verdict = exactly_one_answer.check(h)
    assert not verdict.ok
    assert verdict.evidence_indexes() == [lost]
    assert "r1" in verdict.summary and "never got an answer" in verdict.summary


def test_a_second_completion_is_a_violation() -> None:
    h = History()
    request = op(h, 1, "invoke", "r1")
    first = op(h, 2, "ok", "r1")
    second = op(h, 3, "info", "r1", code="AGENT_DISCONNECTED")
    verdict = exactly_one_answer.check(h)
    assert not verdict.ok
    assert verdict.evidence_indexes() == [request, first, second]
    assert "answered twice" in verdict.summary


def test_a_completion_without_invoke_is_a_violation() -> None:
    h = History()
    op(h, 1, "invoke", "r1", client="bob")
    op(h, 2, "ok", "r1", client="bob")
    stray = op(h, 2, "ok", "r1")  # alice never sent r1
    verdict = exactly_one_answer.check(h)
    assert not verdict.ok and verdict.evidence_indexes() == [stray]


def test_requests_without_req_or_reused_in_flight_are_violations() -> None:
    h = History()
    h.append(1, "client:alice", "invoke", "FILE_READ", {})
    op(h, 2, "invoke", "r1")
    op(h, 3, "invoke", "r1")
    op(h, 4, "ok", "r1")
    verdict = exactly_one_answer.check(h)
    assert not verdict.ok
    assert "without a req" in verdict.summary and "reused" in verdict.summary


def test_grace_excuses_requests_sent_just_before_the_end() -> None:
    h = History()
    op(h, 1, "invoke", "r1")
    op(h, 2, "ok", "r1")
    op(h, 9.5, "invoke", "r2")
    h.append(10, "runner", "event", "note", {})
    assert not exactly_one_answer.check(h).ok
    assert exactly_one_answer.check(h, grace=1.0).ok


@st.composite
def answered(draw: st.DrawFn) -> History:
    """Clients with interleaved requests, each answered exactly once."""
    h = History()
    open_: list[tuple[str, str]] = []
    t, n = 0.0, 0
    for _ in range(draw(st.integers(0, 60))):
        t += draw(st.sampled_from([0.0, 0.01, 1.0]))
        if open_ and draw(st.booleans()):
            client, req = open_.pop(draw(st.integers(0, len(open_) - 1)))
            op(h, t, draw(st.sampled_from(["ok", "fail", "info"])), req, client=client)
        else:
            client = draw(st.sampled_from(["alice", "bob"]))
            n += 1
            op(h, t, "invoke", f"r{n}", client=client)
            open_.append((client, f"r{n}"))
    for client, req in open_:
        t += 1
        op(h, t, "info", req, client=client)
    return h


@settings(max_examples=100, deadline=None)
@given(answered())
def test_histories_where_everything_is_answered_once_pass(history: History) -> None:
    verdict = exactly_one_answer.check(history)
    assert verdict.ok if len(history) else verdict.unknown, verdict.summary


@settings(max_examples=60, deadline=None)
@given(answered(), st.data())
def test_dropping_any_completion_is_caught(history: History, data: st.DataObject) -> None:
    done = [r for r in history if r.type in ("ok", "fail", "info")]
    if not done:
        return
    dropped = data.draw(st.sampled_from(done))
    kept = History.from_records(r for r in history if r is not dropped)
    verdict = exactly_one_answer.check(kept)
    assert not verdict.ok
    invoke = next(r for r in history if r.type == "invoke" and r.req == dropped.req)
    assert verdict.evidence_indexes() == [invoke.index]
