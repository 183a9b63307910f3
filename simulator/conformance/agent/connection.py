"""The connection's life: PING/PONG, the 16 MiB frame limit, SESSION_REVOKED,
reconnecting after each close code, and the backoff schedule read from the wire.

Sections: Keepalive; Transport (frame limit); Session ownership
(SESSION_REVOKED, WS close-code table); Reconnection.
"""

from __future__ import annotations

import asyncio
import itertools
import json

from tetherbed.simulator.conformance.agent.answers import quote
from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.agent.platform import AckPolicy, AgentConnection
from tetherbed.simulator.conformance.agent.shell import shell_connection
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.profiles import Ambiguity, declare
from tetherbed.simulator.conformance.recorded_socket import of_type
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.backoff import BackoffSchedule
from tetherbed.wire.limits import FRAME_LIMIT_BYTES, PONG_TIMEOUT_SECONDS

CLOSE_TABLE = "Session ownership › WS close-code table"
RECONNECTION = "Reconnection"
#: Seconds watched for a reconnect that must not come (the first backoff is 1-6 s).
WATCH = 8.0
#: Measured delays may be this much early or late (scheduling on a busy machine).
SLACK = 0.4
SCHEDULE = BackoffSchedule()

SHUTDOWN = declare(
    Ambiguity(
        name="shutdown-4429",
        suites=("agent",),
        question="4429 PLATFORM_SHUTDOWN: no reconnect for this session and 'reconnect attempts "
        "SHOULD wait for platform health probe', yet 'today the shim just halts'.",
        readings={
            "health-probe": "no reconnect while the platform is down; one after it is back "
            "is allowed",
            "halts": "no reconnect at all until an operator restarts the shim",
        },
        default="health-probe",
        notes="docs/spec-notes.md › Platform shutdown (4429)",
    )
)
REVOKE_CLOSE = declare(
    Ambiguity(
        name="revoke-close-4428",
        suites=("agent",),
        question="4428 is listed as a platform code, yet after SESSION_REVOKED 'close code 4428 "
        "from the shim side is acceptable; receivers tolerate any clean close'.",
        readings={
            "any-clean-close": "the shim closes its half with a Close frame, any code",
            "4428": "the shim closes its half with 4428",
        },
        default="any-clean-close",
        notes="docs/spec-notes.md › Closing after SESSION_REVOKED (4428)",
    )
)
BACKOFF_RESET = declare(
    Ambiguity(
        name="backoff-attempt",
        suites=("agent",),
        question="The backoff is min(2^attempt · 1 s, 60 s) + jitter(0-5 s); the spec does not "
        "say whether attempt counts from 0 or 1, nor when it starts again.",
        readings={
            "either": "a delay fits the attempt counted either way",
            "from-zero": "the first reconnect after a failure waits 2^0 s + jitter",
        },
        default="either",
        notes="docs/spec-notes.md › Reconnect backoff",
    )
)


async def _watch_reconnect(ctx: AgentContext, since: float, what: str) -> None:
    again = await ctx.attempts_within(since, WATCH, ctx.processes[-1])
    if again:
        ctx.depart(f"the agent dialled again {again[0].t - since:.1f} s after {what}")


def _fatal_reason(code: int) -> str:
    names = {4426: "PROTOCOL_VERSION_MISMATCH", 4427: "SESSION_TAKEN_OVER",
             4428: "SESSION_REVOKED", 4429: "PLATFORM_SHUTDOWN"}  # fmt: skip
    return json.dumps({"error": names[code], "conform": True})


