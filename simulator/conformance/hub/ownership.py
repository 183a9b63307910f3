"""Session ownership: first wins, same-machine takeover, different-machine rejection,
revocation (4428) and shutdown (4429).

Sections: Session ownership (Policy, SESSION_REVOKED, WS close-code table).
The 4427 texts disagree (docs/spec-notes.md › Session ownership): the
profile `ownership-4427` says which reading the hub is held to.
"""

from __future__ import annotations

import asyncio
import json
import signal

from tetherbed.simulator.conformance.hub.environment import HubContext
from tetherbed.simulator.conformance.hub.raw_agent import RawAgent, UpgradeRefused
from tetherbed.simulator.conformance.hub.relay import served_session, stat_payload
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.profiles import Ambiguity, declare
from tetherbed.simulator.conformance.recorded_socket import Ending
from tetherbed.simulator.conformance.registry import case
from tetherbed.simulator.targets import NotSupported

POLICY = "Session ownership › Policy"
TABLE = "Session ownership › WS close-code table"

declare(
    Ambiguity(
        name="ownership-4427",
        suites=("hub",),
        question="The policy rejects a second shim from a DIFFERENT machine with 4427; the "
        "close-code table says 4427 evicts the OLD connection when the same machine takes over.",
        readings={
            "reference": "same machine: SESSION_REVOKED then 4427 to the old one; different "
            "machine: 4427 to the newcomer, the owner untouched",
            "evict-old": "4427 always goes to the old connection, whoever the newcomer is",
        },
        default="reference",
        notes="docs/spec-notes.md › Session ownership (4427)",
    )
)
declare(
    Ambiguity(
        name="ownership-after-drop",
        suites=("hub",),
        question="Ownership lasts 'until it explicitly disconnects': whether a connection that "
        "merely dropped still holds the session against another machine is not said.",
        readings={
            "either": "report which the hub does",
            "reserved": "the session stays reserved for the dropped machine for a while",
            "released": "a drop releases the session at once",
        },
        default="either",
        notes="docs/spec-notes.md › Session ownership (what 'explicitly disconnects' means)",
    )
)


async def _ended(raw: RawAgent, timeout: float = 5.0) -> Ending | None:
    assert raw.socket is not None
    return await raw.socket.wait_closed(timeout)


def _structured(ending: Ending) -> bool:
    try:
        return isinstance(json.loads(ending.reason), dict)
    except ValueError:
        return False


@case(
    "LE-own-4427-different-machine",
    level=Level.MUST,
    section=POLICY,
    rule="A second shim from a different machine does not take the session: it is closed with "
    "4427 and a structured reason, the first keeps it (`reference`); or, under `evict-old`, "
    "the old connection is closed with 4427.",
    reads=("ownership-4427",),
)
async def different_machine(ctx: HubContext) -> None:
    served = await served_session(ctx, machine="machine-a")
    newcomer = ctx.agent(served.session, machine="machine-b")
    answer = await newcomer.connect()
    if ctx.reading("ownership-4427") == "evict-old":
        ended = await _ended(served.agent)
        ctx.require(
            ended is not None and ended.code == 4427, "the old connection was not closed with 4427"
        )
        return
    ctx.require(answer is None or answer.type != "HELLO_ACK", "the other machine got HELLO_ACK")
    ended = await _ended(newcomer)
    ctx.require(ended is not None, "the other machine's connection stayed open")
    ctx.require(ended.code == 4427, f"the other machine was closed with {ended.code}, not 4427")
    ctx.require(_structured(ended), f"the 4427 reason is not structured: {ended.reason!r}")
    assert served.agent.socket is not None
    ctx.require(not served.agent.socket.closed, "the owner lost its connection")
    ctx.require(not served.agent.socket.frames(lambda f: f.type == "SESSION_REVOKED"),
                "the owner got SESSION_REVOKED")  # fmt: skip
    await served.client.send("FILE_STAT", stat_payload())
    ctx.require(
        await served.agent.next_request(10) is not None, "the owner no longer gets requests"
    )


@case(
    "LE-own-4427-same-machine",
    level=Level.MUST,
    section=f"{POLICY}; {TABLE} (4427); SESSION_REVOKED",
    rule="A second shim from the same machine takes over: the old one gets SESSION_REVOKED "
    "(reason another_shim_connected) and close 4427, the new one HELLO_ACK and the requests.",
)
async def same_machine(ctx: HubContext) -> None:
    served = await served_session(ctx, machine="machine-a")
    newcomer = await ctx.serving_agent(served.session, machine="machine-a")
    ended = await _ended(served.agent)
    ctx.require(ended is not None, "the old connection stayed open after a same-machine takeover")
    ctx.require(ended.code == 4427, f"the old connection was closed with {ended.code}, not 4427")
    assert served.agent.socket is not None
    revoked = served.agent.socket.frames(lambda f: f.type == "SESSION_REVOKED")
    ctx.require(revoked, "the old connection got no SESSION_REVOKED")
    reason = revoked[0].payload.get("reason")
    ctx.require(reason == "another_shim_connected", f"SESSION_REVOKED reason is {reason!r}")
    request_id = await served.client.send("FILE_STAT", stat_payload())
    ctx.require(
        await newcomer.next_request(10) is not None, f"the new owner did not get {request_id}"
    )


