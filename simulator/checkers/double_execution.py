"""no_double_execution: a non-idempotent request is executed at most once.

Why: the spec's idempotency table forbids the platform to re-issue
EXECUTE_COMMAND, FILE_MOVE, INPUT_ACTION and the other state-changing kinds —
a command run twice after a dropped connection may push twice or delete
twice. The hub retries what is safe (reads, writes) and answers
OUTCOME_UNKNOWN for the rest; this checker verifies it never re-sent one.

How: every agent `exec` event carries the digest of the request payload bytes
the client sent (the hub relays them verbatim), so executions of one client
request share a digest, whichever agent ran them. For kinds that
`wire.catalog.is_idempotent` calls non-idempotent (unknown kinds included),
a digest may be executed at most as many times as clients invoked a request
with that digest (at least once): a scenario that deliberately sends the same
command twice has two invokes and may see two executions. Idempotent kinds may
repeat freely (retries). Execs without a digest cannot be matched and are
counted in the summary only.
"""

from __future__ import annotations

from collections import defaultdict

from tetherbed.simulator.checkers.evidence.records import fields, is_agent, is_event, ordered, text
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record
from tetherbed.wire.catalog import is_idempotent

NAME = "no_double_execution"


def check(history: History) -> Verdict:
    findings = Findings(NAME)
    records = ordered(history)
    invokes: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        if record.type == "invoke":
            digest = text(fields(record).get("digest"))
            if digest is not None:
                invokes[digest].append(record)
    execs: dict[str, list[Record]] = defaultdict(list)
    undigested = 0
    for record in records:
        if not (is_agent(record.process) and is_event(record, "exec")):
            continue
        digest = text(fields(record).get("digest"))
        if digest is None:
            undigested += 1
        else:
            execs[digest].append(record)
    checked = 0
    for digest in sorted(execs):
        runs = execs[digest]
        kind = _kind(runs, invokes.get(digest, []))
        if is_idempotent(kind):
            continue
        checked += 1
        allowed = max(len(invokes.get(digest, [])), 1)
        if len(runs) <= allowed:
            continue
        where = ", ".join(f"{r.process}@{r.time:.3f}s" for r in runs)
        why = (
            f"non-idempotent {kind or '(unknown kind)'} with digest {digest} executed "
            f"{len(runs)} times for {allowed} request(s): {where}"
        )
        evidence: list[tuple[Record | None, str]] = [
            (r, f"execution {n + 1} of {len(runs)}") for n, r in enumerate(runs)
        ]
        evidence += [(r, "the client request") for r in invokes.get(digest, [])]
        findings.add(why, *evidence)
    note = f"; {undigested} exec(s) without a digest" if undigested else ""
    return findings.verdict(
        f"{checked} non-idempotent request(s) executed, none more than requested{note}"
    )


def _kind(runs: list[Record], invokes: list[Record]) -> str:
    """The message type: from the agent's exec, else from the client's invoke."""
    for record in runs:
        kind = text(fields(record).get("kind"))
        if kind:
            return kind
    for record in invokes:
        if isinstance(record.f, str) and record.f:
            return record.f
    return ""
