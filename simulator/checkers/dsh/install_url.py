"""dsh_install_url: the install command never names a host a client chose (§4.2, §4.6).

Why: the one-line command (`curl … | sh`) that /keys returns and join.sh
repeats runs whatever the named server sends, as the user, on the user's
machine. If a forwarded `Host` or `X-Forwarded-Host` a client sends decides
that server, whoever can send a request through the hub's proxy chooses
what every new machine runs. (§4.2 trusts those headers; Tetherbed's
reading does not — docs/spec-notes.md.)

For each `create_key` a dsh client sent with a forged forwarded host: the
answer's `serverUrl`, `installUrl` and `command`, and every URL in the
join.sh the client then fetched with the same headers, must not name that
host. No such call is no evidence (unknown).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from tetherbed.simulator.checkers.dsh.evidence import read
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History

NAME = "dsh_install_url"


def check(history: History) -> Verdict:
    findings = Findings(NAME)
    evidence = read(history)
    judged = 0
    for call in evidence.calls_of("create_key"):
        forged = call.asked.get("forwarded_host")
        if not isinstance(forged, str) or call.completion is None:
            continue
        if call.completion.type != "ok":
            continue
        judged += 1
        value = call.value
        urls: list[Any] = [value.get("serverUrl"), value.get("installUrl"), value.get("command")]
        joined = value.get("joinServerUrls")
        urls += joined if isinstance(joined, list) else []
        named = sorted({u for u in urls if isinstance(u, str) and _names(u, forged)})
        if named:
            findings.add(
                f"{call.invoke.process} sent a forwarded host {forged!r} and the install "
                f"command follows it: {', '.join(named)}",
                (call.invoke, "the request with forged headers"),
                (call.completion, "the answer"),
            )
    if not judged:
        return findings.verdict("", no_evidence="no create_key sent a forwarded host")
    return findings.verdict(f"{judged} key(s) asked for with a forged host: none followed it")


def _names(text: str, host: str) -> bool:
    """Whether a URL (or a command holding one) points at `host`."""
    for word in text.replace("'", " ").replace('"', " ").split():
        if "://" not in word:
            continue
        netloc = urllib.parse.urlsplit(word).netloc.lower()
        if netloc == host.lower() or netloc.split(":", 1)[0] == host.lower().split(":", 1)[0]:
            return True
    return False
