"""Computer use, where the agent advertises it: screenshots and their limits, input and
INPUT_OUT_OF_BOUNDS, windows, the clipboard policy, permissions.

Sections: Computer Use (SCREENSHOT_REQUEST / RESPONSE, INPUT_ACTION, other
computer-use ops); Error › INPUT_OUT_OF_BOUNDS, WINDOW_STALE,
CLIPBOARD_CONCEALED, FILE_TOO_LARGE. The agent needs a display (--xvfb or
--display); the cases take it one at a time, since input moves one pointer.
"""

from __future__ import annotations

import asyncio
import base64
import struct
import sys

from tetherbed.simulator.conformance.agent.answers import quote, require_error, require_type
from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.agent.platform import AckPolicy, AgentConnection
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.processes import CaseProcess
from tetherbed.simulator.conformance.registry import case

SECTION = "Computer Use"
SCREENSHOT = f"{SECTION} › SCREENSHOT_REQUEST / SCREENSHOT_RESPONSE"
INPUT = f"{SECTION} › INPUT_ACTION"
OTHER = f"{SECTION} › Other computer-use ops"
DESKTOP = {"needs": {"display"}, "locks": {"display"}}


async def desktop(ctx: AgentContext, policy: AckPolicy | None = None) -> AgentConnection:
    conn = await ctx.connect(policy)
    if "computer_use" not in conn.advertised:
        ctx.not_applicable("the agent does not advertise computer_use")
    return conn


def _screenshot(**fields: object) -> dict:
    payload = {"monitor": 0, "quality": 75, "region": None, "window_id": None, "format": "png",
               "include_cursor": False}  # fmt: skip
    payload.update(fields)
    return payload


