"""Requests through the relay: answers under the client's own id, pipelined, never crossed,
and every request answered whatever the shim does (drops, stalls, never answers).

Sections: Message Format (every request gets a response with the same id);
Concurrency (pipelining); Reconnection (in-flight requests at a disconnect
are failed); Backpressure (pending_capacity: the platform SHOULD pause
issuance at 0).
"""

from __future__ import annotations

import asyncio

from tetherbed.simulator.conformance.hub.environment import HubContext
from tetherbed.simulator.conformance.hub.relay import served_session, stat_payload
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case

FORMAT = "Message Format (every request gets a response with the same id)"


@case(
    "LE-hub-relay-same-id",
    level=Level.MUST,
    section=FORMAT,
    rule="The shim's answer reaches the client under the client's request id, payload intact.",
)
async def same_id(ctx: HubContext) -> None:
    served = await served_session(ctx)
    request_id = await served.client.send("FILE_STAT", stat_payload())
    relayed = await served.agent.next_request(10)
    ctx.require(relayed is not None, "the request never reached the agent")
    ctx.require(relayed.payload == stat_payload(), f"the payload arrived as {relayed.payload!r}")
    body = {"exists": True, "is_file": True, "is_dir": False, "is_symlink": False,
            "size_bytes": 7, "mtime": 1.5, "ctime": 1.5, "mode": "0644", "owner_uid": 1,
            "owner_gid": 1, "mime_type": "text/plain", "path": "/srv/conform/a.txt"}  # fmt: skip
    await served.agent.answer(relayed, body)
    answer = await served.client.answer_to(request_id, 10)
    ctx.require(answer is not None, f"no answer under {request_id}")
    ctx.require(answer.kind == "FILE_STAT_RESPONSE", f"the client got {answer.describe()}")
    ctx.require(answer.payload == body, "the answer's payload changed on the way")


@case(
    "LE-hub-relay-pipelined",
    level=Level.MUST,
    section=f"Concurrency; {FORMAT}",
    rule="Pipelined requests answered out of order each reach the client under their own id.",
)
async def pipelined(ctx: HubContext) -> None:
    served = await served_session(ctx)
    ids = [
        await served.client.send("FILE_STAT", stat_payload(f"/srv/conform/{n}")) for n in range(3)
    ]
    relayed = await served.agent.wait_requests(3, 10)
    ctx.require(len(relayed) == 3, f"only {len(relayed)} of 3 requests reached the agent")
    for frame in reversed(relayed):
        await served.agent.answer(frame, {"exists": False, "path": frame.payload.get("path")})
    for number, request_id in enumerate(ids):
        answer = await served.client.answer_to(request_id, 10)
        ctx.require(answer is not None, f"no answer under {request_id}")
        ctx.require(answer.payload.get("path") == f"/srv/conform/{number}",
                    f"{request_id} got the answer for {answer.payload.get('path')}")  # fmt: skip


@case(
    "LE-hub-ids-not-crossed",
    level=Level.MUST,
    section=FORMAT,
    rule="Two clients of one session using the same request id each get their own answer.",
)
async def not_crossed(ctx: HubContext) -> None:
    served = await served_session(ctx)
    second = await ctx.client(served.session)
    await served.client.send("FILE_STAT", stat_payload("/srv/conform/first"), "same-id")
    await second.send("FILE_STAT", stat_payload("/srv/conform/second"), "same-id")
    relayed = await served.agent.wait_requests(2, 10)
    ctx.require(len(relayed) == 2, f"only {len(relayed)} of 2 requests reached the agent")
    for frame in relayed:
        await served.agent.answer(frame, {"exists": False, "path": frame.payload.get("path")})
    for client, path in ((served.client, "/srv/conform/first"), (second, "/srv/conform/second")):
        answer = await client.answer_to("same-id", 10)
        ctx.require(answer is not None, f"the client asking for {path} got no answer")
        other = answer.payload.get("path")
        ctx.require(other == path, f"the client asking for {path} got the answer for {other}")
        ctx.require(len(client.answers_to("same-id")) == 1, "a client got two answers")


