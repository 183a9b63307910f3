"""The envelope: pipelined requests answered under their own ids, and every request —
malformed, mistyped, extended or unknown — answered.

Sections: Message Format (id correlation: every request gets a response with
the same id); Concurrency (pipelining); Error (ERROR either direction).
"""

from __future__ import annotations

import asyncio

from tetherbed.simulator.conformance.agent.answers import quote, require_error, stat
from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.agent.shell import shell_connection
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.recorded_socket import Frame
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.codes import ErrorCode

FORMAT = "Message Format (every request gets a response with the same id)"
SPEC_CODES = frozenset(str(code) for code in ErrorCode)


async def _answered(
    ctx: AgentContext, conn, frame: dict | str, request_id: object, what: str
) -> Frame:  # type: ignore[no-untyped-def]
    sent = ctx.evidence.now()
    await conn.send(frame)
    answer = await conn.answer_to(request_id, timeout=10, after=sent)
    if answer is None:
        ctx.depart(f"{what} got no answer within 10 s")
    return answer


@case(
    "LE-envelope-pipelining",
    level=Level.MUST,
    section=f"Concurrency; {FORMAT}",
    rule="Pipelined requests are each answered once, under their own id.",
)
async def pipelining(ctx: AgentContext) -> None:
    for name in ("a", "b", "c"):
        ctx.write(f"{name}.txt", name)
    conn = await ctx.connect()
    frames = [
        conn.envelope("FILE_STAT", {"path": str(ctx.root / f"{n}.txt"), "follow_symlinks": True})
        for n in ("a", "b", "c")
    ]
    sent = ctx.evidence.now()
    for frame in frames:
        await conn.send(frame)
    for frame in frames:
        answer = await conn.answer_to(frame["id"], timeout=10, after=sent)
        ctx.require(answer is not None, f"request {frame['id']} was not answered")
        ctx.require(
            answer.payload.get("path") == frame["payload"]["path"],
            f"the answer under {frame['id']} describes {answer.payload.get('path')!r}",
        )
    ids = {f["id"] for f in frames}
    counts = {i: len(conn.socket.frames(lambda f, i=i: f.id == i)) for i in ids}
    twice = [i for i, n in counts.items() if n > 1]
    ctx.require(not twice, f"answered more than once: {twice}")


