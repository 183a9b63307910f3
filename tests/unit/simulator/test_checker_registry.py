"""The checker registry: names, options, crash isolation, and no crash on odd input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.simulator.wire_histories import Scribe
from tetherbed.simulator import checkers
from tetherbed.simulator.checkers import CHECKERS, Verdict, checker_options, run_checkers
from tetherbed.simulator.checkers.verdict import EVIDENCE_LIMIT, Findings
from tetherbed.simulator.history import History, Record

NAMES = [
    "single_owner",
    "no_double_execution",
    "exactly_one_answer",
    "no_reconnect_after_fatal",
    "backoff_bounds",
    "no_crossed_answers",
    "file_contents",
    "llm_streams",
    "serial_io",
    "dsh_presence",
    "dsh_one_stream",
    "dsh_exec_answers",
    "dsh_chunk_order",
    "dsh_single_use_keys",
    "dsh_install_url",
    "control_children",
    "revocation_holds",
]


def test_every_checker_is_registered_and_documented() -> None:
    assert list(CHECKERS) == NAMES
    for name in NAMES:
        module = checkers.MODULES[name]
        assert module.__doc__ and len(module.__doc__) > 200, name
        assert name == module.NAME


def test_run_checkers_runs_all_by_default_in_order() -> None:
    verdicts = run_checkers(History())
    assert [v.name for v in verdicts] == NAMES
    # Nothing happened: no checker may call that a pass.
    assert all(v.unknown and v.evidence == [] for v in verdicts)
    assert all(v.summary.startswith("no evidence: ") for v in verdicts)


def test_options_are_passed_and_validated() -> None:
    assert checker_options("backoff_bounds")["early_tolerance"] == 0.05
    s = Scribe()
    s.connect("a", 0.0).end(1.0, "reset")
    s.unreachable("a", 1.5)
    h = s.history
    [strict] = run_checkers(h, ["backoff_bounds"])
    [lenient] = run_checkers(h, ["backoff_bounds"], {"backoff_bounds": {"early_tolerance": 1}})
    assert not strict.ok and lenient.ok
    with pytest.raises(ValueError, match="unknown checker"):
        run_checkers(h, ["no_such_checker"])
    with pytest.raises(ValueError, match="no option"):
        run_checkers(h, ["backoff_bounds"], {"backoff_bounds": {"tolerence": 1}})


def test_a_crashing_checker_fails_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(history: History) -> Verdict:
        raise RuntimeError("boom")

    monkeypatch.setitem(CHECKERS, "single_owner", broken)
    verdicts = run_checkers(History(), ["single_owner", "exactly_one_answer"])
    assert verdicts[0].error is not None and verdicts[0].status == "error"
    assert "RuntimeError: boom" in verdicts[0].summary
    assert verdicts[1].unknown


def test_findings_cap_evidence_but_count_everything() -> None:
    findings = Findings("x")
    record = Record(0, 1.0, "hub", "event", "ack", {})
    for n in range(EVIDENCE_LIMIT + 10):
        findings.add(f"problem {n}", (record, "r"))
    verdict = findings.verdict("fine")
    assert not verdict.ok
    assert len(verdict.evidence) == EVIDENCE_LIMIT
    assert verdict.summary.startswith(f"{EVIDENCE_LIMIT + 10} violations")
    assert "and 57 more" in verdict.summary
    assert Verdict.from_dict(verdict.to_dict()) == verdict


ODD_VALUES = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(
        st.sampled_from(
            [
                "conn",
                "old",
                "new",
                "silent",
                "control",
                "attempt",
                "delay",
                "code",
                "digest",
                "kind",
                "path",
                "exists",
                "content",
                "payload",
                "type",
                "id",
                "target",
                "exit_code",
                "encoding",
                "offset",
                "length",
                "truncated",
                "dir",
                "leg",
                "how",
                # dsh-computers links and clients
                "n",
                "event",
                "status",
                "body",
                "data",
                "computers",
                "streamed",
                "requestId",
                "forwarded_host",
                "commandDigest",
            ]
        ),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-5, 5),
            st.floats(),
            st.text(max_size=4),
            st.sampled_from(["dsh", "hello", "exec", "ended", "req_1", "cmp_1"]),
            st.dictionaries(
                st.sampled_from(
                    ["path", "content", "src", "dst", "command", "computerId", "requestId", "seq"]
                ),
                st.one_of(st.none(), st.text(max_size=4), st.integers()),
            ),
            st.lists(
                st.dictionaries(
                    st.sampled_from(["id", "online", "stream", "size", "digest"]),
                    st.one_of(st.none(), st.booleans(), st.integers(0, 3), st.text(max_size=3)),
                ),
                max_size=3,
            ),
        ),
        max_size=6,
    ),
)
ODD_RECORDS = st.builds(
    lambda time, process, type_, f, value, session, req: (
        time,
        process,
        type_,
        f,
        value,
        session,
        req,
    ),
    st.floats(-1, 100, allow_nan=False),
    st.sampled_from(
        ["hub", "agent:a", "agent:b", "client:x", "client:y", "fault", "runner", "", "wire:a"]
    ),
    st.sampled_from(["invoke", "ok", "fail", "info", "event"]),
    st.sampled_from(
        [
            "ack",
            "takeover",
            "disconnect",
            "connected",
            "lost",
            "attempt",
            "backoff",
            "exec",
            "fatal_close",
            "revoked",
            "stop",
            "started",
            "paused",
            "resumed",
            "killed",
            "fault_start",
            "fault_stop",
            "final_file",
            "FILE_WRITE",
            "FILE_READ",
            "FILE_DELETE",
            "FILE_MOVE",
            "EXECUTE_COMMAND",
            "connect",
            "upgrade",
            "open",
            "unreachable",
            "frame",
            "close",
            "end",
            "http_request",
            "http_response",
            "sse_open",
            "sse_event",
            "sse_end",
            "state",
            "computer_exec",
            "create_key",
        ]
    ),
    ODD_VALUES,
    st.sampled_from([None, "s1", "s2"]),
    st.sampled_from([None, "r1", "r2", 3]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ODD_RECORDS, max_size=30))
def test_no_checker_raises_on_odd_histories(rows: list[tuple]) -> None:
    history = History()
    for time, process, type_, f, value, session, req in rows:
        history.append(time, process, type_, f, value, session=session, req=req)
    for name, check in CHECKERS.items():
        verdict = check(history)
        assert isinstance(verdict, Verdict) and verdict.name == name
        assert isinstance(verdict.summary, str) and verdict.summary
        assert verdict.ok == (not verdict.evidence) or not verdict.ok
