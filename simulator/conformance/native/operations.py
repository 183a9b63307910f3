"""The operation cache: the same id and arguments retrieve the result, different ones conflict.

Section: Actions (results, operation ids, the 128-entry cache).
"""

from __future__ import annotations

from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.native.environment import NativeContext
from tetherbed.simulator.conformance.native.methods import observation
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire import crossdesk

SECTION = "Actions (operation ids)"


def _move(obs: str, operation: str, x: int) -> dict:
    return {"operation_id": operation, "observation_id": obs,
            "action": {"type": "move", "x": x, "y": 5}}  # fmt: skip


@case(
    "CD-ops-result",
    level=Level.MUST,
    section=SECTION,
    rule="An action's result has status submitted, in_progress, failed_before_submit or "
    "outcome_unknown, the operation_id, retryable and side_effect_possible, and once completed "
    "its generation and after_frame_id.",
)
async def result_fields(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    obs, _ = await observation(ctx, peer)
    result = await peer.result("action", **_move(obs, "op-result", 10))
    problems = []
    if result.get("status") not in crossdesk.ACTION_STATUSES:
        problems.append(f"status {result.get('status')!r}")
    if result.get("operation_id") != "op-result":
        problems.append(f"operation_id {result.get('operation_id')!r}")
    for name in ("retryable", "side_effect_possible"):
        if not isinstance(result.get(name), bool):
            problems.append(f"{name} {result.get(name)!r}")
    if result.get("status") == "submitted":
        problems += [f"{n} absent" for n in ("generation", "after_frame_id") if n not in result]
    ctx.require(not problems, "action result: " + "; ".join(problems))


@case(
    "CD-ops-cached",
    level=Level.MUST,
    section=SECTION,
    rule="The same operation id with the same arguments retrieves the cached result.",
)
async def cached(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    obs, _ = await observation(ctx, peer)
    first = await peer.result("action", **_move(obs, "op-same", 12))
    again = await peer.call("action", **_move(obs, "op-same", 12))
    ctx.require(again.ok, f"the same operation again was {again.describe()}")
    ctx.require(again.result == first, f"a different result the second time: {again.result!r}")


@case(
    "CD-ops-conflict",
    level=Level.MUST,
    section=SECTION,
    rule="The same operation id with different arguments conflicts: it is refused, not run, "
    "and not answered with the other arguments' result.",
)
async def conflict(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    obs, _ = await observation(ctx, peer)
    await peer.result("action", **_move(obs, "op-x", 12))
    answer = await peer.call("action", **_move(obs, "op-x", 40))
    ctx.require(answer.ok is False, f"different arguments under one id were {answer.describe()}")
