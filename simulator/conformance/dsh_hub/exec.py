"""Dispatch: computer_exec through the adapter, exec events on the stream, results,
chunks and timeouts.

Sections: §3.2 exec/cancel events, §3.3 POST /agent/results, §5.2
computer_exec, §11.2 streaming results, §11.6.3 timeout adoption.
"""

from __future__ import annotations

import asyncio
import base64

from tetherbed.simulator.conformance.dsh_hub.environment import DshHubContext
from tetherbed.simulator.conformance.dsh_hub.http import EventStream, Received
from tetherbed.simulator.conformance.dsh_hub.raw_agent import RawSseAgent, enroll_body
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.dsh import constants as C

#: Seconds the hub gets to push an exec event after the call.
DISPATCH_WAIT = 10.0


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


async def dispatched(
    ctx: DshHubContext, raw: RawSseAgent, command: str, **options: object
) -> tuple[asyncio.Task, Received]:
    """Start computer_exec on the raw agent's computer; the exec event it caused."""
    stream = raw.stream
    assert stream is not None
    before = len(stream.events)
    call = asyncio.ensure_future(ctx.exec(raw.computer_id or "", command, **options))
    event = await stream.next_event(C.Event.EXEC, DISPATCH_WAIT, after=before)
    if event is None:
        if call.done() and not call.cancelled() and call.exception() is None:
            ctx.depart(f"no exec event; the call answered {call.result().describe()}")
        call.cancel()
        ctx.depart(f"no exec event within {DISPATCH_WAIT:g} s of computer_exec")
    return call, event


