"""no_double_execution: a non-idempotent request reaches an agent at most once.

Why: the spec's idempotency table forbids the platform to re-issue
EXECUTE_COMMAND, FILE_MOVE, INPUT_ACTION and the other state-changing kinds —
a command run twice after a dropped connection may push twice or delete
twice. A hub may retry what is safe (reads, writes) and must answer the rest
with "outcome unknown"; this checker verifies it never re-sent one.

Judged from the wire. Every non-idempotent request frame that reached an
agent (`wiretap` records, data connections) is an execution, unless the
agent refused it before doing anything (`wire.catalog.REFUSED_UNRUN`, such as
SHIM_OVERLOADED). Each is followed back to the client invoke it serves, by
the client's request, not by what the payload looks like after the hub:

1. the agent's answer, when the client received an answer with the same
   payload digest (hubs relay answers; a retry counter in the re-issued
   request does not change what comes back);
2. the request id, when the hub kept the client's;
3. the payload digest, when exactly one client request of that session and
   kind sent that payload (`wiretap.digest`: canonical JSON, so re-encoding
   on the way does not matter).

A client invoke with more than one execution is a violation; its evidence is
the invoke and every frame that executed it. Several identical client
requests share their executions (at most one each). A frame that matches no
client request at all — a hub that rewrites ids and payloads beyond
recognition — is never a free execution: the verdict is unknown, naming it.
No wire recording, or no non-idempotent request at all: unknown.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from tetherbed.simulator.checkers.evidence.connections import Request, connections, has_wire
from tetherbed.simulator.checkers.evidence.records import (
    COMPLETIONS,
    fields,
    is_client,
    key,
    ordered,
    seconds,
    text,
    time_of,
)
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record
from tetherbed.wire.catalog import REFUSED_UNRUN, is_idempotent

NAME = "no_double_execution"


@dataclass(slots=True)
class _Invoke:
    record: Record
    completion: Record | None = None
    executions: list[tuple[Request, str]] = field(default_factory=list)  # (frame, matched by)

    @property
    def kind(self) -> str:
        return self.record.f if isinstance(self.record.f, str) else ""


@dataclass(frozen=True, slots=True)
class _Match:
    invoke: _Invoke
    how: str


@dataclass(frozen=True, slots=True)
class _Delivery:
    request: Request
    session: str
    conn: str


def check(history: History) -> Verdict:
    findings = Findings(NAME)
    invokes = _invokes(history)
    deliveries = _deliveries(history)
    if not has_wire(history):
        return findings.verdict("", no_evidence="no wire recording of agent links")
    if not invokes and not deliveries:
        return findings.verdict("", no_evidence="no non-idempotent request was sent")
    shared: dict[tuple[int, ...], list[_Delivery]] = defaultdict(list)
    for delivery in deliveries:
        matched = _match(delivery, invokes)
        if isinstance(matched, _Match):
            matched.invoke.executions.append((delivery.request, matched.how))
        elif matched:
            shared[matched].append(delivery)
        else:
            _unmatched(delivery, findings)
    for invoke in invokes:
        if len(invoke.executions) > 1:
            _report(invoke, findings)
    for group, extra in shared.items():
        _report_shared([invokes[i] for i in group], extra, findings)
    executed = sum(len(i.executions) for i in invokes) + sum(len(d) for d in shared.values())
    return findings.verdict(
        f"{len(invokes)} non-idempotent request(s), {executed} execution(s) on the wire, "
        "none executed twice"
    )


def _invokes(history: History) -> list[_Invoke]:
    found: list[_Invoke] = []
    pending: dict[tuple[str, object], _Invoke] = {}
    for record in ordered(history):
        if not is_client(record.process):
            continue
        if record.type == "invoke" and not is_idempotent(record.f):
            invoke = _Invoke(record)
            found.append(invoke)
            pending[(record.process, record.req)] = invoke
        elif record.type in COMPLETIONS:
            invoke = pending.pop((record.process, record.req), None)
            if invoke is not None:
                invoke.completion = record
    return found


def _deliveries(history: History) -> list[_Delivery]:
    found: list[_Delivery] = []
    for connection in connections(history):
        session = connection.session
        if session is None or connection.is_control:
            continue
        for request in connection.requests:
            if is_idempotent(request.kind) or _refused_unrun(request):
                continue
            found.append(_Delivery(request, session, connection.conn))
    return found


def _refused_unrun(request: Request) -> bool:
    answer = fields(request.answer) if request.answer is not None else {}
    if answer.get("type") != "ERROR":
        return False
    return (answer.get("payload") or {}).get("code") in REFUSED_UNRUN


def _match(delivery: _Delivery, invokes: list[_Invoke]) -> _Match | tuple[int, ...]:
    """The invoke this delivery serves, or the indexes of every invoke it may serve."""
    request = delivery.request
    at = key(request.frame)
    candidates = [
        (i, invoke)
        for i, invoke in enumerate(invokes)
        if invoke.record.session == delivery.session
        and invoke.kind == request.kind
        and key(invoke.record) < at
    ]
    answer = request.answer
    if answer is not None:
        digest = text(fields(answer).get("digest"))
        by_answer = [
            (i, inv)
            for i, inv in candidates
            if inv.completion is not None
            and digest is not None
            and text(fields(inv.completion).get("digest")) == digest
            and key(inv.completion) >= key(answer)
        ]
        if len(by_answer) == 1:
            return _Match(by_answer[0][1], "the answer it got")
    by_id = [
        (i, inv) for i, inv in candidates if request.id is not None and inv.record.req == request.id
    ]
    if len(by_id) == 1:
        return _Match(by_id[0][1], "the request id")
    digest = request.digest
    by_payload = [
        (i, inv)
        for i, inv in candidates
        if digest is not None and text(fields(inv.record).get("digest")) == digest
    ]
    if len(by_payload) == 1:
        return _Match(by_payload[0][1], "the payload")
    return tuple(i for i, _ in by_payload)


def _unmatched(delivery: _Delivery, findings: Findings) -> None:
    request = delivery.request
    findings.undecided(
        f"{request.kind} {request.id} reached {delivery.conn} at "
        f"{seconds(time_of(request.frame))} but matches no client request of session "
        f"{delivery.session} (rewritten id and payload, and no answer to follow)",
        (request.frame, "a request no client invoke can be matched to"),
        (request.answer, "its answer"),
    )


def _report(invoke: _Invoke, findings: Findings) -> None:
    runs = invoke.executions
    record = invoke.record
    where = ", ".join(
        f"{fields(r.frame).get('id')}@{seconds(time_of(r.frame))} (by {how})" for r, how in runs
    )
    why = (
        f"{record.process} req {record.req}: non-idempotent {invoke.kind} reached the agent "
        f"{len(runs)} times: {where}"
    )
    evidence: list[tuple[Record | None, str]] = [(record, "the client request")]
    for n, (request, how) in enumerate(runs, 1):
        evidence.append((request.frame, f"execution {n} of {len(runs)} (matched by {how})"))
        evidence.append((request.answer, f"the agent's answer to execution {n}"))
    evidence.append((invoke.completion, "what the client was told"))
    findings.add(why, *evidence)


def _report_shared(group: list[_Invoke], extra: list[_Delivery], findings: Findings) -> None:
    """Identical requests: their executions together may not outnumber them."""
    runs = sum(len(i.executions) for i in group) + len(extra)
    if runs <= len(group):
        return
    first = group[0].record
    why = (
        f"{len(group)} identical {group[0].kind} request(s) of session {first.session} "
        f"reached agents {runs} times"
    )
    evidence: list[tuple[Record | None, str]] = [(i.record, "a client request") for i in group]
    frames = [r for i in group for r, _ in i.executions] + [d.request for d in extra]
    evidence += [(r.frame, "an execution") for r in sorted(frames, key=lambda r: key(r.frame))]
    findings.add(why, *evidence)
