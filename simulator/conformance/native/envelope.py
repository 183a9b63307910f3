"""The envelope: JSON lines, integer ids, 64 KiB and depth 32, unknown fields rejected,
errors with a stable code, hello.

Sections: Envelope; Methods (hello); Live video (hello repeats the video
capabilities).
"""

from __future__ import annotations

import asyncio
import json

from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.native.environment import NativeContext
from tetherbed.simulator.conformance.native.peer import Line, NativePeer
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire import crossdesk

ENVELOPE = "Envelope"
HELLO_FIELDS = {
    "protocol": crossdesk.PROTOCOL,
    "image_formats": ["image/png"],
    "max_request_bytes": crossdesk.MAX_REQUEST_BYTES,
    "max_response_bytes": crossdesk.MAX_RESPONSE_BYTES,
    "operation_cache_entries": crossdesk.OPERATION_CACHE_ENTRIES,
    "operation_cache_ms": crossdesk.OPERATION_CACHE_MS,
}


def error_shape(line: Line) -> str | None:
    """Why an error response does not have the spec's shape (None when it does)."""
    error = line.error
    problems = []
    if not isinstance(error.get("code"), str) or not error.get("code"):
        problems.append(f"code {error.get('code')!r}")
    for name in ("retryable", "side_effect_possible"):
        if not isinstance(error.get(name), bool):
            problems.append(f"{name} {error.get(name, 'absent')!r}")
    return "; ".join(problems) or None


async def refused(ctx: NativeContext, peer: NativePeer, message: dict | bytes, what: str) -> Line:
    """Send a request that must be rejected: ok false with a well-formed error."""
    if isinstance(message, bytes):
        sent = ctx.evidence.now()
        await peer.send_raw(message)
        answer = await peer.wait_for(lambda line: line.t > sent, 15)
        if answer is None:
            ctx.depart(f"{what}: no response")
    else:
        request_id = await peer.send(message)
        answer = await peer.response(request_id)
        if answer is None:
            ctx.depart(f"{what}: no response to id {request_id}")
    ctx.require(answer.ok is False, f"{what}: accepted ({answer.describe()})")
    problem = error_shape(answer)
    ctx.require(problem is None, f"{what}: the error is malformed: {problem}")
    return answer