@case(
    "LE-keepalive-pong",
    level=Level.MUST,
    section="Keepalive › PING / PONG",
    rule="The shim answers PING with PONG under the same id within 10 s.",
)
async def pong(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    ping = conn.envelope("PING", {}, conn.new_id("ping"))
    sent = ctx.evidence.now()
    await conn.send(ping)
    answer = await conn.socket.wait_for(
        of_type("PONG", ping["id"]), PONG_TIMEOUT_SECONDS, after=sent
    )
    ctx.require(answer is not None, f"no PONG with id {ping['id']} within 10 s")
    ctx.observe(f"PONG after {answer.t - sent:.3f} s")


@case(
    "LE-keepalive-pong-while-busy",
    level=Level.MUST,
    section="Keepalive › PING / PONG",
    rule="PONG comes within 10 s even while every request slot is busy.",
    needs={"shell"},
)
async def pong_busy(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx, AckPolicy(max_concurrent=1))
    await conn.send(
        conn.envelope("EXECUTE_COMMAND", {"argv": ["sleep", "3"], "timeout_seconds": 20})
    )
    await asyncio.sleep(0.3)
    ping = conn.envelope("PING", {}, conn.new_id("ping"))
    sent = ctx.evidence.now()
    await conn.send(ping)
    answer = await conn.socket.wait_for(
        of_type("PONG", ping["id"]), PONG_TIMEOUT_SECONDS, after=sent
    )
    ctx.require(answer is not None, "no PONG within 10 s while the only slot was busy")


def _frame_of_size(conn: AgentConnection, ctx: AgentContext, size: int) -> str:
    frame = conn.envelope(
        "FILE_WRITE",
        {"path": str(ctx.root / "huge.txt"), "content": "", "encoding": "utf-8",
         "create_parents": False},
    )  # fmt: skip
    empty = json.dumps(frame, separators=(",", ":"))
    frame["payload"]["content"] = "x" * (size - len(empty.encode()))
    text = json.dumps(frame, separators=(",", ":"))
    assert len(text.encode()) == size
    return text


@case(
    "LE-frame-16mib",
    level=Level.MUST,
    section="Transport (Frame limit)",
    rule="The shim accepts WebSocket messages up to 16 MiB: a frame of exactly 16 MiB is "
    "answered (here FILE_TOO_LARGE, the payload being over max_file_size_bytes) and the "
    "connection stays open.",
    timeout=60,
)
async def frame_limit(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    text = _frame_of_size(conn, ctx, FRAME_LIMIT_BYTES)
    request_id = json.loads(text[: text.index(',"payload"')] + "}")["id"]
    sent = ctx.evidence.now()
    await conn.send(text)
    answer = await conn.answer_to(request_id, timeout=20, after=sent)
    if answer is None:
        ended = conn.socket.ending
        ctx.depart(
            "a 16 MiB frame was not answered"
            + (f": the connection ended ({ended.code} {ended.reason})" if ended else "")
        )
    ctx.require(answer.type in ("ERROR", "ACK"), f"a 16 MiB FILE_WRITE got {quote(answer)}")
    follow = await conn.request("FILE_STAT", {"path": str(ctx.root), "follow_symlinks": True})
    ctx.require(follow.type == "FILE_STAT_RESPONSE", "the connection did not carry on")


@case(
    "LE-frame-over-limit",
    level=Level.INFO,
    section="Transport (Frame limit)",
    rule="What the shim does with a frame over 16 MiB (the spec sets the limit, not the "
    "reaction): worth knowing.",
    timeout=60,
)
async def over_limit(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    text = _frame_of_size(conn, ctx, FRAME_LIMIT_BYTES + 1)
    sent = ctx.evidence.now()
    await conn.send(text)
    answer = await conn.socket.wait_for(lambda f: f.type not in ("STATUS",), 10, after=sent)
    ended = conn.socket.ending
    if ended is not None:
        ctx.observe(f"the connection ended ({ended.by}, {ended.code} {ended.reason})")
    elif answer is not None:
        ctx.observe(f"answered with {quote(answer)}")
    else:
        ctx.depart("a frame over 16 MiB got neither an answer nor a close within 10 s")


# --- close codes ------------------------------------------------------------------------


async def _reconnects_after(ctx: AgentContext, close, *, timed: bool = True) -> None:  # type: ignore[no-untyped-def]
    conn = await ctx.connect()
    await close(conn)
    ended = await conn.socket.wait_closed(5)
    ctx.require(ended is not None, "the connection did not end")
    following = await ctx.platform.next_connection(12, after=1, handshake=False)
    if following is None:
        ctx.depart("the agent did not reconnect within 12 s")
    attempt = ctx.platform.attempts_after(ended.t)[0]
    delay = attempt.t - ended.t
    ctx.observe(f"reconnected after {delay:.2f} s")
    if not timed:
        return
    low, _ = SCHEDULE.bounds(0)
    ctx.require(delay >= low - SLACK, f"reconnected after {delay:.2f} s, before the base {low:g} s")
    ctx.require(delay <= SCHEDULE.bounds(1)[1] + SLACK, f"reconnected only after {delay:.1f} s")


@case(
    "LE-close-1000-reconnect",
    level=Level.MUST,
    section=f"{CLOSE_TABLE}; {RECONNECTION}",
    rule="After an unexpected clean close (1000) the shim reconnects, after at least the base "
    "backoff (no hot loop).",
    timeout=40,
)
async def reconnect_1000(ctx: AgentContext) -> None:
    await _reconnects_after(ctx, lambda conn: conn.close(1000, "bye"))


@case(
    "LE-close-1011-reconnect",
    level=Level.MUST,
    section=f"{CLOSE_TABLE}; {RECONNECTION}",
    rule="After a close below 4426 (1011 server error) the shim reconnects with backoff.",
    timeout=40,
)
async def reconnect_1011(ctx: AgentContext) -> None:
    await _reconnects_after(ctx, lambda conn: conn.close(1011, "server error"))


async def _abort(conn: AgentConnection) -> None:
    conn.socket.abort()


@case(
    "LE-close-dropped-reconnect",
    level=Level.MUST,
    section=f"{RECONNECTION}",
    rule="After the connection drops without a Close (a network cut) the shim reconnects (when "
    "it learns of the drop is up to its TCP stack, so the delay is not judged here).",
    timeout=40,
)
async def reconnect_dropped(ctx: AgentContext) -> None:
    await _reconnects_after(ctx, _abort, timed=False)


async def _no_reconnect_after(ctx: AgentContext, code: int, *, with_ack: bool = True) -> None:
    policy = AckPolicy() if with_ack else AckPolicy(close_instead=(code, _fatal_reason(code)))
    conn = await ctx.connect(policy)
    if with_ack:
        await conn.close(code, _fatal_reason(code))
    ended = await conn.socket.wait_closed(5)
    ctx.require(ended is not None, f"the connection did not end after close {code}")
    await _watch_reconnect(ctx, ended.t, f"close {code}")


@case(
    "LE-close-4427-no-reconnect",
    level=Level.MUST,
    section=f"{CLOSE_TABLE} (4427); Session ownership › Policy",
    rule="After close 4427 SESSION_TAKEN_OVER the shim does not auto-reconnect.",
    timeout=40,
)
async def no_reconnect_4427(ctx: AgentContext) -> None:
    await _no_reconnect_after(ctx, 4427)


@case(
    "LE-close-4427-newcomer-no-reconnect",
    level=Level.MUST,
    section="Session ownership › Policy (a second shim from a different machine)",
    rule="A shim rejected with 4427 right after its HELLO (another machine owns the session) "
    "MUST NOT auto-reconnect.",
    timeout=40,
)
async def no_reconnect_4427_newcomer(ctx: AgentContext) -> None:
    await _no_reconnect_after(ctx, 4427, with_ack=False)


@case(
    "LE-close-4428-no-reconnect",
    level=Level.MUST,
    section=f"{CLOSE_TABLE} (4428)",
    rule="After close 4428 SESSION_REVOKED the shim does not auto-reconnect.",
    timeout=40,
)
async def no_reconnect_4428(ctx: AgentContext) -> None:
    await _no_reconnect_after(ctx, 4428)


@case(
    "LE-close-4429-no-reconnect-while-down",
    level=Level.MUST,
    section=f"{CLOSE_TABLE} (4429)",
    rule="After close 4429 PLATFORM_SHUTDOWN the shim does not reconnect for this session while "
    "the platform is down; under the `halts` reading not at all.",
    reads=("shutdown-4429",),
    timeout=40,
)
async def shutdown_4429(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    ctx.platform.refuse_with = 503  # the platform is going down
    await conn.close(4429, _fatal_reason(4429))
    ended = await conn.socket.wait_closed(5)
    ctx.require(ended is not None, "the connection did not end after close 4429")
    process = ctx.processes[-1]
    down = await ctx.attempts_within(ended.t, WATCH, process)
    if down:
        ctx.depart(
            f"the agent dialled {down[0].t - ended.t:.1f} s after 4429, while the platform was down"
        )
    ctx.platform.refuse_with = None  # healthy again
    if ctx.reading("shutdown-4429") == "halts":
        later = await ctx.attempts_within(ctx.evidence.now(), 4.0, process)
        if later:
            ctx.depart("the agent reconnected after 4429 once the platform was back (`halts`)")


@case(
    "LE-close-ping-timeout-reconnect",
    level=Level.MUST,
    section="Keepalive; WS close-code table (codes below 4426)",
    rule="After close 1001 (the platform dropping the connection for a missed PONG) the shim "
    "reconnects with backoff.",
    timeout=40,
)
async def reconnect_1001(ctx: AgentContext) -> None:
    await _reconnects_after(ctx, lambda conn: conn.close(1001, "no PONG in time"))


# --- SESSION_REVOKED --------------------------------------------------------------------


async def _revoke(ctx: AgentContext, reason: str = "user_revoked") -> tuple[AgentConnection, float]:
    conn = await ctx.connect()
    if "shell" in conn.granted:  # a request in flight whose answer must never be sent
        await conn.send(
            conn.envelope("EXECUTE_COMMAND", {"argv": ["sleep", "1"], "timeout_seconds": 20})
        )
        await asyncio.sleep(0.2)
    revoked_at = ctx.evidence.now()
    await conn.send(conn.envelope("SESSION_REVOKED", {"reason": reason}, conn.new_id("revoke")))
    return conn, revoked_at


@case(
    "LE-revoked-no-frames",
    level=Level.MUST,
    section="Session ownership › SESSION_REVOKED (on receipt the shim MUST: 2)",
    rule="After SESSION_REVOKED the shim sends no further frames on the connection, not even "
    "the answer to a request in flight.",
    timeout=40,
)
async def revoked_silent(ctx: AgentContext) -> None:
    conn, revoked_at = await _revoke(ctx)
    await conn.socket.wait_for(lambda f: False, 2.5)
    after = conn.socket.frames(lambda f: True, after=revoked_at)
    ctx.require(
        not after, f"sent after SESSION_REVOKED: {', '.join(f.describe() for f in after[:3])}"
    )


@case(
    "LE-revoked-closes",
    level=Level.MUST,
    section="Session ownership › SESSION_REVOKED (on receipt the shim MUST: 3)",
    rule="After SESSION_REVOKED the shim gracefully closes its half of the WebSocket (a Close "
    "frame; 4428 under the `4428` reading).",
    reads=("revoke-close-4428",),
    timeout=40,
)
async def revoked_closes(ctx: AgentContext) -> None:
    conn, _ = await _revoke(ctx)
    ended = await conn.socket.wait_closed(5)
    ctx.require(ended is not None, "the agent did not close within 5 s of SESSION_REVOKED")
    ctx.require(
        ended.by == "peer",
        "the agent did not close its half: "
        + ("it dropped the connection without a Close" if ended.by == "abnormal" else "we did"),
    )
    ctx.observe(f"closed with {ended.code} {ended.reason}")
    if ctx.reading("revoke-close-4428") == "4428":
        ctx.require(ended.code == 4428, f"closed with {ended.code}, not 4428")


@case(
    "LE-revoked-no-reconnect",
    level=Level.MUST,
    section="Session ownership › SESSION_REVOKED (on receipt the shim MUST: 4)",
    rule="After SESSION_REVOKED the shim does not auto-reconnect to the session.",
    timeout=40,
)
async def revoked_no_reconnect(ctx: AgentContext) -> None:
    conn, revoked_at = await _revoke(ctx)
    ended = await conn.socket.wait_closed(5)
    await _watch_reconnect(ctx, ended.t if ended else revoked_at, "SESSION_REVOKED")


@case(
    "LE-revoked-unknown-reason",
    level=Level.MUST,
    section="Session ownership › SESSION_REVOKED (receivers tolerate unknown reasons)",
    rule="A SESSION_REVOKED with a reason not in the v1.0 set is still a revocation: the shim "
    "closes and does not reconnect.",
    timeout=40,
)
async def revoked_unknown(ctx: AgentContext) -> None:
    conn, _ = await _revoke(ctx, reason="retention_policy_expired")
    ended = await conn.socket.wait_closed(5)
    ctx.require(ended is not None, "the agent ignored a SESSION_REVOKED with an unknown reason")
    await _watch_reconnect(ctx, ended.t, "SESSION_REVOKED")


# --- the backoff schedule ---------------------------------------------------------------


def _fits(delay: float, failures: int, reading: str) -> bool:
    """Whether `delay` fits the schedule after `failures` failures in a row."""
    exponents = {failures - 1} if reading == "from-zero" else {failures - 1, failures}
    for n in exponents:
        low, high = SCHEDULE.bounds(max(n, 0))
        if low - SLACK <= delay <= high + SLACK:
            return True
    return False


@case(
    "LE-reconnect-backoff",
    level=Level.MUST,
    section=RECONNECTION,
    rule="Reconnects back off exponentially: min(2^attempt · 1 s, 60 s) + jitter(0-5 s) between "
    "failed attempts, read from the wire.",
    reads=("backoff-attempt",),
    timeout=80,
)
async def backoff(ctx: AgentContext) -> None:
    ctx.platform.refuse_with = 503
    process = ctx.start_agent()
    wanted = 5
    while len(ctx.platform.attempts) < wanted:
        if process.returncode is not None:
            ctx.depart(f"the agent exited ({process.returncode}) after a refused upgrade (503)")
        if ctx.evidence.now() > 60:
            break
        await asyncio.sleep(0.1)
    times = [a.t for a in ctx.platform.attempts]
    delays = [b - a for a, b in itertools.pairwise(times)]
    ctx.observe("delays: " + ", ".join(f"{d:.2f} s" for d in delays))
    if len(delays) < wanted - 1:
        ctx.depart(f"only {len(times)} attempts in 60 s of refused upgrades")
    reading = ctx.reading("backoff-attempt")
    for number, delay in enumerate(delays, 1):
        ctx.require(
            _fits(delay, number, reading),
            f"delay {number} was {delay:.2f} s, outside min(2^n, 60) + [0, 5] s",
        )


@case(
    "LE-reconnect-backoff-reset",
    level=Level.INFO,
    section=RECONNECTION,
    rule="Whether the backoff counter starts again after a connection that stayed healthy "
    "(not required, worth knowing).",
    timeout=90,
)
async def backoff_reset(ctx: AgentContext) -> None:
    ctx.platform.refuse_with = 503
    process = ctx.start_agent()
    while len(ctx.platform.attempts) < 4:
        if process.returncode is not None or ctx.evidence.now() > 50:
            ctx.no_evidence("the agent did not retry four times")
        await asyncio.sleep(0.1)
    ctx.platform.refuse_with = None
    conn = await ctx.platform.next_connection(25, after=0)
    if conn is None:
        ctx.no_evidence("the agent did not come back once the platform accepted it")
    await asyncio.sleep(11.0)  # healthy: up more than 10 s
    await conn.close(1011, "server error")
    ended = await conn.socket.wait_closed(5)
    following = await ctx.platform.next_connection(25, after=1, handshake=False)
    if following is None or ended is None:
        ctx.no_evidence("no reconnect after the healthy connection closed")
    delay = ctx.platform.attempts_after(ended.t)[0].t - ended.t
    ctx.observe(f"after 3 failures and a healthy connection, the next delay was {delay:.2f} s")
    ctx.require(
        delay <= SCHEDULE.bounds(1)[1] + SLACK,
        f"the delay after a healthy connection was {delay:.1f} s: the counter was not reset",
    )
