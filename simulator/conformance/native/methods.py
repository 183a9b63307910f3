"""Each method's arguments and answers: connect and status, screenshot and preview images,
actions' payloads, display, cancel, viewer_control, exit and EOF.

Sections: Methods; Images and observations; Actions.
"""

from __future__ import annotations

import asyncio
import base64
import struct
import time

from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.native.envelope import refused, waiting_screenshot
from tetherbed.simulator.conformance.native.environment import NativeContext
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire import crossdesk

METHODS = "Methods"
IMAGES = "Images and observations"
ACTIONS = "Actions"
METADATA = ("generation", "geometry_epoch", "frame_id", "display_index", "source_size",
            "source_rect", "image_size", "frame_age_ms")  # fmt: skip
STATUS_FIELDS = ("state", "transport_state", "geometry_epoch", "frame_age_ms", "source_size",
                 "control_allowed", "human_paused", "displays")  # fmt: skip


def png_size(ctx: NativeContext, image: dict) -> tuple[int, int, int]:
    """(width, height, bytes) of an image result's PNG; departs when it is not one."""
    ctx.require(image.get("mime_type") == "image/png", f"mime_type is {image.get('mime_type')!r}")
    try:
        data = base64.b64decode(str(image.get("data", "")), validate=True)
    except ValueError:
        ctx.depart("the image data is not base64")
    ctx.require(data.startswith(b"\x89PNG\r\n\x1a\n"), "the image data is not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    return width, height, len(data)


@case(
    "CD-connect-arguments",
    level=Level.MUST,
    section=f"{METHODS} (connect)",
    rule="connect takes a 9-digit device, mode observe or control, display 0-63, decode_path "
    "browser or minirtc and decoder auto or software; anything else is rejected.",
)
async def connect_arguments(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    good = {"method": "connect", "device": ctx.device, "mode": "observe", "display": 0}
    for change, what in (
        ({"device": "12345"}, "a 5-digit device"),
        ({"mode": "admin"}, "mode admin"),
        ({"display": 64}, "display 64"),
        ({"decode_path": "gpu"}, "decode_path gpu"),
        ({"decoder": "hardware"}, "decoder hardware"),
    ):
        await refused(ctx, peer, {**good, **change, "id": peer.new_id()}, what)


@case(
    "CD-connect-ready",
    level=Level.MUST,
    section=f"{METHODS} (connect, status)",
    rule="connect returns at once; status then reaches ready and reports transport_state, "
    "geometry_epoch, frame_age_ms, source_size, control_allowed, human_paused and displays.",
)
async def connect_ready(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    started = time.monotonic()
    answer = await peer.call("connect", device=ctx.device, mode="control", display=0)
    took = time.monotonic() - started
    ctx.require(answer.ok, f"connect failed: {answer.describe()}")
    ctx.observe(f"connect answered in {took:.2f} s")
    status = await ctx.wait_ready(peer)
    missing = [name for name in STATUS_FIELDS if name not in status]
    ctx.require(not missing, f"status lacks {missing}")


@case(
    "CD-connect-wrong-password",
    level=Level.MUST,
    section="Native automation protocol (passwords on descriptor 3)",
    rule="With a wrong password on descriptor 3 the adapter does not connect: connect fails, or "
    "status never becomes ready.",
)
async def wrong_password(ctx: NativeContext) -> None:
    peer = await ctx.adapter(password="not-the-password")
    answer = await peer.call("connect", device=ctx.device, mode="control", display=0)
    if not answer.ok:
        ctx.observe(f"connect refused: {answer.error.get('code')}")
        return
    await asyncio.sleep(2.0)
    status = await peer.result("status")
    ctx.require(status.get("state") != "ready", "a wrong password reached state ready")


@case(
    "CD-status-before-connect",
    level=Level.MUST,
    section=f"{METHODS} (status)",
    rule="status answers before any connect.",
)
async def status_first(ctx: NativeContext) -> None:
    peer = await ctx.adapter()
    status = await peer.result("status")
    ctx.require("state" in status, "status has no state")


@case(
    "CD-screenshot-arguments",
    level=Level.MUST,
    section=f"{METHODS} (screenshot); {IMAGES}",
    rule="screenshot takes max_edge 64-2048 and timeout_ms 0-5000, and after_frame_id only with "
    "generation; anything else is rejected.",
)
async def screenshot_arguments(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    for change, what in (
        ({"max_edge": 63}, "max_edge 63"),
        ({"max_edge": 2049}, "max_edge 2049"),
        ({"timeout_ms": 5001}, "timeout_ms 5001"),
        ({"after_frame_id": 1}, "after_frame_id without generation"),
    ):
        await refused(ctx, peer, {"id": peer.new_id(), "method": "screenshot", **change}, what)


@case(
    "CD-screenshot-image",
    level=Level.MUST,
    section=IMAGES,
    rule="A screenshot is {mime_type image/png, data, metadata} with generation, "
    "geometry_epoch, frame_id, display_index, source_size, source_rect, image_size and "
    "frame_age_ms, an observation_id, at most 2 MiB of PNG and within max_edge.",
)
async def screenshot_image(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    image = await peer.result("screenshot", max_edge=320)
    width, height, size = png_size(ctx, image)
    metadata = image.get("metadata") or {}
    missing = [name for name in METADATA if name not in metadata]
    ctx.require(not missing, f"metadata lacks {missing}")
    ctx.require(max(width, height) <= 320, f"a {width}×{height} image for max_edge 320")
    ctx.require(size <= crossdesk.OBSERVATION_PNG_MAX_BYTES, f"{size} bytes of PNG")
    observation = image.get("observation_id") or metadata.get("observation_id")
    ctx.require(isinstance(observation, str) and observation, "no observation_id")


@case(
    "CD-preview-image",
    level=Level.MUST,
    section=f"{METHODS} (preview); {IMAGES}",
    rule="preview takes max_edge 64-960 and no region, answers at most 256 KiB of PNG, and "
    "creates no observation (a preview cannot authorize input).",
)
async def preview(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    await refused(ctx, peer, {"id": peer.new_id(), "method": "preview", "max_edge": 961}, "961")
    region = {"x": 0, "y": 0, "width": 10, "height": 10}
    await refused(ctx, peer, {"id": peer.new_id(), "method": "preview", "region": region}, "region")
    image = await peer.result("preview", max_edge=480)
    if image.get("unchanged"):
        ctx.no_evidence("the first preview answered unchanged")
    _, _, size = png_size(ctx, image)
    ctx.require(size <= crossdesk.PREVIEW_PNG_MAX_BYTES, f"{size} bytes of preview PNG")
    metadata = image.get("metadata") or {}
    ctx.require(
        "observation_id" not in image and "observation_id" not in metadata,
        "a preview created an observation",
    )


def _action(observation: str, action: dict, operation: str = "op-1") -> dict:
    return {"method": "action", "operation_id": operation, "observation_id": observation,
            "action": action}  # fmt: skip


async def observation(ctx: NativeContext, peer, **fields) -> tuple[str, dict]:  # type: ignore[no-untyped-def]
    image = await peer.result("screenshot", max_edge=256, **fields)
    identifier = image.get("observation_id") or (image.get("metadata") or {}).get("observation_id")
    if not identifier:
        ctx.depart("the screenshot has no observation_id")
    return str(identifier), (image.get("metadata") or {}).get("image_size") or {}


@case(
    "CD-action-arguments",
    level=Level.MUST,
    section=ACTIONS,
    rule="Action payloads are checked: scroll ticks 1-10, a drag path of 2-128 points, hotkey "
    "2-6 unique keys, type_text at most 16 KiB, a known button and type.",
)
async def action_arguments(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    obs, _ = await observation(ctx, peer)
    for number, (action, what) in enumerate((
        ({"type": "scroll", "x": 1, "y": 1, "direction": "up", "ticks": 11}, "ticks 11"),
        ({"type": "drag", "path": [{"x": 1, "y": 1}]}, "a one-point drag"),
        ({"type": "hotkey", "keys": ["ctrl"]}, "a one-key hotkey"),
        ({"type": "hotkey", "keys": ["ctrl", "ctrl"]}, "a hotkey with a repeated key"),
        ({"type": "type_text", "text": "x" * (16 * 1024 + 1)}, "16 KiB + 1 of text"),
        ({"type": "click", "x": 1, "y": 1, "button": "side"}, "button side"),
        ({"type": "teleport", "x": 1, "y": 1}, "an unknown action type"),
        ({"type": "click", "x": 1, "y": 1, "force": True}, "an unknown action field"),
    )):  # fmt: skip
        message = {"id": peer.new_id(), **_action(obs, action, f"bad-{number}")}
        await refused(ctx, peer, message, what)


@case(
    "CD-action-coordinates",
    level=Level.MUST,
    section=ACTIONS,
    rule="Coordinates must satisfy 0 <= x < image_width and 0 <= y < image_height of the "
    "observation: x = width is refused before anything is sent.",
)
async def coordinates(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    obs, size = await observation(ctx, peer)
    width = int(size.get("width") or 0)
    ctx.require(width > 0, f"image_size is {size!r}")
    answer = await peer.call(**_action(obs, {"type": "move", "x": width, "y": 0}))
    if answer.ok:
        ctx.require(
            answer.result.get("status") == "failed_before_submit",
            f"a move to x = width was {answer.result.get('status')!r}",
        )


@case(
    "CD-action-observe-only",
    level=Level.MUST,
    section=f"{METHODS} (control cannot override observe-only permission)",
    rule="In observe mode an action is refused, and control {enabled: true} cannot change that.",
)
async def observe_only(ctx: NativeContext) -> None:
    peer = await ctx.connected(mode="observe")
    await peer.call("control", enabled=True)
    obs, _ = await observation(ctx, peer)
    answer = await peer.call(**_action(obs, {"type": "move", "x": 1, "y": 1}))
    if answer.ok:
        ctx.require(
            answer.result.get("status") == "failed_before_submit",
            f"an observe-only action was {answer.result.get('status')!r}",
        )
    else:
        ctx.observe(f"refused with {answer.error.get('code')}")


@case(
    "CD-display-arguments",
    level=Level.MUST,
    section=f"{METHODS} (display)",
    rule="display takes an index 0-63; viewer_control an operation pause, resume or "
    "disconnect; anything else is rejected.",
)
async def display_arguments(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    await refused(ctx, peer, {"id": peer.new_id(), "method": "display", "index": 64}, "index 64")
    await refused(
        ctx, peer, {"id": peer.new_id(), "method": "viewer_control", "operation": "explode"},
        "viewer_control explode",
    )  # fmt: skip


@case(
    "CD-cancel",
    level=Level.MUST,
    section=f"{METHODS} (cancel)",
    rule="cancel stops a queued or in-flight capture: the waiting screenshot is answered at "
    "once, and cancel itself is answered.",
)
async def cancel(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    status = await peer.result("status")
    waiting = await peer.send(waiting_screenshot(status, 5000))
    await asyncio.sleep(0.3)
    started = ctx.evidence.now()
    await peer.call("cancel", request_id=waiting)
    answer = await peer.response(waiting, 5)
    ctx.require(answer is not None, "the cancelled screenshot was never answered")
    ctx.require(answer.t - started < 2.0, f"answered {answer.t - started:.1f} s after cancel")


@case(
    "CD-exit",
    level=Level.MUST,
    section=f"{METHODS} (exit); Envelope (EOF, signals and exit disconnect)",
    rule="exit ends the process; so does EOF on stdin.",
)
async def exit_and_eof(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    await peer.send({"method": "exit"})
    code = await peer.wait_exit(10)
    ctx.require(code is not None, "still running 10 s after exit")
    other = await ctx.adapter()
    await other.result("status")
    await other.close_stdin()
    code = await other.wait_exit(10)
    ctx.require(code is not None, "still running 10 s after EOF on stdin")
