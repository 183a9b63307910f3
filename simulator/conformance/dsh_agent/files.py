"""Remote file access: absolute paths only, and a read that returns the file.

Section: §11.3 Remote file access.
"""

from __future__ import annotations

import secrets

from tetherbed.simulator.conformance.dsh_agent.environment import DshAgentContext
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.dsh import constants as C

WAIT = 15.0


async def file_request(ctx: DshAgentContext, **fields: object):  # type: ignore[no-untyped-def]
    _, stream = await ctx.serving()
    rid = C.FS_REQUEST_PREFIX + secrets.token_hex(8)
    stream.push(C.Event.FS, {"requestId": rid, **fields})
    answer = await ctx.hub.wait_post(C.Route.FS_RESULT, rid, WAIT)
    if answer is None:
        ctx.depart(f"no fs/result within {WAIT:g} s")
    return answer


@case(
    "DSH-agent-fs-relative-path",
    level=Level.MUST,
    section="§11.3 Paths must be absolute",
    rule='A relative path is answered ok: false, error: "path must be absolute".',
)
async def relative_path(ctx: DshAgentContext) -> None:
    (ctx.work / "note.txt").write_text("hello\n")
    answer = await file_request(ctx, op="read", path="note.txt", encoding="utf8")
    ctx.require(answer.get("ok") is False, f"ok is {answer.get('ok')!r}")
    ctx.require(answer.get("error") == "path must be absolute", f"error is {answer.get('error')!r}")


@case(
    "DSH-agent-fs-read",
    level=Level.MUST,
    section="§11.3 Remote file access › read",
    rule="A utf8 read of an absolute path answers ok: true with the file's text.",
)
async def read(ctx: DshAgentContext) -> None:
    path = ctx.work / "note.txt"
    path.write_text("hello\nworld\n")
    answer = await file_request(
        ctx, op="read", path=str(path), encoding="utf8", offset=0, limit=2000
    )
    ctx.require(answer.get("ok") is True, f"ok is {answer.get('ok')!r}: {answer.get('error')!r}")
    ctx.require(answer.get("text") == "hello\nworld\n", f"text is {answer.get('text')!r}")
