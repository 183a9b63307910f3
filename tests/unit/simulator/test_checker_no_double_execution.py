"""no_double_execution: non-idempotent digests run at most as often as requested."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tetherbed.simulator.checkers import double_execution as no_double_execution
from tetherbed.simulator.history import History
from tetherbed.wire.catalog import is_idempotent


def invoke(h: History, t: float, kind: str, digest: str, req: str, *, client: str = "a") -> int:
    value = {"payload": {"x": digest}, "digest": digest}
    return h.append(t, f"client:{client}", "invoke", kind, value, session="s1", req=req).index


def execute(h: History, t: float, kind: str, digest: str | None, agent: str = "a") -> int:
    value = {"kind": kind, "request_id": f"h{t}", "digest": digest}
    return h.append(t, f"agent:{agent}", "event", "exec", value, session="s1").index


def test_each_request_executed_once_passes() -> None:
    h = History()
    invoke(h, 1, "EXECUTE_COMMAND", "d1", "a1")
    execute(h, 1.1, "EXECUTE_COMMAND", "d1")
    invoke(h, 2, "FILE_MOVE", "d2", "a2")
    execute(h, 2.1, "FILE_MOVE", "d2")
    verdict = no_double_execution.check(h)
    assert verdict.ok and "2 non-idempotent" in verdict.summary


def test_a_command_executed_twice_is_named_with_its_request() -> None:
    h = History()
    request = invoke(h, 1, "EXECUTE_COMMAND", "d1", "a1")
    first = execute(h, 1.1, "EXECUTE_COMMAND", "d1", agent="a")
    second = execute(h, 3.0, "EXECUTE_COMMAND", "d1", agent="b")  # re-sent after a takeover
    verdict = no_double_execution.check(h)
    assert not verdict.ok
    assert verdict.evidence_indexes() == [request, first, second]
    assert "EXECUTE_COMMAND" in verdict.summary and "2 times" in verdict.summary


def test_idempotent_kinds_may_repeat() -> None:
    h = History()
    invoke(h, 1, "FILE_WRITE", "d1", "a1")
    for n in range(3):
        execute(h, 1.1 + n, "FILE_WRITE", "d1")
    assert no_double_execution.check(h).ok


def test_the_same_command_sent_twice_on_purpose_may_run_twice() -> None:
    h = History()
    invoke(h, 1, "EXECUTE_COMMAND", "d1", "a1")
    execute(h, 1.1, "EXECUTE_COMMAND", "d1")
    invoke(h, 2, "EXECUTE_COMMAND", "d1", "a2")
    execute(h, 2.1, "EXECUTE_COMMAND", "d1")
    assert no_double_execution.check(h).ok
    execute(h, 3.1, "EXECUTE_COMMAND", "d1")
    assert not no_double_execution.check(h).ok


def test_unknown_kinds_count_as_non_idempotent_and_missing_digests_are_counted() -> None:
    h = History()
    execute(h, 1, "SOMETHING_NEW", "d9")
    execute(h, 2, "SOMETHING_NEW", "d9")
    execute(h, 3, "EXECUTE_COMMAND", None)
    verdict = no_double_execution.check(h)
    assert not verdict.ok
    h2 = History()
    execute(h2, 3, "EXECUTE_COMMAND", None)
    assert "1 exec(s) without a digest" in no_double_execution.check(h2).summary


def test_kind_falls_back_to_the_invoke() -> None:
    h = History()
    invoke(h, 1, "EXECUTE_COMMAND", "d1", "a1")
    h.append(2, "agent:a", "event", "exec", {"digest": "d1"})
    h.append(3, "agent:a", "event", "exec", {"digest": "d1"})
    assert not no_double_execution.check(h).ok


KINDS = ["EXECUTE_COMMAND", "FILE_MOVE", "INPUT_ACTION", "FILE_WRITE", "FILE_READ", "FILE_LIST"]


@st.composite
def correct_runs(draw: st.DrawFn) -> History:
    """A hub that retries only idempotent requests."""
    h = History()
    t = 0.0
    for n in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(KINDS))
        t += 0.5
        invoke(h, t, kind, f"d{n}", f"a{n}")
        times = draw(st.integers(0, 4)) if is_idempotent(kind) else draw(st.integers(0, 1))
        for _ in range(times):
            t += 0.1
            execute(h, t, kind, f"d{n}", agent=draw(st.sampled_from(["a", "b"])))
    return h


@settings(max_examples=100, deadline=None)
@given(correct_runs())
def test_a_hub_that_never_retries_unsafe_requests_passes(history: History) -> None:
    assert no_double_execution.check(history).ok


@settings(max_examples=60, deadline=None)
@given(correct_runs())
def test_repeating_any_non_idempotent_exec_fails(history: History) -> None:
    unsafe = [r for r in history.events("exec") if not is_idempotent(r.value["kind"])]
    if not unsafe:
        return
    again = unsafe[0]
    history.append(1000, again.process, "event", "exec", dict(again.value), session="s1")
    verdict = no_double_execution.check(history)
    assert not verdict.ok
    assert again.index in verdict.evidence_indexes()
