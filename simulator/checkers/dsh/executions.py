"""dsh_exec_answers: every computer_exec gets one answer, and it is the agent's (§3.3, §5.2).

Why: results come back as separate POSTs, which an agent retries when an
answer is lost. The hub must settle each execution once, with what the agent
reported — never twice (a retried result taken again), never a result the
agent did not post, never "it failed" for a command that ran.

For each computer_exec call of a dsh client (followed to the `exec` events on
the agents' links by its `requestId`, or else by the command's digest within
the call's lifetime):

- it was dispatched at most once (one `exec` event, one request id);
- an `ok` answer (not promoted to a job) has an `exec` that reached an agent
  and a result the agent POSTed for it, and carries that result's exit code,
  `timedOut` and output (by digest);
- a `fail` answer (it did not happen) has no `exec` that reached an agent;
- the hub answered 200 to at most one result POST per request id (a retry of
  a settled one gets 404 `unknown-request`).

No computer_exec call is no evidence (unknown).
"""

from __future__ import annotations

from typing import Any

from tetherbed.simulator.checkers.dsh.evidence import Call, Wire, data_of, read
from tetherbed.simulator.checkers.evidence.records import seconds
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History

NAME = "dsh_exec_answers"


def check(history: History) -> Verdict:
    findings = Findings(NAME)
    evidence = read(history)
    calls = evidence.calls_of("computer_exec")
    for call in calls:
        if call.completion is not None:
            _judge(evidence, call, findings)
    for _, event in evidence.exec_events():
        request_id = data_of(event).get("requestId")
        if not isinstance(request_id, str):
            continue
        taken = [e for e in evidence.results_for(request_id) if e.status == 200]
        if len(taken) > 1:
            findings.add(
                f"the hub accepted {len(taken)} results for {request_id}: a retried result was "
                "taken again (it must answer 404 once the request is settled)",
                (event, "the exec"),
                *[(e.response, "a 200 for a result") for e in taken],
            )
    if not calls:
        return findings.verdict("", no_evidence="no computer_exec call")
    return findings.verdict(f"{len(calls)} computer_exec call(s), each answered once and truly")


def _judge(wire: Wire, call: Call, findings: Findings) -> None:
    completion = call.completion
    assert completion is not None
    dispatched = wire.dispatched(call)
    ids = {data_of(e).get("requestId") for _, e in dispatched}
    name = f"{call.invoke.process} {call.invoke.req}"
    if len(ids) > 1:
        findings.add(
            f"{name} was dispatched {len(ids)} times ({', '.join(sorted(map(str, ids)))})",
            (call.invoke, "the call"),
            *[(e, "an exec") for _, e in dispatched],
        )
    value = call.value
    if completion.type == "fail":
        if dispatched and isinstance(value.get("requestId"), str):
            findings.add(
                f"{name} was answered {value.get('code')} (it did not happen), yet its exec "
                f"reached {dispatched[0][0].agent} at {seconds(dispatched[0][1].time)}",
                (completion, "the failure"),
                (dispatched[0][1], "the exec"),
            )
        return
    if completion.type != "ok" or value.get("promoted"):
        return
    if not dispatched:
        findings.add(
            f"{name} was answered ok, but no exec for it reached an agent",
            (call.invoke, "the call"),
            (completion, "the answer"),
        )
        return
    request_id = data_of(dispatched[0][1]).get("requestId")
    results = wire.results_for(request_id) if isinstance(request_id, str) else []
    if not results:
        findings.add(
            f"{name} was answered ok, but the agent never posted a result for {request_id}",
            (dispatched[0][1], "the exec"),
            (completion, "the answer"),
        )
        return
    posted = results[0].body
    wrong = _differences(value, posted)
    if wrong:
        findings.add(
            f"{name}'s answer is not the result the agent posted for {request_id}: "
            + "; ".join(wrong),
            (results[0].request, "the agent's result"),
            (completion, "the answer"),
        )


def _differences(answer: dict[str, Any], posted: dict[str, Any]) -> list[str]:
    wrong = []
    for field in ("exitCode", "timedOut"):
        if field in posted and answer.get(field) != posted.get(field):
            wrong.append(f"{field} {answer.get(field)!r}, the agent posted {posted.get(field)!r}")
    for stream in ("stdout", "stderr"):
        summary = posted.get(stream)
        digest = answer.get(f"{stream}Digest")
        if isinstance(summary, dict) and digest is not None and summary.get("digest") != digest:
            wrong.append(f"{stream} differs (digest {digest}, the agent's {summary.get('digest')})")
    return wrong