async def settle(ctx: DshHubContext, call: asyncio.Task, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    try:
        return await asyncio.wait_for(call, timeout)
    except TimeoutError:
        ctx.depart(f"computer_exec did not come back within {timeout:g} s")


@case(
    "DSH-exec-dispatch",
    level=Level.MUST,
    section="§3.2 Events › exec; §3.3 POST /agent/results; §5.2 value",
    rule="computer_exec pushes exec {requestId: req_…, command, cwd, timeoutMs, shell}; "
    "the result POST is 200 {ok: true}, and the call's value carries its exitCode, "
    "stdout and stderr.",
)
async def exec_dispatch(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    call, event = await dispatched(ctx, raw, "echo conform", cwd="/tmp")
    data = event.data() or {}
    rid = data.get("requestId")
    ctx.require(
        isinstance(rid, str) and rid.startswith(C.EXEC_REQUEST_PREFIX), f"requestId {rid!r}"
    )
    ctx.require(data.get("command") == "echo conform", f"command {data.get('command')!r}")
    ctx.require(data.get("cwd") == "/tmp", f"cwd {data.get('cwd')!r}")
    ctx.require(
        isinstance(data.get("timeoutMs"), int | float), f"timeoutMs {data.get('timeoutMs')!r}"
    )
    ctx.require(isinstance(data.get("shell"), str), f"shell {data.get('shell')!r}")
    answer = await raw.result(rid, ok=False, exitCode=3, stdout="out\n", stderr="err\n")
    value = answer.json()
    ctx.require(
        answer.status == 200 and value == {"ok": True}, f"the result POST: {answer.describe()}"
    )
    outcome = await settle(ctx, call)
    got = outcome.value or {}
    ctx.require(outcome.error is None or got, f"the call failed: {outcome.describe()}")
    ctx.require(
        got.get("exitCode") == 3 and got.get("stdout") == "out\n" and got.get("stderr") == "err\n",
        f"the call's value is {outcome.describe()}",
    )


@case(
    "DSH-results-unknown-request",
    level=Level.MUST,
    section="§3.3 404 unknown-request when the server already settled that request",
    rule="A result for a request the hub never sent, or one it already settled (a "
    "retried POST), is 404 {error: unknown-request}.",
)
async def results_unknown(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    answer = await raw.result("req_00000000deadbeef")
    ctx.require(
        answer.status == 404 and answer.error_code() == C.ErrorCode.UNKNOWN_REQUEST,
        f"a result for a request never sent: {answer.describe()}",
    )
    call, event = await dispatched(ctx, raw, "true")
    rid = (event.data() or {}).get("requestId")
    first = await raw.result(rid)
    ctx.require(first.status == 200, f"the first result: {first.describe()}")
    await settle(ctx, call)
    again = await raw.result(rid)
    ctx.require(
        again.status == 404 and again.error_code() == C.ErrorCode.UNKNOWN_REQUEST,
        f"the same result again: {again.describe()}",
    )


@case(
    "DSH-chunks-in-order",
    level=Level.MUST,
    section="§11.2 Streaming results: the host drops out-of-order duplicates and reassembles",
    rule="Chunks posted as seq 1, 0, 0 (again), 2 reach the caller once each, in seq order.",
)
async def chunks_in_order(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled(capabilities=["exec", "fs"])
    assert raw.stream is not None
    hello = raw.stream.named(C.Event.HELLO)[0].data() or {}
    if C.Feature.STREAM not in (hello.get("features") or []):
        ctx.not_applicable("the hub's hello does not offer the stream feature (§11.5)")
    call, event = await dispatched(ctx, raw, "printf abc")
    data = event.data() or {}
    if data.get("stream") is not True:
        ctx.not_applicable("the hub did not ask for a streamed result (exec.stream)")
    rid = data["requestId"]
    for seq, text in ((1, "b"), (0, "a"), (0, "a"), (2, "c")):
        answer = await raw.post(
            C.Route.RESULTS_CHUNK,
            {"requestId": rid, "seq": seq, "stdout": b64(text), "stderr": ""},
            note=f"seq {seq}",
        )
        ctx.require(answer.status == 200, f"chunk seq {seq}: {answer.describe()}")
    await asyncio.sleep(0.3)
    await raw.result(rid, stdout="abc")
    outcome = await settle(ctx, call)
    shown = b"".join(data for name, data in outcome.output if name == "stdout")
    if not outcome.output:
        ctx.no_evidence("the adapter reports no streamed output for this hub")
    ctx.require(shown == b"abc", f"the caller saw {shown!r}, not b'abc'")


@case(
    "DSH-exec-timeout",
    level=Level.MUST,
    section="§5.2 Failures (timeout); §11.6.3 Timeout adopts instead of killing",
    rule="A command that outlives timeoutMs: the call is promoted to a job without cancel "
    "(§11.6.3), or fails with cancel sent (§5.2) — profile timeout-outcome.",
    reads=("timeout-outcome",),
)
async def exec_timeout(ctx: DshHubContext) -> None:
    reading = ctx.reading("timeout-outcome")
    raw = await ctx.enrolled()
    call, event = await dispatched(ctx, raw, "sleep 600", timeout_ms=1500)
    rid = (event.data() or {}).get("requestId")
    outcome = await settle(ctx, call, 30)
    stream: EventStream = raw.stream  # type: ignore[assignment]
    cancelled = await stream.wait(
        lambda: any((e.data() or {}).get("requestId") == rid for e in stream.named(C.Event.CANCEL)),
        3,
    )
    ctx.observe(f"outcome: {outcome.describe()}; cancel sent: {cancelled}")
    promoted = outcome.promoted
    if reading == "promote":
        ctx.require(promoted and not cancelled, "not promoted to a job without cancel")
    elif reading == "cancel":
        ctx.require(outcome.error is not None and cancelled, "not an error with cancel sent")
    else:
        ctx.require(
            (promoted and not cancelled) or (outcome.error is not None and cancelled),
            f"neither promoted without cancel nor an error with cancel: {outcome.describe()}, "
            f"cancel sent: {cancelled}",
        )
    with_result = await raw.result(rid, ok=False, exitCode=None, signal="SIGKILL", timedOut=True)
    ctx.observe(f"a late result: HTTP {with_result.status}")


@case(
    "DSH-exec-offline",
    level=Level.MUST,
    section="§5.2 Failures (unknown computer, offline)",
    rule="computer_exec on a computer without a stream, or on one that does not exist, "
    "fails with an error (no exec is sent anywhere).",
)
async def exec_offline(ctx: DshHubContext) -> None:
    raw = await ctx.enrolled()
    assert raw.stream is not None
    await raw.stream.close()
    await asyncio.sleep(0.5)
    outcome = await ctx.exec(raw.computer_id or "", "true")
    ctx.require(outcome.error is not None, f"an offline computer: {outcome.describe()}")
    unknown = await ctx.exec("no-such-computer-here", "true")
    ctx.require(unknown.error is not None, f"an unknown computer: {unknown.describe()}")


@case(
    "DSH-exec-update-required",
    level=Level.MUST,
    section="§11.6.5 Update-required: minAgentVersion gates tool calls",
    rule="A computer whose agent reports version 0.1.0 (older than any minAgentVersion) is "
    "marked updateRequired in /state, and computer_exec on it fails without an exec event.",
)
async def exec_update_required(ctx: DshHubContext) -> None:
    raw = ctx.agent()
    body = enroll_body(await ctx.new_key(), raw.name)
    body["agentVersion"] = "0.1.0"
    answer = await raw.enroll("", body=body)
    ctx.require(answer.status == 200, f"enroll was answered {answer.describe()}")
    await ctx.streaming(raw)
    row = await ctx.computer_view(raw.computer_id or "") or {}
    ctx.require(
        row.get("updateRequired") is True,
        f"/state says updateRequired {row.get('updateRequired')!r}",
    )
    assert raw.stream is not None
    before = len(raw.stream.events)
    outcome = await ctx.exec(raw.computer_id or "", "true")
    ctx.require(outcome.error is not None, f"computer_exec on an old agent: {outcome.describe()}")
    ctx.observe(f"the error: {outcome.error}")
    sent = [e for e in raw.stream.events[before:] if e.name == C.Event.EXEC]
    ctx.require(not sent, "an exec event went to the old agent")
