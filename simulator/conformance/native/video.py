"""Live video: video_open's checks and answer, the listener's handshake and ticket rules,
CDV1/CDN1 framing, per-viewer ack caps, keyframe requests, stalled viewers.

Sections: Live video (Authorization and transport; Binary messages and flow
control). Cases need the adapter to advertise loopback WebSocket video and a
device whose picture keeps changing (the suite keeps its own display moving).
"""

from __future__ import annotations

import asyncio
import itertools
import json

from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.native.envelope import refused
from tetherbed.simulator.conformance.native.environment import ORIGIN, NativeContext, token
from tetherbed.simulator.conformance.native.viewer import (
    BadFrame,
    Viewer,
    ViewerRefused,
    parse_frame,
)
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire import crossdesk

AUTH = "Live video › Authorization and transport"
FLOW = "Live video › Binary messages and flow control"
FRAME_WAIT = 8.0


async def _refused_viewer(ctx: NativeContext, viewer: Viewer, what: str) -> None:
    """No video may reach a viewer that should have been refused."""
    if viewer.socket is not None:
        await viewer.socket.wait_closed(4.5)
    frames = viewer.binary()
    ctx.require(not frames, f"{what}: {len(frames)} video frames were sent")
    ctx.require(viewer.socket is None or viewer.socket.closed, f"{what}: the socket stayed open")


async def _try_open(
    ctx: NativeContext, viewer: Viewer, url: str, origin: str = ORIGIN, **kw: object
) -> bool:
    """Open a viewer; False when the listener refused the upgrade itself (no video either)."""
    try:
        await viewer.open(url, origin, **kw)  # type: ignore[arg-type]
    except ViewerRefused as exc:
        ctx.observe(f"{viewer.channel}: the upgrade was refused ({exc})")
        return False
    return True


def _grant(**change: object) -> dict:
    grant = {"ticket": token(), "view": token(), "view_generation": 1, "session": token(),
             "origin": ORIGIN}  # fmt: skip
    grant.update(change)
    return grant