@case(
    "LE-envelope-no-head-of-line",
    level=Level.SHOULD,
    section="Concurrency (each request its own task)",
    rule="A quick request is not held behind a slow one sent before it.",
    needs={"shell"},
)
async def no_head_of_line(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    slow = conn.envelope("EXECUTE_COMMAND", {"argv": ["sleep", "2"], "timeout_seconds": 20})
    sent = ctx.evidence.now()
    await conn.send(slow)
    quick = await stat(conn, ctx.root)
    done = await conn.answer_to(slow["id"], timeout=20, after=sent)
    ctx.require(done is not None, "the slow command was never answered")
    ctx.require(quick.t < done.t, "the quick FILE_STAT was answered only after the slow command")


@case(
    "LE-envelope-unknown-payload-field",
    level=Level.MUST,
    section=f"{FORMAT}; Versioning (forward-compatible additions within a major)",
    rule="A request whose payload has a field the spec does not name is still answered under "
    "its id.",
)
async def unknown_payload_field(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    frame = conn.envelope(
        "FILE_STAT", {"path": str(ctx.root), "follow_symlinks": True, "x_future": 1}
    )
    answer = await _answered(ctx, conn, frame, frame["id"], "a FILE_STAT with an extra field")
    ctx.observe(f"answered {quote(answer)}")


@case(
    "LE-envelope-unknown-envelope-field",
    level=Level.MUST,
    section=f"{FORMAT}; Versioning (forward-compatible additions within a major)",
    rule="A request whose envelope has a field the spec does not name is still answered under "
    "its id.",
)
async def unknown_envelope_field(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    frame = conn.envelope("FILE_STAT", {"path": str(ctx.root), "follow_symlinks": True},
                          x_trace="abc123")  # fmt: skip
    answer = await _answered(ctx, conn, frame, frame["id"], "an envelope with an extra field")
    ctx.observe(f"answered {quote(answer)}")


@case(
    "LE-envelope-mistyped-field",
    level=Level.MUST,
    section=FORMAT,
    rule='A request with a mistyped field (offset "three") is answered with an ERROR under its id.',
)
async def mistyped(ctx: AgentContext) -> None:
    ctx.write("a.txt", "a")
    conn = await ctx.connect()
    frame = conn.envelope(
        "FILE_READ",
        {"path": str(ctx.root / "a.txt"), "encoding": "utf-8", "format": "text",
         "offset": "three", "length": None},
    )  # fmt: skip
    answer = await _answered(ctx, conn, frame, frame["id"], "a mistyped FILE_READ")
    require_error(answer, (), "a mistyped FILE_READ")


@case(
    "LE-envelope-unknown-type",
    level=Level.MUST,
    section=FORMAT,
    rule="A request of a type the shim does not know is answered with an ERROR under its id.",
)
async def unknown_type(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    frame = conn.envelope("FILE_FROBNICATE", {"path": str(ctx.root)})
    answer = await _answered(ctx, conn, frame, frame["id"], "an unknown type")
    require_error(answer, (), "an unknown type")


@case(
    "LE-envelope-malformed-json",
    level=Level.SHOULD,
    section="Message Format; Error",
    rule="A frame that is not JSON does not end the connection: the next request is answered.",
)
async def malformed(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    sent = ctx.evidence.now()
    await conn.send('{"type": "FILE_STAT", "id": "broken", "payload": {')
    await asyncio.sleep(0.5)
    ctx.require(not conn.socket.closed, "the agent closed the connection over a malformed frame")
    after = await stat(conn, ctx.root)
    ctx.require(after.type == "FILE_STAT_RESPONSE", f"the next request got {quote(after)}")
    errors = conn.socket.frames(lambda f: f.type == "ERROR", after=sent)
    ctx.observe("answered with an ERROR" if errors else "dropped without an answer")


@case(
    "LE-envelope-error-fields",
    level=Level.MUST,
    section="Error › ERROR",
    rule="An ERROR carries code, message and fatal (and details only as an object).",
)
async def error_fields(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    answer = await conn.request(
        "FILE_READ", {"path": str(ctx.root / "ghost"), "encoding": "utf-8", "format": "text",
                      "offset": 0, "length": None},
    )  # fmt: skip
    require_error(answer, (), "a read of a missing file")
    payload = answer.payload
    problems = []
    if not isinstance(payload.get("code"), str):
        problems.append(f"code is {payload.get('code')!r}")
    if not isinstance(payload.get("message"), str):
        problems.append(f"message is {payload.get('message')!r}")
    if not isinstance(payload.get("fatal"), bool):
        problems.append(f"fatal is {payload.get('fatal', 'absent')!r}")
    if "details" in payload and not isinstance(payload["details"], dict):
        problems.append(f"details is {payload['details']!r}")
    ctx.require(not problems, "ERROR: " + "; ".join(problems))


@case(
    "LE-envelope-spec-error-codes",
    level=Level.SHOULD,
    section="Error › Error codes",
    rule="The codes in the shim's ERRORs are the spec's (a platform built on the spec's models "
    "knows no other).",
)
async def spec_codes(ctx: AgentContext) -> None:
    ctx.write("a.txt", "a")
    conn = await ctx.connect()
    probes = [
        conn.envelope("FILE_FROBNICATE", {}),
        conn.envelope("FILE_READ", {"path": str(ctx.root / "a.txt"), "offset": "x"}),
        conn.envelope("FILE_READ", {"path": str(ctx.root / "ghost")}),
        conn.envelope("DIRECTORY_LIST_REQUEST", {"browse_id": None, "directory_ref": None}),
    ]
    sent = ctx.evidence.now()
    for frame in probes:
        await conn.send(frame)
    codes = []
    for frame in probes:
        answer = await conn.answer_to(frame["id"], timeout=10, after=sent)
        if answer is not None and answer.type == "ERROR":
            codes.append(str(answer.payload.get("code")))
    ctx.observe(f"codes: {', '.join(codes)}")
    if not codes:
        ctx.no_evidence("none of the probes was answered with an ERROR")
    foreign = sorted(set(codes) - SPEC_CODES)
    ctx.require(not foreign, f"codes the spec does not name: {foreign}")


@case(
    "LE-envelope-platform-error-tolerated",
    level=Level.MUST,
    section="Error › ERROR (either direction)",
    rule="An ERROR from the platform does not break the connection: the next request is answered.",
)
async def platform_error(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    await conn.send(
        conn.envelope("ERROR", {"code": "INTERNAL_ERROR", "message": "platform hiccup",
                                "fatal": False})
    )  # fmt: skip
    answer = await stat(conn, ctx.root)
    ctx.require(answer.type == "FILE_STAT_RESPONSE", f"the next request got {quote(answer)}")