@case(
    "CD-envelope-hello",
    level=Level.MUST,
    section="Envelope; Methods (hello)",
    rule="hello with protocol crossdesk-automation/1 answers the protocol and its limits: "
    "image formats, action completion, human pause, request and response limits, the "
    "operation cache.",
)
async def hello(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    result = await peer.result("hello", protocol=crossdesk.PROTOCOL)
    wrong = [f"{k}={result.get(k)!r}" for k, v in HELLO_FIELDS.items() if result.get(k) != v]
    for name in ("action_completion", "human_pause"):
        if name not in result:
            wrong.append(f"{name} absent")
    ctx.require(not wrong, "hello: " + "; ".join(wrong))


@case(
    "CD-envelope-hello-video",
    level=Level.MUST,
    section="Live video",
    rule="With video, hello repeats the capabilities without the automation_ prefix: "
    "video_transport loopback-websocket/1, video_protocols h264-annexb/1 and nv12/1, "
    "video_decoders auto and software.",
)
async def hello_video(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    result = await ctx.video_capable(peer)
    ctx.require(
        sorted(result.get(crossdesk.HELLO_VIDEO_PROTOCOLS) or [])
        == sorted(crossdesk.VIDEO_PROTOCOLS),
        f"video_protocols {result.get(crossdesk.HELLO_VIDEO_PROTOCOLS)!r}",
    )
    ctx.require(
        sorted(result.get(crossdesk.HELLO_VIDEO_DECODERS) or [])
        == sorted(crossdesk.VIDEO_DECODERS),
        f"video_decoders {result.get(crossdesk.HELLO_VIDEO_DECODERS)!r}",
    )


@case(
    "CD-envelope-unknown-field",
    level=Level.MUST,
    section=ENVELOPE,
    rule="Unknown fields are rejected: at the top of a request and inside its arguments.",
)
async def unknown_field(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    await refused(ctx, peer, {"id": 1, "method": "status", "x_extra": 1}, "an unknown field")
    await refused(
        ctx, peer,
        {"id": 2, "method": "hello", "protocol": crossdesk.PROTOCOL, "features": []},
        "an unknown hello field",
    )  # fmt: skip
    await refused(
        ctx, peer,
        {"id": 3, "method": "screenshot", "region": {"x": 0, "y": 0, "width": 8, "height": 8,
                                                     "z": 1}},
        "an unknown field in region",
    )  # fmt: skip


@case(
    "CD-envelope-request-limit",
    level=Level.MUST,
    section=ENVELOPE,
    rule="A request line over 64 KiB is rejected (and the adapter carries on).",
)
async def request_limit(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    line = json.dumps({"id": 5, "method": "hello", "protocol": "x" * (70 * 1024)}).encode() + b"\n"
    await refused(ctx, peer, line, "a 70 KiB line")
    await peer.result("status")


@case(
    "CD-envelope-depth-limit",
    level=Level.MUST,
    section=ENVELOPE,
    rule="A request nested deeper than 32 is rejected (and the adapter carries on).",
)
async def depth_limit(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    nested = "[" * 40 + "]" * 40
    line = f'{{"id":6,"method":"status","x":{nested}}}\n'.encode()
    await refused(ctx, peer, line, "nesting depth 41")
    await peer.result("status")


@case(
    "CD-envelope-integer-ids",
    level=Level.MUST,
    section=ENVELOPE,
    rule="Request ids are nonnegative integers: a string, a negative or a fractional id is "
    "rejected.",
)
async def integer_ids(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    for raw in ('"7"', "-1", "1.5"):
        line = f'{{"id":{raw},"method":"status"}}\n'.encode()
        await refused(ctx, peer, line, f"id {raw}")


@case(
    "CD-envelope-malformed",
    level=Level.MUST,
    section=ENVELOPE,
    rule="A line that is not one JSON object is answered with an error, and the adapter "
    "carries on.",
)
async def malformed(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    await refused(ctx, peer, b"this is not json\n", "a line that is not JSON")
    await refused(ctx, peer, b"[1, 2, 3]\n", "a JSON array")
    await peer.result("status")


@case(
    "CD-envelope-unknown-method",
    level=Level.MUST,
    section="Envelope; Methods",
    rule="A method the protocol does not define is rejected with an error under the id.",
)
async def unknown_method(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    answer = await refused(ctx, peer, {"id": 9, "method": "teleport"}, "an unknown method")
    ctx.require(answer.id == 9, f"answered under id {answer.id!r}")


@case(
    "CD-envelope-error-shape",
    level=Level.MUST,
    section=ENVELOPE,
    rule="An error response is {id, ok: false, error: {code, retryable, side_effect_possible}} "
    "with a stable code.",
)
async def error_shape_case(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    first = await refused(ctx, peer, {"id": 11, "method": "display", "index": 99}, "display 99")
    second = await refused(ctx, peer, {"id": 12, "method": "display", "index": 99}, "again")
    ctx.require(first.error.get("code") == second.error.get("code"), "the code is not stable")


@case(
    "CD-envelope-stdout-protocol-only",
    level=Level.MUST,
    section="Native automation protocol (diagnostics go to stderr)",
    rule="Only protocol responses use stdout: every line is a response object with an id and ok.",
)
async def stdout_only(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    await peer.result("hello", protocol=crossdesk.PROTOCOL)
    await peer.call("connect", device="000000000", mode="observe", display=0)
    await peer.result("status")
    await asyncio.sleep(0.5)
    stray = [
        line.describe()
        for line in peer.lines
        if line.message is None or "id" not in line.message or "ok" not in line.message
    ]
    ctx.require(not stray, f"stdout carried something else: {stray[:3]}")


def waiting_screenshot(status: dict, timeout_ms: int) -> dict:
    """A screenshot that waits for a frame newer than any there will be."""
    return {"method": "screenshot", "after_frame_id": 2**40,
            "generation": status.get("generation"), "timeout_ms": timeout_ms}  # fmt: skip


@case(
    "CD-envelope-out-of-order",
    level=Level.INFO,
    section=ENVELOPE,
    rule="Responses may complete out of order: whether a quick status overtakes a waiting "
    "screenshot.",
)
async def out_of_order(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    status = await peer.result("status")
    waiting = await peer.send(waiting_screenshot(status, 1500))
    quick = await peer.send({"method": "status"})
    first = await peer.wait_for(lambda line: line.id in (waiting, quick), 10)
    ctx.require(first is not None and first.id == quick, "the status waited behind the screenshot")
    ctx.observe("a status overtook a waiting screenshot")
