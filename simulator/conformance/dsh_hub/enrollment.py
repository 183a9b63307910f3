"""Enrollment keys: creating them, spending them once, refusing the rest.

Sections: §2 (keys: single use, TTL), §3.1 (POST /agent/enroll), §4.2 (POST
/keys: one pending key at a time), §4.3 (GET /key-status).
"""

from __future__ import annotations

import asyncio

from tetherbed.simulator.conformance.dsh_hub.environment import DshHubContext
from tetherbed.simulator.conformance.dsh_hub.raw_agent import enroll_body
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh.credentials import is_computer_id, is_credential

E = C.ErrorCode


def refused_with(ctx: DshHubContext, answer, status: int, code: str, what: str) -> None:  # type: ignore[no-untyped-def]
    ctx.require(
        answer.status == status and answer.error_code() == code,
        f"{what} was answered {answer.describe()}, not {status} {{error: {code}}}",
    )


@case(
    "DSH-enroll-answer",
    level=Level.MUST,
    section="§3.1 POST /agent/enroll",
    rule="A fresh key enrolls: 200 with computerId (cmp_ and 12 lowercase hex), token (dshc_ "
    "and 43 base64url characters), name and serverUrl, as JSON with cache-control no-store.",
)
async def enroll_answer(ctx: DshHubContext) -> None:
    raw = ctx.agent()
    answer = await raw.enroll(await ctx.new_key())
    value = answer.json()
    ctx.require(answer.status == 200 and isinstance(value, dict), f"got {answer.describe()}")
    ctx.require(is_computer_id(value.get("computerId")), f"computerId {value.get('computerId')!r}")
    ctx.require(is_credential(value.get("token")), "the token is not dshc_ + 43 base64url chars")
    ctx.require(isinstance(value.get("name"), str) and value["name"], "no name")
    ctx.require(
        isinstance(value.get("serverUrl"), str) and value["serverUrl"].startswith("http"),
        f"serverUrl {value.get('serverUrl')!r}",
    )
    ctx.require(
        answer.headers.get("content-type", "").startswith("application/json"),
        f"content-type {answer.headers.get('content-type')!r}",
    )
    ctx.require(
        "no-store" in answer.headers.get("cache-control", ""),
        f"cache-control {answer.headers.get('cache-control')!r}",
    )


@case(
    "DSH-enroll-key-single-use",
    level=Level.MUST,
    section="§2 Rules › Enrollment key; §3.1 409 key-used; §11.6.4",
    rule="An enrollment key enrolls one machine: once spent, enroll with it is 409 "
    "{error: key-used} (spent at enroll or at the first stream: profile key-used-when).",
    reads=("key-used-when",),
)
async def key_single_use(ctx: DshHubContext) -> None:
    reading = ctx.reading("key-used-when")
    first = ctx.agent()
    key = await ctx.new_key()
    answer = await first.enroll(key)
    ctx.require(answer.status == 200, f"the first enroll was answered {answer.describe()}")
    second = ctx.agent()
    if reading == "enroll":
        refused_with(ctx, await second.enroll(key), 409, E.KEY_USED, "a second enroll")
        return
    before = await second.enroll(key)
    ctx.observe(f"a second enroll before the first stream: HTTP {before.status}")
    await ctx.streaming(first)
    third = ctx.agent()
    refused_with(ctx, await third.enroll(key), 409, E.KEY_USED, "enroll after the first stream")


@case(
    "DSH-enroll-unknown-key",
    level=Level.MUST,
    section="§3.1 401 invalid-key",
    rule="An unknown key is 401 {error: invalid-key}.",
)
async def unknown_key(ctx: DshHubContext) -> None:
    made_up = "dshc_" + "A" * 43
    refused_with(ctx, await ctx.agent().enroll(made_up), 401, E.INVALID_KEY, "an unknown key")


@case(
    "DSH-enroll-expired-key",
    level=Level.MUST,
    section="§2 Rules › TTL; §3.1 410 key-expired",
    rule="A key past its expiresAt is 410 {error: key-expired}.",
    needs={"short_keys"},
)
async def expired_key(ctx: DshHubContext) -> None:
    key = await ctx.new_key()
    await asyncio.sleep(ctx.key_ttl_s + 1.5)
    refused_with(ctx, await ctx.agent().enroll(key), 410, E.KEY_EXPIRED, "an expired key")