def image_size(data: bytes) -> tuple[str, int, int] | None:
    """(format, width, height) of a PNG or baseline/progressive JPEG, None otherwise."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return "png", width, height
    if data.startswith(b"\xff\xd8"):
        index = 2
        while index + 9 < len(data):
            if data[index] != 0xFF:
                return None
            marker = data[index + 1]
            length = struct.unpack(">H", data[index + 2 : index + 4])[0]
            if marker in (0xC0, 0xC1, 0xC2):
                height, width = struct.unpack(">HH", data[index + 5 : index + 9])
                return "jpeg", width, height
            index += 2 + length
    return None


async def _shot(
    ctx: AgentContext, conn: AgentConnection, what: str, **fields: object
) -> tuple[dict, tuple]:
    got = require_type(
        await conn.request("SCREENSHOT_REQUEST", _screenshot(**fields), timeout=20),
        "SCREENSHOT_RESPONSE",
        what,
    )
    try:
        data = base64.b64decode(str(got.get("image_base64", "")), validate=True)
    except ValueError:
        ctx.depart(f"{what}: image_base64 is not base64")
    size = image_size(data)
    ctx.require(size is not None, f"{what}: the image is neither PNG nor JPEG")
    return got, size  # type: ignore[return-value]


@case(
    "LE-cu-screenshot-png",
    level=Level.MUST,
    section=SCREENSHOT,
    rule="A PNG screenshot answers SCREENSHOT_RESPONSE with the image, mime_type image/png, "
    "its width and height, monitor, region, display_scale, logical_size and meta.",
    **DESKTOP,
)
async def screenshot_png(ctx: AgentContext) -> None:
    conn = await desktop(ctx)
    got, (kind, width, height) = await _shot(ctx, conn, "a PNG screenshot")
    ctx.require(
        kind == "png" and got.get("mime_type") == "image/png", f"{kind}, {got.get('mime_type')}"
    )
    said = (got.get("width"), got.get("height"))
    ctx.require(said == (width, height), f"says {said}, the image is {width}×{height}")
    missing = [
        k for k in ("monitor", "region", "display_scale", "logical_size", "meta") if k not in got
    ]
    ctx.require(not missing, f"SCREENSHOT_RESPONSE lacks {missing}")
    meta = got.get("meta") or {}
    ctx.require({"origin", "display_id"} <= set(meta), f"meta is {meta!r}")


@case(
    "LE-cu-screenshot-jpeg",
    level=Level.MUST,
    section=SCREENSHOT,
    rule="format jpeg answers a JPEG image with mime_type image/jpeg.",
    **DESKTOP,
)
async def screenshot_jpeg(ctx: AgentContext) -> None:
    conn = await desktop(ctx)
    got, (kind, _, _) = await _shot(ctx, conn, "a JPEG screenshot", format="jpeg", quality=60)
    ctx.require(
        kind == "jpeg" and got.get("mime_type") == "image/jpeg", f"{kind}, {got.get('mime_type')}"
    )


@case(
    "LE-cu-screenshot-region",
    level=Level.MUST,
    section=SCREENSHOT,
    rule="A region [x1, y1, x2, y2] in display pixels captures that rectangle and is echoed; "
    "region and window_id together are refused.",
    **DESKTOP,
)
async def screenshot_region(ctx: AgentContext) -> None:
    conn = await desktop(ctx)
    got, (_, width, height) = await _shot(ctx, conn, "a region", region=[10, 20, 110, 70])
    ctx.require((width, height) == (100, 50), f"region 100×50 came back {width}×{height}")
    ctx.require(got.get("region") == [10, 20, 110, 70], f"region echoed as {got.get('region')!r}")
    both = await conn.request(
        "SCREENSHOT_REQUEST", _screenshot(region=[0, 0, 10, 10], window_id="win_x"), timeout=20
    )
    require_error(both, (), "region and window_id together")


@case(
    "LE-cu-screenshot-too-large",
    level=Level.MUST,
    section=f"{SCREENSHOT}; Error › FILE_TOO_LARGE",
    rule="Raw screenshot bytes over max_file_size_bytes return FILE_TOO_LARGE, not an "
    "envelope over the limit.",
    **DESKTOP,
)
async def screenshot_too_large(ctx: AgentContext) -> None:
    conn = await desktop(ctx, AckPolicy(max_file_size_bytes=512))
    answer = await conn.request("SCREENSHOT_REQUEST", _screenshot(), timeout=20)
    require_error(answer, "FILE_TOO_LARGE", "a screenshot over a 512-byte limit")


def _input(action: str, **fields: object) -> dict:
    payload: dict = {"action": action}
    payload.update(fields)
    return payload


@case(
    "LE-cu-input-out-of-bounds",
    level=Level.MUST,
    section=f"{INPUT}; Error › INPUT_OUT_OF_BOUNDS",
    rule="A coordinate outside the union of the displays is INPUT_OUT_OF_BOUNDS, with the "
    "valid display rects in the error.",
    **DESKTOP,
)
async def out_of_bounds(ctx: AgentContext) -> None:
    conn = await desktop(ctx)
    answer = await conn.request("INPUT_ACTION", _input("mouse_move", coordinate=[100000, 100000]))
    require_error(answer, "INPUT_OUT_OF_BOUNDS", "a move to (100000, 100000)")
    details = answer.payload.get("details")
    ctx.require(isinstance(details, dict) and details, "the error carries no display rects")


@case(
    "LE-cu-input-move",
    level=Level.MUST,
    section=f"{INPUT}; {OTHER} (CURSOR_POSITION_REQUEST)",
    rule="mouse_move to an in-bounds coordinate answers ACK and the cursor is then there.",
    **DESKTOP,
)
async def input_move(ctx: AgentContext) -> None:
    conn = await desktop(ctx)
    require_type(
        await conn.request("INPUT_ACTION", _input("mouse_move", coordinate=[37, 41])), "ACK", "move"
    )
    got = require_type(
        await conn.request("CURSOR_POSITION_REQUEST", {}), "CURSOR_POSITION_RESPONSE", "position"
    )
    ctx.require(
        (got.get("x"), got.get("y")) == (37, 41), f"the cursor is at {got.get('x')},{got.get('y')}"
    )


@case(
    "LE-cu-display-info",
    level=Level.MUST,
    section=OTHER,
    rule="DISPLAY_INFO_REQUEST answers per-monitor index, primary, physical_size, "
    "logical_size, scale and origin.",
    **DESKTOP,
)
async def display_info(ctx: AgentContext) -> None:
    conn = await desktop(ctx)
    got = require_type(
        await conn.request("DISPLAY_INFO_REQUEST", {}), "DISPLAY_INFO_RESPONSE", "display info"
    )
    displays = got.get("displays") or []
    ctx.require(displays, "no displays")
    wanted = {"index", "primary", "physical_size", "logical_size", "scale", "origin"}
    ctx.require(wanted <= set(displays[0]), f"a display lacks {sorted(wanted - set(displays[0]))}")


@case(
    "LE-cu-windows",
    level=Level.MUST,
    section=f"{OTHER}; Error › WINDOW_STALE",
    rule="WINDOW_LIST_RESPONSE lists windows with shim-minted win_ ids; WINDOW_FOCUS of an id "
    "that maps to no live window is WINDOW_STALE.",
    **DESKTOP,
)
async def windows(ctx: AgentContext) -> None:
    conn = await desktop(ctx)
    await _a_window(ctx)
    got = require_type(
        await conn.request("WINDOW_LIST_REQUEST", {}), "WINDOW_LIST_RESPONSE", "window list"
    )
    ids = [w.get("window_id") for w in got.get("windows") or []]
    if not ids:
        ctx.no_evidence("no window is listed, not even the one the case opened")
    bad = [i for i in ids if not str(i).startswith("win_")]
    ctx.require(not bad, f"window ids not minted as win_...: {bad[:3]}")
    stale = await conn.request(
        "WINDOW_FOCUS", {"window_id": "win_00000000-0000-4000-8000-000000000000"}
    )
    require_error(stale, "WINDOW_STALE", "focusing a window that does not exist")


async def _a_window(ctx: AgentContext) -> None:
    """Open a window on the agent's display (the probe app) so there is one to list."""
    events = ctx.workspace.logs / "probe-events.jsonl"
    probe = CaseProcess(
        "probe-window",
        [sys.executable, "-m", "tetherbed.simulator.peripherals.probe_app", "--events",
         str(events), "--geometry", "320x200+40+40"],
        env=dict(ctx.environment.extra_env),
        log=ctx.workspace.logs / "probe.log",
        evidence=ctx.evidence,
    )  # fmt: skip
    ctx.processes.append(probe)
    for _ in range(200):
        if events.exists() and '"ready"' in events.read_text(encoding="utf-8", errors="replace"):
            return
        if probe.returncode is not None:
            break
        await asyncio.sleep(0.1)
    ctx.no_evidence("the probe window did not come up on the agent's display")


