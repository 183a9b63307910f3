"""no_double_execution: each client request reaches an agent at most once, from the wire."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.simulator.wire_histories import Scribe
from tetherbed.simulator.checkers import double_execution
from tetherbed.simulator.history import History

PUSH = {"command": "git push"}


def result(n: int) -> dict[str, object]:
    return {"stdout": f"run {n}", "exit_code": 0, "duration_seconds": 0.1 * n}


def test_each_request_once_passes() -> None:
    s = Scribe()
    link = s.connect("w", 0.0)
    for n in range(3):
        payload = {"command": f"echo {n}"}
        s.invoke(1.0 + n, "alice", f"c{n}", "EXECUTE_COMMAND", payload)
        link.deliver(1.1 + n, "EXECUTE_COMMAND", f"h{n}", payload)
        link.answer(1.2 + n, "COMMAND_RESULT", f"h{n}", result(n))
        s.complete(
            1.3 + n, "alice", f"c{n}", "EXECUTE_COMMAND", "COMMAND_RESULT", payload=result(n)
        )
    verdict = double_execution.check(s.history)
    assert verdict.ok, verdict.summary
    assert "3 non-idempotent request(s), 3 execution(s)" in verdict.summary


def test_a_reissue_after_a_reconnect_is_named_with_the_request() -> None:
    s = Scribe()
    invoke = s.invoke(0.0, "alice", "push", "EXECUTE_COMMAND", PUSH)
    first = s.connect("w", 0.0)
    one = first.deliver(0.1, "EXECUTE_COMMAND", "h1", PUSH)
    first.end(1.0, "reset")
    second = s.connect("w", 2.0)
    two = second.deliver(2.1, "EXECUTE_COMMAND", "h2", PUSH)
    verdict = double_execution.check(s.history)
    assert verdict.failed
    roles = {e["index"]: e["role"] for e in verdict.evidence}
    assert roles[invoke.index] == "the client request"
    assert roles[one.index].startswith("execution 1 of 2")
    assert roles[two.index].startswith("execution 2 of 2")


def test_idempotent_kinds_may_repeat() -> None:
    s = Scribe()
    s.invoke(0.0, "alice", "c", "EXECUTE_COMMAND", PUSH)
    s.invoke(0.0, "alice", "r", "FILE_READ", {"path": "a"})
    link = s.connect("w", 0.0)
    link.deliver(0.5, "EXECUTE_COMMAND", "h", PUSH)
    for n in range(3):
        link.deliver(1.0 + n, "FILE_READ", f"h{n}", {"path": "a"})
    assert double_execution.check(s.history).ok


def test_a_refusal_before_running_is_no_execution() -> None:
    s = Scribe()
    s.invoke(0.0, "alice", "c", "EXECUTE_COMMAND", PUSH)
    link = s.connect("w", 0.0)
    link.deliver(0.1, "EXECUTE_COMMAND", "h1", PUSH)
    link.answer(0.2, "ERROR", "h1", {"code": "SHIM_OVERLOADED", "message": "full", "fatal": False})
    link.deliver(1.0, "EXECUTE_COMMAND", "h2", PUSH)
    assert double_execution.check(s.history).ok


def test_identical_requests_share_their_executions() -> None:
    s = Scribe()
    link = s.connect("w", 0.0)
    for n in range(2):
        s.invoke(1.0 + n, "alice", f"c{n}", "EXECUTE_COMMAND", PUSH)
        link.deliver(1.1 + n, "EXECUTE_COMMAND", f"h{n}", PUSH)
    assert double_execution.check(s.history).ok
    link.deliver(5.0, "EXECUTE_COMMAND", "h9", PUSH)
    verdict = double_execution.check(s.history)
    assert verdict.failed and "2 identical EXECUTE_COMMAND" in verdict.summary


def test_a_hub_that_keeps_the_client_id_is_followed_by_the_id() -> None:
    s = Scribe()
    s.invoke(0.0, "alice", "c1", "FILE_MOVE", {"src": "a", "dst": "b"})
    link = s.connect("w", 0.0)
    link.deliver(0.1, "FILE_MOVE", "c1", {"src": "a", "dst": "b", "overwrite": True})
    link.deliver(0.5, "FILE_MOVE", "c1", {"src": "a", "dst": "b", "overwrite": False})
    verdict = double_execution.check(s.history)
    assert verdict.failed and "by the request id" in verdict.summary


def test_no_wire_or_nothing_to_judge_is_unknown() -> None:
    assert double_execution.check(History()).unknown
    s = Scribe()
    s.connect("w", 0.0).deliver(1.0, "FILE_READ", "h1", {"path": "a"})
    verdict = double_execution.check(s.history)
    assert verdict.unknown and "no non-idempotent request" in verdict.summary


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.data())
def test_running_any_request_again_fails(requests: int, data: st.DataObject) -> None:
    s = Scribe()
    link = s.connect("w", 0.0)
    for n in range(requests):
        payload = {"command": f"echo {n}"}
        s.invoke(1.0 + n, "alice", f"c{n}", "EXECUTE_COMMAND", payload)
        link.deliver(1.1 + n, "EXECUTE_COMMAND", f"h{n}", payload)
    assert double_execution.check(s.history).ok
    again = data.draw(st.integers(0, requests - 1))
    twice = link.deliver(20.0, "EXECUTE_COMMAND", "h-again", {"command": f"echo {again}"})
    verdict = double_execution.check(s.history)
    assert verdict.failed and twice.index in verdict.evidence_indexes()