@case(
    "DSH-enroll-bad-request",
    level=Level.MUST,
    section="§3.1 400 bad-request",
    rule="A body that is not an enroll request is 400 {error: bad-request}.",
)
async def bad_request(ctx: DshHubContext) -> None:
    raw = ctx.agent()
    refused_with(
        ctx, await raw.enroll("", body={"hello": 1}), 400, E.BAD_REQUEST, "a body without key"
    )


@case(
    "DSH-enroll-body-limit",
    level=Level.MUST,
    section="§3.1 Request body (max 16 KiB)",
    rule="An enroll body over 16 KiB is refused (4xx), and does not enroll.",
)
async def body_limit(ctx: DshHubContext) -> None:
    raw = ctx.agent()
    key = await ctx.new_key()
    body = enroll_body(key, raw.name)
    body["machine"]["cpuModel"] = "x" * (C.ENROLL_BODY_LIMIT + 1024)
    answer = await raw.enroll(key, body=body)
    ctx.require(400 <= answer.status < 500, f"a 17 KiB body was answered {answer.describe()}")
    again = await ctx.agent().enroll(key)
    ctx.require(again.status == 200, f"the key no longer enrolls: {again.describe()}")


@case(
    "DSH-keys-one-pending",
    level=Level.MUST,
    section="§4.2 Only one pending key at a time",
    rule="Creating a key invalidates the earlier pending one: it no longer enrolls.",
)
async def one_pending(ctx: DshHubContext) -> None:
    older = await ctx.new_key()
    await ctx.new_key()
    answer = await ctx.agent().enroll(older)
    ctx.require(answer.status != 200, "the earlier pending key still enrolled a machine")
    ctx.observe(f"the earlier key: {answer.describe()}")


@case(
    "DSH-keys-answer",
    level=Level.MUST,
    section="§4.2 POST /api/dsh-computers/keys",
    rule="POST /keys answers key, os, expiresAt, serverUrl, command (curl … | sh of "
    "installUrl) and installUrl (serverUrl + /api/dsh-computers/join.sh?key=KEY).",
)
async def keys_answer(ctx: DshHubContext) -> None:
    answer = await ctx.browser(
        "POST", C.Route.KEYS, {"os": "linux", "replace": False, "label": None}
    )
    value = answer.json()
    ctx.require(answer.status == 200 and isinstance(value, dict), f"got {answer.describe()}")
    key, server = value.get("key"), value.get("serverUrl")
    ctx.require(is_credential(key), "the key is not dshc_ + 43 base64url chars")
    ctx.require(isinstance(server, str) and server.startswith("http"), f"serverUrl {server!r}")
    for name in ("os", "expiresAt", "command", "installUrl"):
        ctx.require(isinstance(value.get(name), str) and value[name], f"no {name}")
    expected = f"{server}{C.url(C.Route.JOIN_SH)}?key={key}"
    ctx.require(value["installUrl"] == expected, "installUrl is not serverUrl/…/join.sh?key=KEY")
    ctx.require(
        value["installUrl"] in value["command"]
        and "curl" in value["command"]
        and value["command"].rstrip().endswith("| sh"),
        "command is not `curl … installUrl … | sh`",
    )


@case(
    "DSH-key-status",
    level=Level.MUST,
    section="§4.3 GET /api/dsh-computers/key-status",
    rule="key-status says waiting for a fresh key, connected (with the computer) once its "
    "machine streams, unknown for a key it never made.",
)
async def key_status(ctx: DshHubContext) -> None:
    async def status(key: str) -> dict:
        answer = await ctx.browser("GET", C.Route.KEY_STATUS, query=f"?key={key}")
        value = answer.json()
        ctx.require(answer.status == 200 and isinstance(value, dict), f"got {answer.describe()}")
        return value

    key = await ctx.new_key()
    waiting = await status(key)
    ctx.require(waiting.get("status") == "waiting", f"a fresh key is {waiting.get('status')!r}")
    raw = ctx.agent()
    answer = await raw.enroll(key)
    ctx.require(answer.status == 200, f"enroll was answered {answer.describe()}")
    await ctx.streaming(raw)
    connected = await status(key)
    computer = connected.get("computer") if isinstance(connected.get("computer"), dict) else {}
    ctx.require(
        connected.get("status") == "connected",
        f"a key whose machine streams is {connected.get('status')!r}",
    )
    ctx.require(computer.get("id") == raw.computer_id, f"its computer is {computer!r}")
    unknown = await status("dshc_" + "B" * 43)
    ctx.require(unknown.get("status") == "unknown", f"a made-up key is {unknown.get('status')!r}")
