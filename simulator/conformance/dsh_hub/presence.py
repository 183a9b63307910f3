"""Presence and the browser's changes to a computer: online exactly while it streams;
rename pushes config; delete ends the stream and kills the token.

Sections: §2 Rules › Presence, §4.1 state, §4.4 delete, §4.5 rename, §4.8
health, §11.6.6 (revoke kicks the stream).
"""

from __future__ import annotations

import asyncio

from tetherbed.simulator.conformance.dsh_hub.environment import DshHubContext
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.dsh import constants as C

#: Seconds the hub gets to notice a closed stream (the FIN has to reach it).
NOTICE = 3.0


async def offline_within(ctx: DshHubContext, computer_id: str, seconds: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        if await ctx.online(computer_id) is False:
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.2)


@case(
    "DSH-presence-stream",
    level=Level.MUST,
    section="§2 Rules › Presence: online exactly while it holds an open SSE stream",
    rule="A computer is online while its stream is open and offline once it closed; a "
    "heartbeat after that does not make it online again.",
)
async def presence_stream(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    assert raw.stream is not None and raw.computer_id is not None
    ctx.require(await ctx.online(raw.computer_id) is True, "not online while its stream is open")
    await raw.stream.close()
    ctx.require(
        await offline_within(ctx, raw.computer_id, NOTICE),
        f"still online {NOTICE:g} s after its stream closed",
    )
    answer = await raw.post(C.Route.HEARTBEAT, {"meta": {}})
    ctx.observe(f"a heartbeat without a stream: HTTP {answer.status}")
    ctx.require(
        await ctx.online(raw.computer_id) is False,
        "a heartbeat without a stream made the computer online",
    )


@case(
    "DSH-presence-health",
    level=Level.MUST,
    section="§4.8 GET /api/dsh-computers/health",
    rule="health is public and answers {ok: true, version, computers, online} with counts; "
    "online counts a streaming computer.",
)
async def presence_health(ctx: DshHubContext) -> None:
    await ctx.enrolled()
    answer = await ctx.browser("GET", C.Route.HEALTH, admitted=False)
    value = answer.json()
    ctx.require(answer.status == 200 and isinstance(value, dict), f"got {answer.describe()}")
    ctx.require(value.get("ok") is True, f"ok is {value.get('ok')!r}")
    ctx.require(isinstance(value.get("version"), str), f"version {value.get('version')!r}")
    for name in ("computers", "online"):
        ctx.require(isinstance(value.get(name), int), f"{name} {value.get(name)!r}")
    ctx.require(value["online"] >= 1, "online is 0 while a computer streams")


@case(
    "DSH-rename-config",
    level=Level.MUST,
    section="§4.5 POST /api/dsh-computers/rename",
    rule="rename trims the name, answers {ok: true, name}, and pushes a config event with "
    "the name to the live stream.",
)
async def rename_config(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    assert raw.stream is not None
    before = len(raw.stream.events)
    answer = await ctx.browser(
        "POST", C.Route.RENAME, {"id": raw.computer_id, "name": "  Desk box  "}
    )
    value = answer.json()
    ctx.require(answer.status == 200 and isinstance(value, dict), f"got {answer.describe()}")
    ctx.require(value.get("ok") is True and value.get("name") == "Desk box", f"got {value!r}")
    config = await raw.stream.next_event(C.Event.CONFIG, 5, after=before)
    ctx.require(config is not None, "no config event within 5 s of the rename")
    assert config is not None
    ctx.require((config.data() or {}).get("name") == "Desk box", f"config data {config.data()!r}")


@case(
    "DSH-rename-bad-name",
    level=Level.MUST,
    section="§4.5 (1–64 visible chars, trimmed)",
    rule="A blank name, or one of 65 characters, is refused (4xx) and changes nothing.",
)
async def rename_bad_name(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled(connect=False)
    row = await ctx.computer_view(raw.computer_id or "")
    for name in ("   ", "n" * (C.NAME_MAX_CHARS + 1)):
        answer = await ctx.browser("POST", C.Route.RENAME, {"id": raw.computer_id, "name": name})
        ctx.require(
            400 <= answer.status < 500, f"the name {name[:8]!r}… was answered {answer.describe()}"
        )
    after = await ctx.computer_view(raw.computer_id or "")
    if row is not None and after is not None:
        ctx.require(after.get("name") == row.get("name"), f"the name became {after.get('name')!r}")


@case(
    "DSH-delete-kicks",
    level=Level.MUST,
    section="§4.4 POST /api/dsh-computers/delete; §11.6.6 Revoke kicks the stream",
    rule="delete answers {ok: true}, ends the live stream, and the token is dead: a new "
    "stream with it is refused with 401.",
)
async def delete_kicks(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    assert raw.stream is not None
    first = raw.stream
    answer = await ctx.browser("POST", C.Route.DELETE, {"id": raw.computer_id})
    value = answer.json()
    ctx.require(
        answer.status == 200 and isinstance(value, dict) and value.get("ok") is True,
        f"delete was answered {answer.describe()}",
    )
    ctx.require(await first.wait_end(5), "the stream was still open 5 s after delete")
    again = await raw.connect()
    ctx.require(
        again.status == 401, f"a new stream with the deleted computer's token: HTTP {again.status}"
    )
    ctx.require(
        await ctx.computer_view(raw.computer_id or "") is None, "the computer is still listed"
    )


@case(
    "DSH-delete-unknown",
    level=Level.MUST,
    section="§4.4 Unknown id → 404",
    rule="delete of an unknown id is 404 {error: not-found}.",
)
async def delete_unknown(ctx: DshHubContext) -> None:
    answer = await ctx.browser("POST", C.Route.DELETE, {"id": "cmp_0123456789ab"})
    ctx.require(
        answer.status == 404 and answer.error_code() == C.ErrorCode.NOT_FOUND,
        f"got {answer.describe()}",
    )