@case(
    "LE-cu-clipboard",
    level=Level.MUST,
    section=f"{OTHER}; Error › CLIPBOARD_CONCEALED",
    rule="CLIPBOARD_WRITE answers ACK; CLIPBOARD_READ answers the text or, under a sandbox "
    "policy, CLIPBOARD_CONCEALED.",
    **DESKTOP,
)
async def clipboard(ctx: AgentContext) -> None:
    conn = await desktop(ctx)
    require_type(
        await conn.request("CLIPBOARD_WRITE", {"text": "conformance"}), "ACK", "clipboard write"
    )
    answer = await conn.request("CLIPBOARD_READ", {})
    if answer.type == "CLIPBOARD_READ_RESPONSE":
        ctx.observe(f"the clipboard reads {answer.payload.get('text')!r}")
    else:
        require_error(answer, "CLIPBOARD_CONCEALED", "clipboard read")
        ctx.observe("the clipboard is concealed")


@case(
    "LE-cu-permissions",
    level=Level.MUST,
    section=OTHER,
    rule="PERMISSIONS_CHECK_REQUEST answers PERMISSIONS_CHECK_RESPONSE.",
    **DESKTOP,
)
async def permissions(ctx: AgentContext) -> None:
    conn = await desktop(ctx)
    got = require_type(
        await conn.request("PERMISSIONS_CHECK_REQUEST", {}), "PERMISSIONS_CHECK_RESPONSE", "check"
    )
    ctx.require(
        isinstance(got.get("permissions"), dict), f"permissions is {got.get('permissions')!r}"
    )


@case(
    "LE-cu-not-granted",
    level=Level.MUST,
    section="Message Types › HELLO_ACK (the shim enforces the granted subset)",
    rule="When the platform does not grant computer_use, a screenshot is CAPABILITY_NOT_GRANTED.",
    **DESKTOP,
)
async def not_granted(ctx: AgentContext) -> None:
    conn = await ctx.connect(AckPolicy(grant={"files", "shell"}))
    if "computer_use" not in conn.advertised:
        ctx.not_applicable("the agent does not advertise computer_use")
    answer = await conn.request("SCREENSHOT_REQUEST", _screenshot(), timeout=20)
    ctx.require(
        answer.type != "SCREENSHOT_RESPONSE", f"an ungranted screenshot got {quote(answer)}"
    )
    require_error(answer, "CAPABILITY_NOT_GRANTED", "an ungranted screenshot")
