"""exactly_one_answer: every request gets one terminal answer, and only one.

Why: a client that never hears back waits forever (the orphaned-request bug of
silent last-write-wins); a client that hears twice may act twice. The hub must
answer each request exactly once — with the result, an error meaning "it did
not happen" (fail), or OUTCOME_UNKNOWN / AGENT_DISCONNECTED when it cannot
know (info). Counting info as an answer is deliberate: it is honest.

Per client process, by `req`:

- an invoke without any completion by the end of the history is a violation
  (except, with option `grace`, invokes made in the last `grace` seconds of
  the run, which may legitimately still be in flight; default 0: none);
- a second completion for one req is a violation;
- a completion with no earlier invoke of that req in that process is a
  violation (no_crossed_answers tells whether it belongs to someone else);
- an invoke that reuses a req still in use, or has no req, is a violation: the
  answer could not be matched to it.
"""

from __future__ import annotations

from typing import Any

from tetherbed.simulator.checkers.evidence.records import COMPLETIONS, ordered, seconds, time_of
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record

NAME = "exactly_one_answer"


def check(history: History, *, grace: float = 0.0) -> Verdict:
    findings = Findings(NAME)
    records = ordered(history)
    end = max((time_of(r) for r in records), default=0.0)
    invoked: dict[tuple[str, Any], Record] = {}
    answered: dict[tuple[str, Any], Record] = {}
    invokes = 0
    for record in records:
        if record.type == "invoke":
            invokes += 1
            if not _usable(record.req):
                findings.add(
                    f"{record.process} invoked {record.f} without a req: "
                    "no answer can be matched to it",
                    (record, "invoke without req"),
                )
                continue
            slot = (record.process, record.req)
            earlier = invoked.get(slot)
            if earlier is not None and slot not in answered:
                findings.add(
                    f"{record.process} reused req {record.req} while it was in flight",
                    (earlier, "first invoke"),
                    (record, "second invoke with the same req"),
                )
            invoked[slot] = record
            answered.pop(slot, None)
        elif record.type in COMPLETIONS:
            slot = (record.process, record.req)
            invoke = invoked.get(slot) if _usable(record.req) else None
            if invoke is None:
                findings.add(
                    f"{record.process} got a {record.type} for req {record.req} it never invoked",
                    (record, "completion without invoke"),
                )
                continue
            first = answered.get(slot)
            if first is not None:
                findings.add(
                    f"{record.process} req {record.req} ({invoke.f}) was answered twice: "
                    f"{first.type} at {seconds(time_of(first))}, "
                    f"{record.type} at {seconds(time_of(record))}",
                    (invoke, "the request"),
                    (first, "first answer"),
                    (record, "second answer"),
                )
                continue
            answered[slot] = record
    limit = end - max(float(grace), 0.0)
    for slot, invoke in sorted(invoked.items(), key=lambda item: item[1].index):
        if slot in answered:
            continue
        if grace > 0 and time_of(invoke) > limit:
            continue
        findings.add(
            f"{invoke.process} req {invoke.req} ({invoke.f}, invoked at "
            f"{seconds(time_of(invoke))}) never got an answer",
            (invoke, "invoke without completion"),
        )
    answers = sum(1 for r in records if r.type in COMPLETIONS)
    no_evidence = "no client request in the history" if not invokes and not answers else None
    return findings.verdict(
        f"{invokes} request(s), each answered exactly once", no_evidence=no_evidence
    )


def _usable(req: Any) -> bool:
    return isinstance(req, str | int) and not isinstance(req, bool)
