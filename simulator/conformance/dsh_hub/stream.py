"""The events stream: its headers, retry, hello, pings, and one stream per computer.

Sections: §3.2 GET /agent/events, §11.1 (hello echoes capabilities), §11.5
(features), §3.4 heartbeat.
"""

from __future__ import annotations

import itertools

from tetherbed.simulator.conformance.dsh_hub.environment import DshHubContext
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.dsh import constants as C

EV = C.Event


@case(
    "DSH-events-headers",
    level=Level.MUST,
    section="§3.2 Response headers",
    rule="The stream is text/event-stream; charset=utf-8 with cache-control no-store, "
    "x-accel-buffering no, and opens with retry: 2000.",
)
async def events_headers(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    assert raw.stream is not None
    headers = raw.stream.headers
    ctx.require(
        headers.get("content-type", "").replace(" ", "").lower()
        == "text/event-stream;charset=utf-8",
        f"content-type {headers.get('content-type')!r}",
    )
    ctx.require(
        "no-store" in headers.get("cache-control", ""),
        f"cache-control {headers.get('cache-control')!r}",
    )
    ctx.require(headers.get("x-accel-buffering") == "no", "no x-accel-buffering: no")
    ctx.require(raw.stream.first_field == "retry", "the stream did not open with a retry: line")
    ctx.require(raw.stream.retry_ms == C.SSE_RETRY_MS, f"retry: {raw.stream.retry_ms}, not 2000")


@case(
    "DSH-events-hello",
    level=Level.MUST,
    section="§3.2 Events › hello",
    rule="hello carries the computer's computerId and name, and heartbeatMs.",
)
async def events_hello(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    assert raw.stream is not None
    hello = raw.stream.named(EV.HELLO)[0].data()
    ctx.require(isinstance(hello, dict), f"hello data {hello!r} is not an object")
    ctx.require(
        hello.get("computerId") == raw.computer_id, f"computerId {hello.get('computerId')!r}"
    )
    ctx.require(isinstance(hello.get("name"), str) and hello["name"], "no name")
    beat = hello.get("heartbeatMs")
    ctx.require(isinstance(beat, int) and beat > 0, f"heartbeatMs {beat!r}")


@case(
    "DSH-hello-capabilities",
    level=Level.MUST,
    section="§11.1 hello echoes the host's view: capabilities",
    rule="An agent that enrolled with capabilities [exec, fs] gets them back in hello "
    "(where the agent puts them: profile capability-field).",
    reads=("capability-field",),
)
async def hello_capabilities(ctx: DshHubContext) -> None:
    placement = ctx.reading("capability-field")
    raw = ctx.agent()
    answer = await raw.enroll(await ctx.new_key(), capabilities=["exec", "fs"], placement=placement)
    ctx.require(answer.status == 200, f"enroll was answered {answer.describe()}")
    await ctx.streaming(raw)
    assert raw.stream is not None
    hello = raw.stream.named(EV.HELLO)[0].data() or {}
    caps = hello.get("capabilities")
    ctx.require(
        isinstance(caps, list) and {"exec", "fs"} <= set(caps),
        f"hello's capabilities are {caps!r}, not [exec, fs]",
    )


@case(
    "DSH-events-ping",
    level=Level.MUST,
    section="§3.2 Events › ping: liveness, every heartbeatMs",
    rule="A ping {t: number} comes every heartbeatMs (within half a heartbeat either way).",
    timeout=120,
)
async def events_ping(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    stream = raw.stream
    assert stream is not None
    beat = ((stream.named(EV.HELLO)[0].data() or {}).get("heartbeatMs") or 0) / 1000
    if beat > 30:
        ctx.not_applicable(f"a heartbeat of {beat:g} s is too long to watch")
    # Three pings (two gaps) of a short heartbeat; two of the spec's 20 s one.
    wanted = 3 if beat <= 5 else 2
    window = (wanted + 1) * beat + 3
    await stream.wait(lambda: len(stream.named(EV.PING)) >= wanted or stream.ended, window)
    pings = stream.named(EV.PING)
    ctx.require(len(pings) >= wanted, f"{len(pings)} pings in {window:g} s (heartbeat {beat:g} s)")
    for ping in pings:
        ctx.require(
            isinstance((ping.data() or {}).get("t"), int | float), f"ping data {ping.data()!r}"
        )
    gaps = [b.t - a.t for a, b in itertools.pairwise(pings)]
    ctx.observe("ping gaps: " + ", ".join(f"{g:.2f} s" for g in gaps))
    bad = [g for g in gaps if not 0.5 * beat <= g <= 1.5 * beat]
    if bad:
        ctx.depart(f"a ping came {bad[0]:.2f} s after the previous one (heartbeat {beat:g} s)")


@case(
    "DSH-stream-replaces",
    level=Level.MUST,
    section="§3.2 Only one live stream per computer",
    rule="A second stream for the computer gets hello, and the first one is ended.",
)
async def stream_replaces(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    first = raw.stream
    assert first is not None
    await ctx.streaming(raw)
    second = raw.stream
    ended = await first.wait_end(5)
    ctx.require(ended, "the first stream was still open 5 s after the second one's hello")
    ctx.require(not second.ended, "the second stream ended too")


@case(
    "DSH-heartbeat-echo",
    level=Level.MUST,
    section="§3.4 POST /api/dsh-computers/agent/heartbeat",
    rule="A heartbeat is 200 {ok: true, name} with the computer's current display name.",
)
async def heartbeat_echo(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    answer = await raw.post(C.Route.HEARTBEAT, {"meta": {"agentVersion": "1.3.0"}})
    value = answer.json()
    ctx.require(answer.status == 200 and isinstance(value, dict), f"got {answer.describe()}")
    ctx.require(value.get("ok") is True, f"ok is {value.get('ok')!r}")
    row = await ctx.computer_view(raw.computer_id or "")
    name = row.get("name") if row else None
    ctx.require(value.get("name") == name, f"name {value.get('name')!r}, the list says {name!r}")
