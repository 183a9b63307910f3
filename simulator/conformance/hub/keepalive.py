"""PING cadence and the drop after a missed PONG.

Section: Keepalive › PING / PONG ("Platform sends PING every 30s. Shim must
respond with PONG within 10s or connection is dropped."). A hub Tetherbed
starts is told a short interval; a hub at a URL is held to the spec's 30 s
unless --hub-option says otherwise.
"""

from __future__ import annotations

import itertools

from tetherbed.simulator.conformance.hub.environment import HubContext
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.recorded_socket import of_type
from tetherbed.simulator.conformance.registry import case

SECTION = "Keepalive › PING / PONG"
#: Seconds of scheduling noise allowed on a timer of the hub.
SLACK = 2.0


@case(
    "LE-hub-ping-cadence",
    level=Level.MUST,
    section=SECTION,
    rule="The platform sends PING every ping interval (30 s in the spec) to a connected shim.",
    timeout=150,
)
async def cadence(ctx: HubContext) -> None:
    raw = await ctx.serving_agent(ctx.new_session())
    interval = ctx.timings.ping_interval
    assert raw.socket is not None
    await raw.socket.wait_for(lambda f: False, 2 * interval + SLACK)
    start = raw.ack.t if raw.ack else 0.0
    times = [start] + [f.t for f in raw.socket.frames(of_type("PING"))]
    ctx.observe("PINGs at " + ", ".join(f"{t - start:.1f} s" for t in times[1:]) + " after the ACK")
    ctx.require(
        len(times) >= 3,
        f"{len(times) - 1} PING in {2 * interval + SLACK:g} s (every {interval:g} s expected)",
    )
    gaps = [b - a for a, b in itertools.pairwise(times)]
    late = [g for g in gaps if g > interval + SLACK]
    ctx.require(
        not late,
        f"a gap of {max(late) if late else 0:.1f} s between PINGs (interval {interval:g} s)",
    )


@case(
    "LE-hub-ping-format",
    level=Level.MUST,
    section=SECTION,
    rule="PING is an envelope with a string id and an empty payload; a PONG under that id is "
    "accepted.",
    timeout=120,
)
async def ping_format(ctx: HubContext) -> None:
    raw = await ctx.serving_agent(ctx.new_session())
    assert raw.socket is not None
    ping = await raw.socket.wait_for(of_type("PING"), ctx.timings.ping_interval + SLACK)
    if ping is None:
        ctx.depart(f"no PING within {ctx.timings.ping_interval + SLACK:g} s")
    ctx.require(isinstance(ping.id, str) and ping.id, f"PING id is {ping.id!r}")
    ctx.require(ping.payload == {}, f"PING payload is {ping.payload!r}")


@case(
    "LE-hub-pong-missed-drop",
    level=Level.MUST,
    section=SECTION,
    rule="A shim that does not answer PING with PONG within the PONG timeout (10 s) is dropped.",
    timeout=150,
)
async def missed_pong(ctx: HubContext) -> None:
    raw = ctx.agent(ctx.new_session())
    raw.answer_pings = False
    answer = await raw.connect()
    ctx.require(answer is not None and answer.type == "HELLO_ACK", "no HELLO_ACK")
    assert raw.socket is not None
    ping = await raw.socket.wait_for(of_type("PING"), ctx.timings.ping_interval + SLACK)
    if ping is None:
        ctx.depart(f"no PING within {ctx.timings.ping_interval + SLACK:g} s")
    ended = await raw.socket.wait_closed(ctx.timings.pong_timeout + 2 * SLACK)
    if ended is None:
        ctx.depart(
            f"still connected {ctx.timings.pong_timeout + 2 * SLACK:g} s after an unanswered PING"
        )
    waited = ended.t - ping.t
    ctx.observe(f"dropped {waited:.1f} s after the unanswered PING ({ended.code} {ended.reason})")
    ctx.require(waited >= ctx.timings.pong_timeout - SLACK, f"dropped after only {waited:.1f} s")


@case(
    "LE-hub-pong-kept",
    level=Level.MUST,
    section=SECTION,
    rule="A shim that answers every PING in time stays connected.",
    timeout=150,
)
async def kept(ctx: HubContext) -> None:
    raw = await ctx.serving_agent(ctx.new_session())
    assert raw.socket is not None
    window = 2 * ctx.timings.ping_interval + ctx.timings.pong_timeout + SLACK
    ended = await raw.socket.wait_closed(window)
    if ended is not None:
        ctx.depart(
            f"a shim answering PINGs was closed after {ended.t:.1f} s ({ended.code} {ended.reason})"
        )
