"""The agent's stream: its token, its reconnect schedule, 401, and heartbeats.

Sections: §3 Auth, §3.2 events, §3.4 heartbeat, §6 run (SSE loop with
backoff 1 s → 30 s), §11.6.6 (a revoked agent gets 401 and stops retrying).
"""

from __future__ import annotations

import itertools

from tetherbed.simulator.conformance.dsh_agent.environment import DshAgentContext
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.dsh import constants as C

#: The shortest reconnect delay accepted: 1 s less a jitter allowance of half.
MIN_DELAY = 0.5
#: The longest: 30 s plus the same allowance.
MAX_DELAY = 45.0


@case(
    "DSH-agent-stream-bearer",
    level=Level.MUST,
    section="§3 Auth: authorization: Bearer <token>",
    rule="run opens the events stream, and POSTs heartbeats, with the token enroll received.",
)
async def stream_bearer(ctx: DshAgentContext) -> None:
    ctx.hub.heartbeat_ms = 2000
    await ctx.serving()
    ctx.require(
        all(a.authorized for a in ctx.hub.attempts), "a stream was opened without the token"
    )
    await ctx.hub.wait(lambda: ctx.hub.posts_to(C.Route.HEARTBEAT), 6)
    bad = [p.route for p in ctx.hub.posts if not p.authorized]
    if bad:
        ctx.depart(f"a POST to {bad[0]} did not carry the token")


@case(
    "DSH-agent-reconnect-backoff",
    level=Level.MUST,
    section="§6 run: SSE loop (§3.2) with backoff 1 s → 30 s (jitter)",
    rule="After a refused stream the agent waits about 1 s before the next attempt, and "
    "longer after each further failure, never beyond 30 s and its jitter.",
    timeout=90,
)
async def reconnect_backoff(ctx: DshAgentContext) -> None:
    enrolled = await ctx.enroll()
    ctx.require(enrolled.exit_code == 0, f"enroll exited with {enrolled.exit_code}")
    first = len(ctx.hub.attempts)
    ctx.hub.stream_policy = lambda attempt: 503
    process = ctx.run()
    await ctx.hub.wait(lambda: len(ctx.hub.attempts) >= first + 4 or not process.alive(), 40)
    times = [a.t for a in ctx.hub.attempts[first:]]
    if len(times) < 4:
        ctx.depart(
            f"{len(times)} stream attempts in 40 s after refusals (exit {process.returncode})"
        )
    gaps = [b - a for a, b in itertools.pairwise(times[:4])]
    ctx.observe("delays: " + ", ".join(f"{g:.2f} s" for g in gaps))
    ctx.require(
        all(g >= MIN_DELAY for g in gaps), f"a reconnect came {min(gaps):.2f} s after a refusal"
    )
    ctx.require(all(g <= MAX_DELAY for g in gaps), f"a delay of {max(gaps):.1f} s")
    ctx.require(gaps[-1] >= 1.5 * gaps[0], "the delays do not grow after repeated failures")


@case(
    "DSH-agent-reconnect-after-end",
    level=Level.MUST,
    section="§6 run: SSE loop (§3.2)",
    rule="When the hub ends a stream that was serving, the agent opens a new one.",
    timeout=60,
)
async def reconnect_after_end(ctx: DshAgentContext) -> None:
    _, stream = await ctx.serving()
    count = len(ctx.hub.attempts)
    stream.end()
    again = await ctx.hub.wait(lambda: len(ctx.hub.attempts) > count, 35)
    ctx.require(again, "no new stream within 35 s of the hub ending the last one")


@case(
    "DSH-agent-401-stops",
    level=Level.MUST,
    section="§11.6.6 a stale agent gets 401 invalid-token and stops retrying",
    rule="A stream refused with 401 {error: invalid-token} is not retried.",
    timeout=60,
)
async def stops_on_401(ctx: DshAgentContext) -> None:
    enrolled = await ctx.enroll()
    ctx.require(enrolled.exit_code == 0, f"enroll exited with {enrolled.exit_code}")
    first = len(ctx.hub.attempts)
    ctx.hub.stream_policy = lambda attempt: 401
    process = ctx.run()
    got = await ctx.hub.wait(lambda: len(ctx.hub.attempts) > first, 20)
    ctx.require(got, "run never opened the stream")
    await ctx.hub.wait(lambda: len(ctx.hub.attempts) > first + 1, 8)
    more = len(ctx.hub.attempts) - first - 1
    ctx.observe(
        f"attempts after the 401: {more}; the agent {'exited' if not process.alive() else 'runs'}"
    )
    ctx.require(more == 0, f"{more} more attempts in 8 s after a 401")


@case(
    "DSH-agent-heartbeat",
    level=Level.SHOULD,
    section="§3.4 POST /api/dsh-computers/agent/heartbeat; §11.1 heartbeat carries capabilities",
    rule="A streaming agent POSTs heartbeats {meta: {…}} (within two heartbeatMs of hello).",
)
async def heartbeat(ctx: DshAgentContext) -> None:
    ctx.hub.heartbeat_ms = 2000
    await ctx.serving()
    post = await ctx.hub.wait_post(C.Route.HEARTBEAT, None, 6)
    if post is None:
        ctx.depart("no heartbeat within two heartbeats of hello")
    ctx.require(isinstance(post.get("meta"), dict), f"the heartbeat body is {post.body!r}")
