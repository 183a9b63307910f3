"""dsh_single_use_keys: an enrollment key enrolls one machine, once (§2, §3.1).

Why: the key is printed in a one-line install command that ends up in shell
histories, chat logs and screenshots. A key that works twice lets whoever
sees the command join a machine of their own to the user's account — and
get the commands the model sends there.

From the wire, by the key's digest in each enroll request: at most one
enroll per key is answered 200, and every later one is refused with 409
`key-used`. No key presented twice is no evidence (unknown).
"""

from __future__ import annotations

from tetherbed.simulator.checkers.dsh.evidence import Exchange, read
from tetherbed.simulator.checkers.evidence.records import seconds
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History
from tetherbed.wire.dsh import constants as C

NAME = "dsh_single_use_keys"


def check(history: History) -> Verdict:
    findings = Findings(NAME)
    evidence = read(history)
    by_key: dict[str, list[Exchange]] = {}
    for exchange in evidence.exchanges:
        digest = exchange.body.get("keyDigest")
        if exchange.route == C.Route.ENROLL and isinstance(digest, str):
            by_key.setdefault(digest, []).append(exchange)
    reused = 0
    for digest, enrolls in by_key.items():
        answered = [e for e in enrolls if e.response is not None]
        if len(answered) < 2:
            continue
        reused += 1
        first = next((e for e in answered if e.status == 200), None)
        if first is None:
            continue
        for later in answered:
            if later is first or later.request.index < first.request.index:
                continue
            error = later.response.value.get("error") if later.response else None
            if later.status == 200:
                findings.add(
                    f"key {digest} enrolled {first.agent} at {seconds(first.request.time)} and "
                    f"again {later.agent} at {seconds(later.request.time)}",
                    (first.response, "the first enrollment"),
                    (later.response, "the second enrollment"),
                )
            elif later.status != 409 or error != C.ErrorCode.KEY_USED:
                findings.add(
                    f"key {digest}, used by {first.agent}, was refused to {later.agent} with "
                    f"{later.status} {error!r}, not 409 {C.ErrorCode.KEY_USED!r}",
                    (first.response, "the enrollment"),
                    (later.response, "the refusal"),
                )
    if not reused:
        return findings.verdict("", no_evidence="no enrollment key was presented twice")
    return findings.verdict(f"{reused} key(s) presented again, each refused as used")
