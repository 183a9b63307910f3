"""The output side: a caller that stops reading stdout, and one that closes stdin.

Section: Envelope ("The output queue is bounded to 64 messages and 8 MiB; a
blocked output pipe terminates after 10 seconds without progress. EOF ...
disconnect").
"""

from __future__ import annotations

from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.native.environment import NativeContext
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire import crossdesk

#: Seconds of scheduling noise allowed on the 10 s rule.
SLACK = 3.0


@case(
    "CD-output-blocked-pipe",
    level=Level.MUST,
    section="Envelope (a blocked output pipe terminates after 10 seconds without progress)",
    rule="When the caller stops reading stdout while responses wait, the adapter ends after "
    "10 s without progress (not before, and not never).",
    timeout=90,
)
async def blocked_pipe(ctx: NativeContext) -> None:
    peer = await ctx.connected()
    await peer.pause_reading()
    stopped = ctx.evidence.now()
    for number in range(400):  # each status answer is about a kilobyte: more than a pipe holds
        line = f'{{"id":{1_000_000 + number},"method":"status"}}\n'.encode()
        if not await peer.send_raw(line, timeout=0.5):
            break
    window = crossdesk.BLOCKED_PIPE_SECONDS + 2 * SLACK
    code = await peer.wait_exit(window)
    if code is None:
        ctx.depart(f"still running with its output blocked for {window:g} s")
    took = ctx.evidence.now() - stopped
    ctx.observe(f"exited with {code} {took:.1f} s after its stdout stopped being read")
    ctx.require(took >= crossdesk.BLOCKED_PIPE_SECONDS - SLACK, f"gave up after only {took:.1f} s")
