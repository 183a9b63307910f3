"""The platform's retry layer against the idempotency table.

Section: Idempotency ("Platform MUST NOT auto-retry" a non-idempotent op;
FILE_DELETE is retried with missing_ok: true); Reconnection ("Any in-flight
requests at disconnect time are considered failed; platform retries if
safe"). Each case: a client sends requests, the raw agent receives them and
drops without a Close, and the same machine comes back at once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from tetherbed.simulator.conformance.hub.environment import HubContext
from tetherbed.simulator.conformance.hub.raw_agent import RawAgent
from tetherbed.simulator.conformance.hub.relay import Served, served_session
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.recorded_socket import Frame
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.catalog import is_idempotent

SECTION = "Idempotency"
REQUESTS = {
    "EXECUTE_COMMAND": {"command": "touch /srv/conform/once", "timeout_seconds": 30},
    "FILE_MOVE": {"src": "/srv/conform/a", "dst": "/srv/conform/b", "overwrite": False},
    "FILE_READ": {"path": "/srv/conform/a.txt", "encoding": "utf-8", "format": "text",
                  "offset": 0, "length": None},
    "FILE_DELETE": {"path": "/srv/conform/old.txt", "recursive": False, "missing_ok": False},
}  # fmt: skip


@dataclass(slots=True)
class Returned:
    served: Served
    sent: dict[str, str]  # kind -> client request id
    back: RawAgent
    reissued: list[Frame]


async def _drop_and_return(ctx: HubContext, kinds: tuple[str, ...]) -> Returned:
    served = await served_session(ctx)
    sent = {kind: await served.client.send(kind, REQUESTS[kind]) for kind in kinds}
    got = {f.type for f in await served.agent.wait_requests(len(kinds), 10)}
    missing = sorted(set(kinds) - got)
    ctx.require(not missing, f"the agent never received {missing}")
    served.agent.drop()
    await asyncio.sleep(0.3)
    back = await ctx.serving_agent(served.session, machine="machine-a")
    assert back.ack is not None
    await asyncio.sleep(3.0)
    return Returned(served, sent, back, back.requests())


@case(
    "LE-hub-retry-non-idempotent",
    level=Level.MUST,
    section=f"{SECTION} (EXECUTE_COMMAND, FILE_MOVE: never auto-retried)",
    rule="A non-idempotent request in flight when the shim dropped is not sent again to the "
    "reconnected shim.",
    timeout=90,
)
async def non_idempotent(ctx: HubContext) -> None:
    returned = await _drop_and_return(ctx, ("EXECUTE_COMMAND", "FILE_MOVE"))
    again = [f.type for f in returned.reissued if f.type is not None and not is_idempotent(f.type)]
    ctx.require(not again, f"re-sent after the drop: {again}")


@case(
    "LE-hub-retry-idempotent",
    level=Level.INFO,
    section=f"{SECTION}; Reconnection (platform retries if safe)",
    rule="Whether an idempotent request (FILE_READ) in flight at a drop is re-issued to the "
    "reconnected shim: allowed, not required.",
    timeout=90,
)
async def idempotent(ctx: HubContext) -> None:
    returned = await _drop_and_return(ctx, ("FILE_READ",))
    kinds = [f.type for f in returned.reissued]
    ctx.observe(f"re-issued: {kinds or 'nothing'}")
    ctx.require("FILE_READ" in kinds, "an idempotent FILE_READ was not re-issued after the drop")


@case(
    "LE-hub-retry-delete-missing-ok",
    level=Level.MUST,
    section=f"{SECTION} (FILE_DELETE: the platform retries with missing_ok: true)",
    rule="A FILE_DELETE the platform re-issues after a drop carries missing_ok true.",
    timeout=90,
)
async def delete_missing_ok(ctx: HubContext) -> None:
    returned = await _drop_and_return(ctx, ("FILE_DELETE",))
    deletes = [f for f in returned.reissued if f.type == "FILE_DELETE"]
    if not deletes:
        ctx.observe("FILE_DELETE was not re-issued")
        return
    flags = [f.payload.get("missing_ok") for f in deletes]
    ctx.require(all(flag is True for flag in flags), f"re-issued with missing_ok {flags}")


@case(
    "LE-hub-retry-answered-once",
    level=Level.MUST,
    section=f"{SECTION}; Message Format (every request gets a response with the same id)",
    rule="A request re-issued after a drop still gets exactly one answer, the new shim's, "
    "under the client's id.",
    timeout=90,
)
async def answered_once(ctx: HubContext) -> None:
    returned = await _drop_and_return(ctx, ("FILE_READ",))
    request_id = returned.sent["FILE_READ"]
    reads = [f for f in returned.reissued if f.type == "FILE_READ"]
    if reads:
        await returned.back.answer(
            reads[0], {"content": "again", "encoding": "utf-8", "size_bytes": 5, "truncated": False}
        )
    answer = await returned.served.client.answer_to(request_id, ctx.timings.answer_deadline)
    ctx.require(answer is not None, f"the client never got an answer to {request_id}")
    await asyncio.sleep(1.0)
    answers = returned.served.client.answers_to(request_id)
    ctx.require(
        len(answers) == 1,
        f"{len(answers)} answers to one request: {[a.describe() for a in answers]}",
    )
    if reads:
        ctx.require(answer.kind == "FILE_CONTENTS" and answer.payload.get("content") == "again",
                    f"the client got {answer.describe()}, not the new shim's answer")  # fmt: skip
