"""Authentication and tenant isolation: one user's tokens reach only that user's sessions.

Sections: Transport (Auth); Session ownership (one owner per session). A
hub's client API is its own, so it is reached through the client adapter,
built once with a token the hub never issued.
"""

from __future__ import annotations

import asyncio

from tetherbed.simulator.conformance.hub.environment import HubContext
from tetherbed.simulator.conformance.hub.raw_agent import UpgradeRefused
from tetherbed.simulator.conformance.hub.relay import served_session, stat_payload
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.simulator.targets import HubAccess, OpenRefused, Tokens, client_adapter

SECTION = "Transport (Auth); Session ownership"
TWO = {"two_users"}


@case(
    "LE-hub-auth-required",
    level=Level.MUST,
    section="Transport (Auth: bearer token on the WebSocket upgrade); Error › AUTH_FAILED",
    rule="An agent upgrade without a bearer token, or with a token the platform did not issue, "
    "is refused, on the data and the control endpoint.",
)
async def auth_required(ctx: HubContext) -> None:
    for session in (ctx.new_session(), None):
        for token, what in ((None, "without a token"), ("not-a-token-" + "x" * 20, "a bad token")):
            raw = ctx.agent(session, token=token)
            where = "control" if session is None else "data"
            try:
                await raw.open()
            except UpgradeRefused as exc:
                ctx.observe(f"{where} {what}: refused ({exc.status})")
                continue
            answer = await raw.hello()
            ctx.require(
                answer is None or answer.type != "HELLO_ACK",
                f"the {where} endpoint accepted an agent {what} and answered HELLO_ACK",
            )
            ctx.depart(f"the {where} endpoint upgraded an agent {what}")


@case(
    "LE-hub-auth-client-token",
    level=Level.MUST,
    section="Transport (Auth)",
    rule="A client with a token the platform did not issue reaches no session.",
)
async def client_token(ctx: HubContext) -> None:
    served = await served_session(ctx)
    forged = Tokens({(ctx.user, "client"): "forged-" + "y" * 24, (ctx.user, "agent"): "z"})
    access = HubAccess(ctx.access.url, forged, ctx.access.ssl)
    adapter = client_adapter(ctx.environment.target.client_adapter, access)
    try:
        opened = await asyncio.wait_for(adapter.open(served.session, ctx.user), 15)
    except OpenRefused as exc:
        ctx.observe(f"refused ({exc.status})")
        return
    except Exception as exc:
        ctx.observe(f"refused ({type(exc).__name__}: {exc})")
        return
    try:
        await opened.send(
            "forged-1", "FILE_STAT", b'{"path":"/srv/conform/a.txt","follow_symlinks":true}'
        )
    except Exception:
        pass
    relayed = await served.agent.next_request(3)
    await opened.close()
    await adapter.close()
    ctx.require(relayed is None, "a request with a forged client token reached the agent")


@case(
    "LE-hub-tenant-client",
    level=Level.MUST,
    section=SECTION,
    rule="A user's client cannot reach another user's session: it is refused, or its requests "
    "never reach that session's agent.",
    needs=TWO,
)
async def tenant_client(ctx: HubContext) -> None:
    served = await served_session(ctx)
    assert ctx.other_user is not None
    try:
        intruder = await ctx.client(served.session, ctx.other_user)
    except OpenRefused as exc:
        ctx.observe(f"the other user's client was refused ({exc.status})")
        return
    await intruder.send("FILE_STAT", stat_payload())
    relayed = await served.agent.next_request(3)
    ctx.require(relayed is None, "another user's request reached this user's agent")


@case(
    "LE-hub-tenant-agent",
    level=Level.MUST,
    section=SECTION,
    rule="Another user's agent naming the same session id (even the same machine id) neither "
    "takes the session over nor receives its requests.",
    needs=TWO,
)
async def tenant_agent(ctx: HubContext) -> None:
    served = await served_session(ctx)
    assert ctx.other_user is not None
    intruder = ctx.agent(served.session, machine="machine-a", user=ctx.other_user)
    await intruder.connect()
    await asyncio.sleep(0.5)
    assert served.agent.socket is not None
    revoked = served.agent.socket.frames(lambda f: f.type == "SESSION_REVOKED")
    ctx.require(not revoked, "another user's agent revoked this user's session")
    ctx.require(not served.agent.socket.closed, "another user's agent got this user's agent closed")
    request_id = await served.client.send("FILE_STAT", stat_payload())
    relayed = await served.agent.next_request(10)
    ctx.require(
        relayed is not None, f"the owner's agent did not get its client's request ({request_id})"
    )
    if intruder.socket is not None:
        ctx.require(not intruder.requests(), "another user's agent received this user's request")


@case(
    "LE-hub-tenant-revoke",
    level=Level.MUST,
    section=f"{SECTION}; WS close-code table (4428)",
    rule="Another user cannot revoke a user's session.",
    needs=TWO,
)
async def tenant_revoke(ctx: HubContext) -> None:
    served = await served_session(ctx)
    assert ctx.other_user is not None
    try:
        await asyncio.wait_for(ctx.admin().revoke(served.session, ctx.other_user), 10)
    except Exception as exc:
        ctx.observe(f"the other user's revoke was refused: {type(exc).__name__}")
    await asyncio.sleep(1.0)
    assert served.agent.socket is not None
    ctx.require(not served.agent.socket.frames(lambda f: f.type == "SESSION_REVOKED"),
                "another user's revoke reached this user's agent")  # fmt: skip
    ctx.require(not served.agent.socket.closed, "another user's revoke closed this user's agent")
