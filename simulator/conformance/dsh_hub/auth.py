"""Authentication: agent tokens on the agent routes, the gate on the browser routes,
and tokens at rest.

Sections: §3 Auth (Bearer on every route but enroll, join.sh, agent.mjs,
health), §2 Rules › Agent token (the server keeps only sha256(token)), §4
(the host request gate: `{ "error": "unadmitted" }`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tetherbed.simulator.conformance.dsh_hub.environment import DshHubContext
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.dsh import constants as C

#: Files bigger than this in the hub's storage are not scanned.
SCAN_LIMIT = 64 * C.MiB


@case(
    "DSH-auth-bearer-required",
    level=Level.MUST,
    section="§3 Auth: authorization: Bearer <token>",
    rule="events, results, results/chunk and heartbeat refuse a request without a token or "
    "with a wrong one (401), and never open a stream for it.",
)
async def bearer_required(ctx: DshHubContext) -> None:
    raw = ctx.agent()
    wrong = "dshc_" + "C" * 43
    for token, what in ((None, "no token"), (wrong, "a wrong token")):
        stream = await raw.http.open_stream(C.url(C.Route.EVENTS), token)
        ctx.require(stream.status == 401, f"the events stream with {what}: HTTP {stream.status}")
        for route in (C.Route.RESULTS, C.Route.RESULTS_CHUNK, C.Route.HEARTBEAT):
            body = {"requestId": "req_0000000000000000", "seq": 0, "meta": {}}
            answer = await raw.http.request("POST", C.url(route), body=body, token=token)
            ctx.require(answer.status == 401, f"POST {route} with {what}: {answer.describe()}")


@case(
    "DSH-auth-token-at-rest",
    level=Level.MUST,
    section="§2 Rules › Agent token: the server keeps only sha256(token)",
    rule="After enroll and a stream, no file of the hub's storage holds the agent token "
    "itself (its SHA-256 digest is what is kept).",
    needs={"state"},
)
async def token_at_rest(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    assert raw.token is not None
    folder = ctx.environment.state_dir
    assert folder is not None
    found = await asyncio.to_thread(_files_holding, folder, raw.token.encode())
    ctx.observe(f"scanned the hub's storage {folder}")
    if found:
        ctx.depart(f"the token is stored in clear in {found[0]}")


def _files_holding(folder: Path, needle: bytes) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*")):
        try:
            if path.is_file() and path.stat().st_size <= SCAN_LIMIT and needle in path.read_bytes():
                found.append(path.name)
        except OSError:
            continue
    return found


@case(
    "DSH-browser-gate",
    level=Level.MUST,
    section="§4 Browser → host API: consult the host request gate",
    rule="A browser route asked without what the gate admits (and from a foreign Origin) "
    "is refused with a JSON body {error: unadmitted}.",
)
async def browser_gate(ctx: DshHubContext) -> None:
    foreign = {"Origin": "https://elsewhere.example"}
    for method, route, body in (
        ("GET", C.Route.STATE, None),
        ("POST", C.Route.KEYS, {"os": "linux"}),
        ("POST", C.Route.DELETE, {"id": "cmp_000000000000"}),
    ):
        answer = await ctx.browser(method, route, body, headers=foreign, admitted=False)
        ctx.require(
            answer.status >= 400 and answer.error_code() == C.ErrorCode.UNADMITTED,
            f"{method} {route} without admission: {answer.describe()}",
        )