@case(
    "LE-own-explicit-disconnect-releases",
    level=Level.MUST,
    section=POLICY,
    rule="The first shim owns the session until it explicitly disconnects: after its clean "
    "close another machine may take the session.",
)
async def explicit_release(ctx: HubContext) -> None:
    session = ctx.new_session()
    first = await ctx.serving_agent(session, machine="machine-a")
    await first.close(1000, "bye")
    await asyncio.sleep(0.5)
    await ctx.serving_agent(session, machine="machine-b")


@case(
    "LE-own-after-drop",
    level=Level.INFO,
    section=POLICY,
    rule="Whether a session whose shim dropped (no Close) stays reserved for that machine "
    "against another one: read by the `ownership-after-drop` profile.",
    reads=("ownership-after-drop",),
)
async def after_drop(ctx: HubContext) -> None:
    session = ctx.new_session()
    first = await ctx.serving_agent(session, machine="machine-a")
    first.drop()
    await asyncio.sleep(0.5)
    other = ctx.agent(session, machine="machine-b")
    answer = await other.connect()
    accepted = answer is not None and answer.type == "HELLO_ACK"
    ctx.observe("another machine was " + ("accepted" if accepted else "refused") + " after a drop")
    reading = ctx.reading("ownership-after-drop")
    if reading == "reserved":
        ctx.require(not accepted, "the session was not reserved for the dropped machine")
    elif reading == "released":
        ctx.require(accepted, "the session stayed reserved after a drop")


@case(
    "LE-hub-revoke-4428",
    level=Level.MUST,
    section=f"{TABLE} (4428); SESSION_REVOKED",
    rule="When the user revokes the session the platform closes its shim with 4428 (a "
    "SESSION_REVOKED before it names reason user_revoked).",
)
async def revoke(ctx: HubContext) -> None:
    served = await served_session(ctx)
    await asyncio.wait_for(ctx.admin().revoke(served.session, ctx.user), 15)
    ended = await _ended(served.agent, 10)
    ctx.require(ended is not None, "the shim was not closed within 10 s of the revocation")
    ctx.require(ended.code == 4428, f"closed with {ended.code}, not 4428")
    assert served.agent.socket is not None
    for frame in served.agent.socket.frames(lambda f: f.type == "SESSION_REVOKED"):
        reason = frame.payload.get("reason")
        ctx.require(reason == "user_revoked", f"SESSION_REVOKED reason is {reason!r}")


@case(
    "LE-hub-revoke-reconnect-refused",
    level=Level.SHOULD,
    section=f"{TABLE} (4428: auth gone, would just 401)",
    rule="After a revocation the shim's reconnect to the session is refused (401).",
)
async def revoke_reconnect(ctx: HubContext) -> None:
    served = await served_session(ctx)
    await asyncio.wait_for(ctx.admin().revoke(served.session, ctx.user), 15)
    await _ended(served.agent, 10)
    again = ctx.agent(served.session, machine="machine-a")
    try:
        await again.open()
    except UpgradeRefused as exc:
        ctx.require(exc.status == 401, f"the reconnect was refused with {exc.status}, not 401")
        return
    answer = await again.hello()
    ctx.require(
        answer is None or answer.type != "HELLO_ACK", "the revoked session was served again"
    )
    ctx.observe("upgraded, then refused after HELLO")


@case(
    "LE-hub-shutdown-4429",
    level=Level.MUST,
    section=f"{TABLE} (4429)",
    rule="A platform going down gracefully closes its shims with 4429 (a SESSION_REVOKED "
    "before it names platform_shutdown).",
    last=True,
    timeout=60,
)
async def shutdown(ctx: HubContext) -> None:
    if ctx.environment.target.hub.startable:
        instance = await ctx.own_hub()
        raw = await ctx.serving_agent(ctx.new_session())
        assert instance.runner.process is not None
        ctx.evidence.note("hub", "SIGTERM (a graceful shutdown)")
        instance.runner.process.signal(signal.SIGTERM)
    else:
        raw = await ctx.serving_agent(ctx.new_session())
        try:
            await asyncio.wait_for(ctx.admin().shutdown(), 15)
        except NotSupported as exc:
            ctx.not_applicable(f"the admin adapter cannot shut the hub down: {exc}")
    ended = await _ended(raw, 15)
    ctx.require(ended is not None, "the shim was not closed within 15 s of the shutdown")
    ctx.require(ended.code == 4429, f"closed with {ended.code} {ended.reason}, not 4429")
    assert raw.socket is not None
    for frame in raw.socket.frames(lambda f: f.type == "SESSION_REVOKED"):
        reason = frame.payload.get("reason")
        ctx.require(reason == "platform_shutdown", f"SESSION_REVOKED reason is {reason!r}")