@case(
    "CD-video-open-result",
    level=Level.MUST,
    section=AUTH,
    rule="video_open answers {url ws://127.0.0.1:PORT/api/video, transport, protocol, decoder, "
    "expires_in_ms 15000}.",
)
async def open_result(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    await ctx.video_capable(peer)
    result = await peer.result("video_open", **_grant())
    url = str(result.get("url"))
    ctx.require(
        url.startswith("ws://127.0.0.1:") and url.endswith(crossdesk.VIDEO_PATH), f"url {url!r}"
    )
    ctx.require(
        result.get("transport") == crossdesk.VIDEO_TRANSPORT,
        f"transport {result.get('transport')!r}",
    )
    ctx.require(
        result.get("protocol") in crossdesk.VIDEO_PROTOCOLS, f"protocol {result.get('protocol')!r}"
    )
    ctx.require(
        result.get("decoder") in crossdesk.VIDEO_DECODERS, f"decoder {result.get('decoder')!r}"
    )
    ctx.require(
        result.get("expires_in_ms") == crossdesk.TICKET_TTL_MS,
        f"expires_in_ms {result.get('expires_in_ms')!r}",
    )


@case(
    "CD-video-open-arguments",
    level=Level.MUST,
    section=AUTH,
    rule="ticket, view and session are 32-character base64url ids, view_generation is "
    "positive, origin exactly http://127.0.0.1:PORT, apps null or an https origin; video_open "
    "needs a connected session.",
)
async def open_arguments(ctx: NativeContext) -> None:
    idle = await ctx.adapter()
    await ctx.video_capable(idle)
    await refused(ctx, idle, {"id": idle.new_id(), "method": "video_open", **_grant()},
                  "video_open before connect")  # fmt: skip
    peer = await ctx.connected()
    for change, what in (
        ({"ticket": token()[:31]}, "a 31-character ticket"),
        ({"view": "not base64url!!" * 2 + "xx"}, "a view with other characters"),
        ({"view_generation": 0}, "view_generation 0"),
        ({"origin": "http://localhost:5173"}, "origin http://localhost"),
        ({"origin": "https://127.0.0.1:5173"}, "an https loopback origin"),
        ({"apps": "http://apps.example"}, "apps over http"),
    ):
        message = {"id": peer.new_id(), "method": "video_open", **_grant(**change)}
        await refused(ctx, peer, message, what)


@case(
    "CD-video-ticket",
    level=Level.MUST,
    section=AUTH,
    rule="A viewer that opens the URL with the authorized Origin and sends {ticket} first "
    "receives binary video frames.",
)
async def ticket(ctx: NativeContext) -> None:
    _, viewers, _ = await ctx.video()
    viewers[0].auto_ack = True
    frames = await viewers[0].wait_frames(1, FRAME_WAIT)
    ctx.require(frames, f"no video frame within {FRAME_WAIT:g} s of presenting the ticket")


@case(
    "CD-video-ticket-wrong",
    level=Level.MUST,
    section=AUTH,
    rule="A ticket that was never granted gets no video and the socket is closed.",
)
async def wrong_ticket(ctx: NativeContext) -> None:
    _, viewers, _ = await ctx.video(present=False)
    await viewers[0].present(token())
    await _refused_viewer(ctx, viewers[0], "an unknown ticket")


@case(
    "CD-video-ticket-once",
    level=Level.MUST,
    section=AUTH,
    rule="A ticket is consumed once: a second socket presenting it gets no video.",
)
async def ticket_once(ctx: NativeContext) -> None:
    _, viewers, opened = await ctx.video()
    await viewers[0].wait_frames(1, FRAME_WAIT)
    second = ctx.viewer()
    if await _try_open(ctx, second, str(opened["url"])):
        await second.present(viewers[0].grant["ticket"])  # type: ignore[attr-defined]
        await _refused_viewer(ctx, second, "a ticket presented twice")


@case(
    "CD-video-ticket-expiry",
    level=Level.MUST,
    section=AUTH,
    rule="Tickets expire after 15 seconds: one presented later gets no video.",
    timeout=60,
)
async def ticket_expiry(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    await ctx.video_capable(peer)
    grant = _grant()
    opened = await peer.result("video_open", **grant)
    await asyncio.sleep(crossdesk.TICKET_TTL_MS / 1000 + 1.5)
    viewer = ctx.viewer()
    if await _try_open(ctx, viewer, str(opened["url"])):
        await viewer.present(grant["ticket"])
        await _refused_viewer(ctx, viewer, "a 16.5-second-old ticket")


@case(
    "CD-video-ticket-first-message",
    level=Level.MUST,
    section=AUTH,
    rule="The ticket must come as the first text message within 3 seconds: a socket that "
    "stays silent is closed without video.",
)
async def first_message(ctx: NativeContext) -> None:
    _, viewers, _ = await ctx.video(present=False)
    viewer = viewers[0]
    assert viewer.socket is not None
    ended = await viewer.socket.wait_closed(crossdesk.FIRST_MESSAGE_SECONDS + 3)
    ctx.require(ended is not None, "a socket without a ticket was still open after 6 s")
    ctx.require(not viewer.binary(), "video was sent before a ticket")


@case(
    "CD-video-origin",
    level=Level.MUST,
    section=AUTH,
    rule="The listener checks the Origin: another origin gets no video, even with a valid ticket.",
)
async def origin(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    await ctx.video_capable(peer)
    grant = _grant()
    opened = await peer.result("video_open", **grant)
    viewer = ctx.viewer()
    if not await _try_open(ctx, viewer, str(opened["url"]), "http://127.0.0.1:6666"):
        return
    await viewer.present(grant["ticket"])
    await _refused_viewer(ctx, viewer, "another Origin")


@case(
    "CD-video-host-and-path",
    level=Level.MUST,
    section=AUTH,
    rule="The listener checks the exact Host and path: another path, or Host localhost, gets no "
    "video.",
)
async def host_and_path(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    await ctx.video_capable(peer)
    for what in ("path", "host"):
        grant = _grant()
        opened = await peer.result("video_open", **grant)
        url = str(opened["url"])
        port = url.split(":")[2].split("/", 1)[0]
        viewer = ctx.viewer()
        if what == "path":
            opened_ok = await _try_open(
                ctx, viewer, url.replace(crossdesk.VIDEO_PATH, "/api/other")
            )
        else:
            opened_ok = await _try_open(ctx, viewer, url, headers={"Host": f"localhost:{port}"})
        if not opened_ok:
            continue
        await viewer.present(grant["ticket"])
        await _refused_viewer(ctx, viewer, f"another {what}")


@case(
    "CD-video-cdv1-framing",
    level=Level.MUST,
    section=FLOW,
    rule="Each binary message is one CDV1 frame: magic, the display generation, a rising "
    "sequence, flags 1 (IDR) or 0, then Annex B H.264; the first is a keyframe with SPS and "
    "PPS.",
)
async def cdv1(ctx: NativeContext) -> None:
    peer, viewers, _ = await ctx.video()
    viewer = viewers[0]
    viewer.auto_ack = True
    await viewer.wait_frames(4, FRAME_WAIT)
    try:
        frames = viewer.video()
    except BadFrame as exc:
        ctx.depart(f"a malformed frame: {exc}")
    ctx.require(frames, "no video frame arrived")
    status = await peer.result("status")
    problems = []
    if any(f.magic != crossdesk.MAGIC_H264 for f in frames):
        problems.append("a frame without the CDV1 magic")
    if any(f.generation != status.get("generation") for f in frames):
        seen = sorted({f.generation for f in frames})
        problems.append(f"generations {seen}, status says {status.get('generation')}")
    if any(f.flags not in (0, 1) for f in frames):
        problems.append(f"flags {sorted({f.flags for f in frames})}")
    sequences = [f.sequence for f in frames]
    if sequences != sorted(sequences) or len(set(sequences)) != len(sequences):
        problems.append(f"sequences not rising: {sequences[:10]}")
    first = frames[0]
    if not first.keyframe or not {7, 8} <= first.nal_types():
        kinds = sorted(first.nal_types())
        problems.append(f"the first frame is not an IDR with SPS and PPS (NAL types {kinds})")
    if any(not f.body.startswith((b"\x00\x00\x00\x01", b"\x00\x00\x01")) for f in frames):
        problems.append("a body that is not Annex B")
    ctx.require(not problems, "; ".join(problems))


@case(
    "CD-video-ack-cap",
    level=Level.MUST,
    section=FLOW,
    rule="Per viewer, unacknowledged output is capped at 8 frames; once acked, more follow.",
    timeout=60,
)
async def ack_cap(ctx: NativeContext) -> None:
    _, viewers, _ = await ctx.video()
    viewer = viewers[0]
    await viewer.wait_frames(crossdesk.UNACKED_FRAMES + 1, 5.0)
    got = len(viewer.binary())
    ctx.observe(f"{got} frames sent with none acknowledged")
    if got < 2:
        ctx.no_evidence("fewer than two frames arrived: the picture is not changing")
    ctx.require(got <= crossdesk.UNACKED_FRAMES, f"{got} frames went out unacknowledged (cap 8)")
    await viewer.ack_all()
    viewer.auto_ack = True
    await viewer.wait_frames(got + 1, FRAME_WAIT)
    ctx.require(len(viewer.binary()) > got, "no frame followed the acknowledgements")


@case(
    "CD-video-keyframe-rate",
    level=Level.MUST,
    section=FLOW,
    rule="{type: keyframe} requests recovery, rate-limited to once per second.",
    timeout=60,
)
async def keyframe_rate(ctx: NativeContext) -> None:
    _, viewers, _ = await ctx.video()
    viewer = viewers[0]
    viewer.auto_ack = True
    await viewer.wait_frames(2, FRAME_WAIT)
    asked = ctx.evidence.now()
    for _ in range(6):
        await viewer.keyframe()
        await asyncio.sleep(0.15)
    await asyncio.sleep(2.2)
    assert viewer.socket is not None
    times = [f.t for f in viewer.socket.received if isinstance(f.data, bytes) and f.t > asked
             and f.data[20:24] == b"\x00\x00\x00\x01"]  # fmt: skip
    ctx.observe(f"keyframes at {[round(t - asked, 2) for t in times]} s after the requests")
    ctx.require(times, "no keyframe followed six requests")
    close = [b - a for a, b in itertools.pairwise(times) if b - a < 0.8]
    if close:
        ctx.depart(f"keyframes {min(close):.2f} s apart (at most one a second)")


@case(
    "CD-video-stalled-viewer-isolation",
    level=Level.MUST,
    section=FLOW,
    rule="A viewer that stops acknowledging is skipped without blocking the others.",
    timeout=60,
)
async def stalled_isolation(ctx: NativeContext) -> None:
    _, viewers, _ = await ctx.video(viewers=2)
    stalled, healthy = viewers
    healthy.auto_ack = True
    await asyncio.sleep(5.0)
    slow, fast = len(stalled.binary()), len(healthy.binary())
    ctx.observe(f"stalled viewer {slow} frames, acknowledging viewer {fast}")
    if fast < 2:
        ctx.no_evidence("the acknowledging viewer got fewer than two frames")
    ctx.require(slow <= crossdesk.UNACKED_FRAMES, f"the stalled viewer got {slow} frames")
    ctx.require(fast > slow, "the acknowledging viewer got no more than the stalled one")


@case(
    "CD-video-client-message-limit",
    level=Level.MUST,
    section=AUTH,
    rule="Client messages are limited to 1024 bytes: a larger one closes the socket.",
)
async def message_limit(ctx: NativeContext) -> None:
    _, viewers, _ = await ctx.video()
    viewer = viewers[0]
    assert viewer.socket is not None
    await viewer.socket.send(json.dumps({"type": "ack", "padding": "x" * 2000}))
    ended = await viewer.socket.wait_closed(5)
    ctx.require(ended is not None, "a 2 KB client message did not close the socket")


@case(
    "CD-video-revoke",
    level=Level.MUST,
    section=AUTH,
    rule="video_revoke cancels the sockets it names.",
)
async def revoke(ctx: NativeContext) -> None:
    peer, viewers, _ = await ctx.video()
    await viewers[0].wait_frames(1, FRAME_WAIT)
    await peer.result("video_revoke")
    assert viewers[0].socket is not None
    ended = await viewers[0].socket.wait_closed(5)
    ctx.require(ended is not None, "the socket stayed open after video_revoke")


@case(
    "CD-video-generation-change",
    level=Level.MUST,
    section=AUTH,
    rule="A native generation change (display) cancels the video sockets.",
)
async def generation_change(ctx: NativeContext) -> None:
    peer, viewers, _ = await ctx.video()
    await viewers[0].wait_frames(1, FRAME_WAIT)
    await peer.result("display", index=0)
    assert viewers[0].socket is not None
    ended = await viewers[0].socket.wait_closed(5)
    ctx.require(ended is not None, "the socket stayed open after a generation change")


@case(
    "CD-video-max-viewers",
    level=Level.MUST,
    section=AUTH,
    rule="At most 8 authorized viewers: a ninth gets no video.",
    timeout=90,
)
async def max_viewers(ctx: NativeContext) -> None:
    _, viewers, _ = await ctx.video(viewers=crossdesk.MAX_VIEWERS + 1)
    for viewer in viewers:
        viewer.auto_ack = True
    await asyncio.sleep(4.0)
    served = [v for v in viewers if v.binary() and v.socket is not None and not v.socket.closed]
    ctx.observe(f"{len(served)} of 9 viewers get video")
    ctx.require(len(served) <= crossdesk.MAX_VIEWERS, f"{len(served)} viewers get video")


@case(
    "CD-video-nv12-framing",
    level=Level.MUST,
    section=FLOW,
    rule="With decode_path minirtc each message is a CDN1 frame: flags 1, even width and "
    "height at most 8192, size exactly 32 + width × height × 3/2.",
    timeout=60,
)
async def nv12(ctx: NativeContext) -> None:
    _, viewers, _ = await ctx.video(decode_path="minirtc")
    viewer = viewers[0]
    viewer.auto_ack = True
    await viewer.wait_frames(2, FRAME_WAIT)
    ctx.require(viewer.binary(), "no NV12 frame arrived")
    for raw in viewer.binary():
        try:
            frame = parse_frame(raw.data)  # type: ignore[arg-type]
        except BadFrame as exc:
            ctx.depart(f"a malformed frame: {exc}")
        ctx.require(frame.magic == crossdesk.MAGIC_NV12, f"magic {frame.magic:#x}, not CDN1")
        ctx.require(frame.flags == 1, f"flags {frame.flags}")
        width, height = frame.width or 0, frame.height or 0
        ctx.require(width % 2 == 0 and height % 2 == 0, f"odd dimensions {width}×{height}")
        ctx.require(
            max(width, height) <= crossdesk.NV12_MAX_SIDE and min(width, height) > 0,
            f"dimensions {width}×{height}",
        )
        expected = 32 + width * height * 3 // 2
        ctx.require(
            len(raw.data) == expected, f"{len(raw.data)} bytes, not 32 + w·h·3/2 = {expected}"
        )


@case(
    "CD-video-nv12-one-unacked",
    level=Level.MUST,
    section=FLOW,
    rule="In NV12 at most one unacknowledged picture goes to a viewer.",
    timeout=60,
)
async def nv12_one(ctx: NativeContext) -> None:
    _, viewers, _ = await ctx.video(decode_path="minirtc")
    await asyncio.sleep(3.0)
    got = len(viewers[0].binary())
    ctx.observe(f"{got} pictures with none acknowledged")
    if got == 0:
        ctx.no_evidence("no NV12 picture arrived")
    ctx.require(got <= 1, f"{got} pictures went out unacknowledged (one at most)")


@case(
    "CD-video-stalled-disconnect",
    level=Level.MUST,
    section=FLOW,
    rule="A viewer whose oldest outstanding frame stays unacknowledged for 10 seconds is "
    "disconnected.",
    timeout=60,
)
async def stalled_disconnect(ctx: NativeContext) -> None:
    _, viewers, _ = await ctx.video(decode_path="minirtc")
    viewer = viewers[0]
    first = await viewer.wait_frames(1, FRAME_WAIT)
    if not first:
        ctx.no_evidence("no picture arrived")
    assert viewer.socket is not None
    ended = await viewer.socket.wait_closed(crossdesk.STALLED_VIEWER_SECONDS + 6)
    ctx.require(ended is not None, "a viewer silent for 16 s is still connected")
    waited = ended.t - first[0].t
    ctx.observe(
        f"disconnected {waited:.1f} s after its first unacknowledged picture ({ended.code})"
    )
    ctx.require(
        waited >= crossdesk.STALLED_VIEWER_SECONDS - 2, f"disconnected after only {waited:.1f} s"
    )
