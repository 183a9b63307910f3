"""Concurrency and backpressure: max_concurrent, SHIM_OVERLOADED, pending_capacity, STATUS.

Sections: Message Types › HELLO_ACK (max_concurrent); Concurrency;
Backpressure (pending_capacity on every response envelope, STATUS frame).
Slots are held with `sleep` commands, so these cases need the shell.
"""

from __future__ import annotations

import asyncio

from tetherbed.simulator.conformance.agent.answers import quote, require_error, stat
from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.agent.platform import AckPolicy, AgentConnection
from tetherbed.simulator.conformance.agent.shell import shell_connection
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.recorded_socket import Frame, of_type
from tetherbed.simulator.conformance.registry import case

SLOTS = "Message Types › HELLO_ACK (max_concurrent); Concurrency"
BACKPRESSURE = "Backpressure › pending_capacity on every response envelope"
STATUS = "Backpressure › STATUS frame"
STATUS_FIELDS = ("in_flight", "max_concurrent", "queue_depth", "audit_log_bytes", "uptime_seconds")


async def _hold(conn: AgentConnection, seconds: float) -> str:
    """Send a command that holds a slot for `seconds`; its request id."""
    frame = conn.envelope(
        "EXECUTE_COMMAND", {"argv": ["sleep", str(seconds)], "timeout_seconds": seconds + 20}
    )
    await conn.send(frame)
    return str(frame["id"])


async def _overloaded_after(ctx: AgentContext, conn: AgentConnection, slots: int) -> None:
    """Fill `slots` slots, then one more request must be SHIM_OVERLOADED at once."""
    held = [await _hold(conn, 3.0) for _ in range(slots)]
    await asyncio.sleep(0.3)
    answer = await conn.request("FILE_STAT", {"path": str(ctx.root), "follow_symlinks": True})
    require_error(answer, "SHIM_OVERLOADED", f"a request past {slots} in flight")
    for request_id in held:
        done = await conn.answer_to(request_id, timeout=20, after=0)
        ctx.require(
            done is not None and done.type == "COMMAND_RESULT",
            f"an admitted request got {quote(done) if done else 'no answer'}",
        )


@case(
    "LE-capacity-overloaded",
    level=Level.MUST,
    section=f"{SLOTS}; Error › SHIM_OVERLOADED",
    rule="A request that arrives while max_concurrent requests are in flight is refused with "
    "SHIM_OVERLOADED; the admitted ones complete.",
    needs={"shell"},
    timeout=60,
)
async def overloaded(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx, AckPolicy(max_concurrent=2))
    await _overloaded_after(ctx, conn, 2)


@case(
    "LE-capacity-local-policy",
    level=Level.MUST,
    section="Message Types › HELLO_ACK",
    rule="The shim applies the lower of its local max_concurrent and HELLO_ACK's: the platform "
    "can lower a ceiling but not raise it past local policy.",
    needs={"shell"},
    timeout=60,
)
async def local_policy(ctx: AgentContext) -> None:
    conn = await ctx.connect(AckPolicy(max_concurrent=8), max_concurrent=2)
    if "shell" not in conn.advertised:
        ctx.not_applicable("the agent does not advertise the shell")
    await _overloaded_after(ctx, conn, 2)


@case(
    "LE-capacity-default-four",
    level=Level.MUST,
    section="Message Types › HELLO_ACK (max_concurrent default 4)",
    rule="When HELLO_ACK omits max_concurrent the default is 4.",
    needs={"shell"},
    timeout=60,
)
async def default_four(ctx: AgentContext) -> None:
    conn = await ctx.connect(AckPolicy(max_concurrent=None), max_concurrent=8)
    if "shell" not in conn.advertised:
        ctx.not_applicable("the agent does not advertise the shell")
    await _overloaded_after(ctx, conn, 4)


def _capacity(frame: Frame) -> object:
    return (frame.envelope or {}).get("pending_capacity", "absent")


