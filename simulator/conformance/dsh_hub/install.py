"""The installer: join.sh and the server URL inside install commands.

Sections: §4.2 serverUrl resolution, §4.6 GET join.sh.
"""

from __future__ import annotations

from tetherbed.simulator.conformance.dsh_hub.environment import DshHubContext
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.dsh import constants as C

#: A well-formed authority a client made up, and one with a shell payload.
FORGED_HOST = "forged-install-host.example"
HOSTILE_HOST = "evil.example'; touch /tmp/pwned; echo '"


@case(
    "DSH-join-sh",
    level=Level.MUST,
    section="§4.6 GET /api/dsh-computers/join.sh?key=…",
    rule="join.sh of a valid key is a public plain-text script that starts with set -eu and "
    "holds the server URL and the key; an unknown key is 410.",
)
async def join_sh(ctx: DshHubContext) -> None:
    created = await ctx.browser(
        "POST", C.Route.KEYS, {"os": "linux", "replace": False, "label": None}
    )
    value = created.json() or {}
    key, server = value.get("key"), value.get("serverUrl")
    if created.status != 200 or not isinstance(key, str):
        ctx.depart(f"POST /keys: {created.describe()}")
    script = await ctx.browser("GET", C.Route.JOIN_SH, query=f"?key={key}", admitted=False)
    ctx.require(script.status == 200, f"join.sh: HTTP {script.status}")
    ctx.require(
        script.headers.get("content-type", "").startswith("text/plain"),
        f"content-type {script.headers.get('content-type')!r}",
    )
    ctx.require("set -eu" in script.text, "no `set -eu`")
    ctx.require(str(server) in script.text, f"the script does not name {server}")
    ctx.require(key in script.text, "the script does not carry the key")
    unknown = await ctx.browser(
        "GET", C.Route.JOIN_SH, query="?key=dshc_" + "D" * 43, admitted=False
    )
    ctx.require(unknown.status == 410, f"join.sh of an unknown key: HTTP {unknown.status}")


@case(
    "DSH-install-url-forwarded",
    level=Level.MUST,
    section="§4.2 serverUrl is the externally reachable base (forwarded headers)",
    rule="Forwarded headers a client sends never put a malformed authority in the install "
    "command, and — under the request-only reading — no forged host at all (profile "
    "install-url-source).",
    reads=("install-url-source",),
)
async def install_url_forwarded(ctx: DshHubContext) -> None:
    strict = ctx.reading("install-url-source") == "request-only"
    for host in (FORGED_HOST, HOSTILE_HOST):
        headers = {
            "X-Forwarded-Proto": "https",
            "X-Forwarded-Host": host,
            "Forwarded": f'proto=https;host="{host}"',
        }
        answer = await ctx.browser(
            "POST",
            C.Route.KEYS,
            {"os": "linux", "replace": False, "label": None},
            headers=headers,
        )
        value = answer.json() or {}
        if answer.status != 200:
            ctx.depart(f"POST /keys with forwarded headers: {answer.describe()}")
        text = " ".join(str(value.get(n)) for n in ("serverUrl", "command", "installUrl"))
        forged = "evil.example" in text if host == HOSTILE_HOST else host in text
        if forged and (strict or host == HOSTILE_HOST):
            ctx.depart(f"a forwarded host reached the install command: {value.get('command')!r}")
        script = await ctx.browser(
            "GET",
            C.Route.JOIN_SH,
            query=f"?key={value.get('key')}",
            headers=headers,
            admitted=False,
        )
        bad = "evil.example" if host == HOSTILE_HOST else host
        if bad in script.text and (strict or host == HOSTILE_HOST):
            ctx.depart("a forwarded host reached join.sh's server URL")
