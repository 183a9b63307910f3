"""Observation rules: what authorizes an action, for how long, and what invalidates it.

Section: Images and observations; Actions ("Observations expire after 30
seconds, retain at most 32 entries, and are invalidated by geometry/display
generation changes").
"""

from __future__ import annotations

import asyncio
import time

from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.native.environment import NativeContext
from tetherbed.simulator.conformance.native.methods import observation
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire import crossdesk

SECTION = "Actions (observations)"


def _move(obs: str, operation: str) -> dict:
    return {"operation_id": operation, "observation_id": obs,
            "action": {"type": "move", "x": 3, "y": 3}}  # fmt: skip


async def _refused(ctx: NativeContext, peer, obs: str, operation: str, what: str) -> None:  # type: ignore[no-untyped-def]
    answer = await peer.call("action", **_move(obs, operation))
    if answer.ok:
        status = answer.result.get("status")
        ctx.require(status == "failed_before_submit", f"{what}: the action was {status!r}")
    else:
        ctx.observe(f"{what}: refused with {answer.error.get('code')}")


@case(
    "CD-obs-unknown",
    level=Level.MUST,
    section=SECTION,
    rule="An action naming an observation the adapter never made is refused.",
)
async def unknown(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    await _refused(ctx, peer, "obs_999_999", "op-unknown", "an unknown observation")


@case(
    "CD-obs-generation-change",
    level=Level.MUST,
    section=SECTION,
    rule="A display generation change (display) invalidates earlier observations.",
)
async def generation_change(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    obs, _ = await observation(ctx, peer)
    changed = await peer.call("display", index=0)
    ctx.require(changed.ok, f"display 0 failed: {changed.describe()}")
    await ctx.wait_ready(peer)
    await _refused(ctx, peer, obs, "op-after-display", "an observation of the old generation")


@case(
    "CD-obs-retain-32",
    level=Level.MUST,
    section=SECTION,
    rule="At most 32 observations are retained: after 33 screenshots the first no longer "
    "authorizes an action, the last does.",
    timeout=120,
)
async def retain(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    made = [(await observation(ctx, peer))[0] for _ in range(crossdesk.OBSERVATIONS_KEPT + 1)]
    await _refused(ctx, peer, made[0], "op-oldest", "the 33rd-newest observation")
    answer = await peer.call("action", operation_id="op-newest", observation_id=made[-1],
                             action={"type": "move", "x": 3, "y": 3})  # fmt: skip
    ctx.require(answer.ok and answer.result.get("status") != "failed_before_submit",
                f"the newest observation was {answer.describe()}")  # fmt: skip


@case(
    "CD-obs-expiry",
    level=Level.MUST,
    section=SECTION,
    rule="Observations expire after 30 seconds.",
    timeout=90,
)
async def expiry(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    obs, _ = await observation(ctx, peer)
    await asyncio.sleep(crossdesk.OBSERVATION_TTL_SECONDS + 1.5)
    await _refused(ctx, peer, obs, "op-expired", "a 31-second-old observation")


@case(
    "CD-obs-after-frame-wait",
    level=Level.MUST,
    section="Images and observations",
    rule="A screenshot with after_frame_id (and generation) waits at most timeout_ms for a "
    "newer frame, then answers.",
)
async def after_frame(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    status = await peer.result("status")
    started = time.monotonic()
    answer = await peer.call("screenshot", max_edge=128, after_frame_id=2**40,
                             generation=status.get("generation"), timeout_ms=400)  # fmt: skip
    took = time.monotonic() - started
    ctx.observe(f"answered after {took:.2f} s ({answer.describe()})")
    ctx.require(took < 0.4 + 2.5, f"a 400 ms wait took {took:.1f} s")


@case(
    "CD-preview-unchanged",
    level=Level.INFO,
    section="Images and observations (a preview can return unchanged)",
    rule="Whether a preview with the current frame id answers {unchanged: true, ...}.",
)
async def preview_unchanged(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    first = await peer.result("preview", max_edge=128)
    metadata = first.get("metadata") or {}
    answer = await peer.result("preview", max_edge=128, after_frame_id=metadata.get("frame_id"),
                               generation=metadata.get("generation"), timeout_ms=0)  # fmt: skip
    ctx.observe("unchanged" if answer.get("unchanged") else "answered a new image")