@case(
    "LE-capacity-pending-on-responses",
    level=Level.MUST,
    section=BACKPRESSURE,
    rule="Every response envelope (answers and ERRORs) carries pending_capacity = "
    "max_concurrent minus what is still admitted or in flight after it.",
    needs={"shell"},
    timeout=60,
)
async def pending_on_responses(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx, AckPolicy(max_concurrent=4))
    held = [await _hold(conn, 2.5) for _ in range(2)]
    await asyncio.sleep(0.3)
    answer = await stat(conn, ctx.root)
    ctx.require(
        _capacity(answer) == 2, f"with 2 of 4 slots held, pending_capacity is {_capacity(answer)!r}"
    )
    error = await conn.request(
        "FILE_READ", {"path": str(ctx.root / "ghost"), "encoding": "utf-8", "format": "text",
                      "offset": 0, "length": None},
    )  # fmt: skip
    ctx.require(error.type == "ERROR", f"a missing file got {quote(error)}")
    ctx.require(_capacity(error) == 2, f"an ERROR carries pending_capacity {_capacity(error)!r}")
    for request_id in held:
        done = await conn.answer_to(request_id, timeout=20, after=0)
        ctx.require(done is not None, "a held command was never answered")
    last = conn.socket.frames(of_type("COMMAND_RESULT"))[-1]
    ctx.require(
        _capacity(last) == 4, f"the last result carries pending_capacity {_capacity(last)!r}"
    )


@case(
    "LE-status-edge",
    level=Level.MUST,
    section=f"{STATUS} (emission cadence: the full → not-full edge)",
    rule="When a request that took the last free slot finishes, its response carries "
    "pending_capacity 1 and a STATUS frame follows immediately.",
    needs={"shell"},
    timeout=60,
)
async def status_edge(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx, AckPolicy(max_concurrent=2))
    await asyncio.sleep(0.5)  # any STATUS right after the handshake goes by first
    first = await _hold(conn, 1.0)
    second = await _hold(conn, 3.0)
    done = await conn.answer_to(first, timeout=20, after=0)
    ctx.require(done is not None, "the first command was never answered")
    ctx.require(
        _capacity(done) == 1, f"the edge response carries pending_capacity {_capacity(done)!r}"
    )
    status = await conn.socket.wait_for(of_type("STATUS"), 1.0, after=done.t)
    ctx.require(status is not None, "no STATUS within a second of the response that freed a slot")
    later = conn.socket.frames(lambda f: f.id == second, after=done.t)
    ctx.require(not later or later[0].t >= status.t, "the STATUS came only after the next response")


@case(
    "LE-status-fields",
    level=Level.MUST,
    section=STATUS,
    rule="STATUS is unsolicited and carries pending_capacity on its envelope and in_flight, "
    "max_concurrent, queue_depth, audit_log_bytes and uptime_seconds.",
    timeout=60,
)
async def status_fields(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    status = await conn.socket.wait_for(of_type("STATUS"), 40.0)
    if status is None:
        ctx.depart("no STATUS within 40 s of the handshake")
    missing = [name for name in STATUS_FIELDS if name not in status.payload]
    ctx.require(not missing, f"STATUS lacks {missing}")
    ctx.require(
        isinstance(_capacity(status), int), f"STATUS pending_capacity is {_capacity(status)!r}"
    )
    ctx.require(
        status.payload.get("max_concurrent") == 4,
        f"STATUS says max_concurrent {status.payload.get('max_concurrent')!r} under an ACK of 4",
    )


@case(
    "LE-status-cadence",
    level=Level.MUST,
    section=f"{STATUS} (emission cadence: every 30 s)",
    rule="STATUS comes every 30 s while the connection is healthy.",
    timeout=90,
)
async def status_cadence(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    start = conn.ack_sent_at or 0.0
    await conn.socket.wait_for(lambda f: False, 36.0)
    times = [f.t - start for f in conn.socket.frames(of_type("STATUS"))]
    ctx.observe("STATUS at " + ", ".join(f"{t:.1f} s" for t in times) + " after the ACK")
    periodic = [t for t in times if 25.0 <= t <= 35.0]
    ctx.require(periodic, "no STATUS 25-35 s after the handshake (every 30 s)")
