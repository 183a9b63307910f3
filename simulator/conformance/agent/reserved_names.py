"""PATH_RESERVED_NAME, judged under the `reserved-names` profile.

Section: Error codes › PATH_RESERVED_NAME "Windows reserved name
(CON/PRN/NUL/COM*/LPT*)". The spec does not say whether a shim on Linux or
macOS refuses them; the suite runs agents on Linux, so the profile says
which reading to hold them to. Names that only look like device names are
ordinary under every reading.
"""

from __future__ import annotations

from tetherbed.simulator.conformance.agent.answers import (
    quote,
    require_type,
    stat,
    write_text,
)
from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.agent.platform import AgentConnection
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.profiles import Ambiguity, declare
from tetherbed.simulator.conformance.recorded_socket import Frame
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.codes import ErrorCode

SECTION = "Error codes › PATH_RESERVED_NAME; File Operations › FILE_WRITE, FILE_MOVE"
CODE = str(ErrorCode.PATH_RESERVED_NAME)
#: Device names the spec lists (CON/PRN/NUL/COM*/LPT*), in spellings Windows treats
#: alike; AUX, which Windows reserves too but the spec leaves out, is not judged.
RESERVED = ("CON", "prn", "NUL.txt", "com1", "LPT9.log")
#: Names that only resemble them: ordinary files everywhere.
LOOKALIKES = ("console.log", "nullable.txt", "printer.txt", "lpt.md", "auxiliary")

RESERVED_NAMES = declare(
    Ambiguity(
        name="reserved-names",
        suites=("agent",),
        question="PATH_RESERVED_NAME is a 'Windows reserved name (CON/PRN/NUL/COM*/LPT*)'; the "
        "spec does not say whether a shim elsewhere refuses them too.",
        readings={
            "either": "creating such a name answers PATH_RESERVED_NAME or succeeds",
            "every-os": "creating such a name (CON, PRN, NUL, COM1-9, LPT1-9, with any "
            "extension, in any case) is PATH_RESERVED_NAME on every OS, and nothing is created",
            "windows-only": "off Windows they are ordinary names: creating one succeeds",
        },
        default="either",
        notes="docs/spec-notes.md › Files › PATH_RESERVED_NAME",
    )
)


async def judge(ctx: AgentContext, conn: AgentConnection, name: str, answer: Frame) -> str:
    """What the answer to creating `name` was: "refused" or "created"; departs otherwise."""
    reading = ctx.reading("reserved-names")
    refused = answer.type == "ERROR" and answer.payload.get("code") == CODE
    if not refused and answer.type != "ACK":
        ctx.depart(f"creating {name!r}: expected ACK or {CODE}, got {quote(answer)}")
    if reading == "every-os":
        ctx.require(refused, f"creating {name!r} was answered {quote(answer)}, not {CODE}")
        exists = require_type(
            await stat(conn, ctx.root / name, False), "FILE_STAT_RESPONSE", "a stat"
        )
        ctx.require(exists.get("exists") is False, f"{name!r} was created all the same")
    if reading == "windows-only":
        ctx.require(not refused, f"creating {name!r} off Windows was refused with {CODE}")
    return "refused" if refused else "created"


@case(
    "LE-files-reserved-name-write",
    level=Level.MUST,
    section=SECTION,
    rule="FILE_WRITE of a Windows device name (CON, PRN, NUL.txt, COM1, LPT9.log) is "
    "judged by the reserved-names reading: PATH_RESERVED_NAME on every OS, or created.",
    reads=("reserved-names",),
)
async def reserved_write(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    seen = {}
    for name in RESERVED:
        seen[name] = await judge(ctx, conn, name, await write_text(conn, ctx.root / name, "x"))
    ctx.observe(", ".join(f"{n}: {v}" for n, v in seen.items()))


@case(
    "LE-files-reserved-name-move",
    level=Level.MUST,
    section=SECTION,
    rule="FILE_MOVE onto a Windows device name is judged like a write of it; a refused move "
    "leaves the source where it was.",
    reads=("reserved-names",),
)
async def reserved_move(ctx: AgentContext) -> None:
    source = ctx.write("draft.txt", "draft")
    conn = await ctx.connect()
    answer = await conn.request(
        "FILE_MOVE", {"src": str(source), "dst": str(ctx.root / "NUL"), "overwrite": False}
    )
    outcome = await judge(ctx, conn, "NUL", answer)
    if outcome == "refused":
        left = require_type(await stat(conn, source, False), "FILE_STAT_RESPONSE", "a stat")
        ctx.require(left.get("exists") is True, "the refused move lost its source")
    ctx.observe(outcome)


@case(
    "LE-files-reserved-name-lookalike",
    level=Level.MUST,
    section=SECTION,
    rule="Names that only resemble device names (console.log, nullable.txt, printer.txt, "
    "lpt.md, auxiliary) are ordinary: writing them succeeds.",
)
async def lookalikes(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    for name in LOOKALIKES:
        require_type(await write_text(conn, ctx.root / name, "x"), "ACK", f"writing {name!r}")