async def _answered(ctx: HubContext, client, request_id: str, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = ctx.timings.answer_deadline
    answer = await client.answer_to(request_id, deadline)
    if answer is None:
        ctx.depart(f"{what}: the client got no answer within {deadline:g} s")
    ctx.observe(f"{what}: answered {answer.describe()} after {answer.t:.1f} s")
    await asyncio.sleep(0.5)
    ctx.require(len(client.answers_to(request_id)) == 1, f"{what}: more than one answer")


@case(
    "LE-hub-answer-agent-drops",
    level=Level.MUST,
    section=f"{FORMAT}; Reconnection (in-flight requests are failed)",
    rule="A request in flight when the shim drops for good is answered (an error), exactly once.",
    timeout=120,
)
async def agent_drops(ctx: HubContext) -> None:
    served = await served_session(ctx)
    request_id = await served.client.send(
        "EXECUTE_COMMAND", {"command": "sleep 5", "timeout_seconds": 30}
    )
    ctx.require(
        await served.agent.next_request(10) is not None, "the request never reached the agent"
    )
    served.agent.drop()
    await _answered(ctx, served.client, request_id, "after the shim dropped")


@case(
    "LE-hub-answer-agent-silent",
    level=Level.MUST,
    section=FORMAT,
    rule="A request the shim never answers (while it keeps answering PINGs) is still answered "
    "within a deadline.",
    timeout=120,
)
async def agent_silent(ctx: HubContext) -> None:
    served = await served_session(ctx)
    request_id = await served.client.send("FILE_STAT", stat_payload())
    ctx.require(
        await served.agent.next_request(10) is not None, "the request never reached the agent"
    )
    await _answered(ctx, served.client, request_id, "a shim that never answers")


@case(
    "LE-hub-answer-agent-stalled",
    level=Level.MUST,
    section=f"{FORMAT}; Keepalive",
    rule="A request to a shim that stops answering anything (PINGs too) is still answered.",
    timeout=150,
)
async def agent_stalled(ctx: HubContext) -> None:
    served = await served_session(ctx)
    served.agent.answer_pings = False
    request_id = await served.client.send("FILE_STAT", stat_payload())
    ctx.require(
        await served.agent.next_request(10) is not None, "the request never reached the agent"
    )
    await _answered(ctx, served.client, request_id, "a stalled shim")


@case(
    "LE-hub-answer-no-agent",
    level=Level.MUST,
    section=FORMAT,
    rule="A request for a session whose shim left (clean close) is answered, not held forever.",
    timeout=120,
)
async def no_agent(ctx: HubContext) -> None:
    served = await served_session(ctx)
    await served.agent.close(1000, "bye")
    await asyncio.sleep(0.5)
    request_id = await served.client.send("FILE_STAT", stat_payload())
    await _answered(ctx, served.client, request_id, "no shim connected")


@case(
    "LE-hub-capacity-aware",
    level=Level.SHOULD,
    section="Backpressure › pending_capacity (the platform SHOULD pause issuance at 0)",
    rule="The platform keeps count of the shim's free slots from pending_capacity and STATUS "
    "and pauses issuing at 0: no more requests until one is answered.",
    timeout=60,
)
async def capacity_aware(ctx: HubContext) -> None:
    served = await served_session(ctx)
    first = await served.client.send("FILE_STAT", stat_payload("/srv/conform/1"))
    held = await served.agent.next_request(10)
    ctx.require(held is not None, f"{first} never reached the agent")
    await served.agent.status(in_flight=1, max_concurrent=1, capacity=0)
    await asyncio.sleep(0.3)
    others = [
        await served.client.send("FILE_STAT", stat_payload(f"/srv/conform/{n}")) for n in (2, 3)
    ]
    await asyncio.sleep(1.5)
    early = [f for f in served.agent.requests() if f.t > held.t]
    ctx.require(not early, f"{len(early)} more requests issued to a shim with no free slot")
    await served.agent.answer(held, {"exists": False, "path": "/srv/conform/1"}, capacity=1)
    following = await served.agent.next_request(10, after=held.t)
    ctx.require(following is not None, "nothing issued after a slot was freed")
    await asyncio.sleep(1.0)
    burst = [f for f in served.agent.requests() if f.t > held.t]
    ctx.require(len(burst) == 1, f"{len(burst)} requests issued for one free slot")
    await served.agent.answer(
        following, {"exists": False, "path": following.payload.get("path")}, capacity=1
    )
    for request_id in others:
        await served.client.answer_to(request_id, 0.1)
