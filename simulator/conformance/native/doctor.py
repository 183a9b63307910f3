"""`doctor --json`: the video capabilities an adapter advertises before it is started.

Section: Live video ("`doctor --json` advertises `automation_video_transport`
..."; "`hello` repeats these without the `automation_` prefix"). The caller
runs the doctor command before it starts the adapter and refuses one that
does not advertise the loopback transport, so the doctor's stdout is wire
like the adapter's own: it is what the case judges. The command is the
target's (`--doctor-command`; Tetherbed's own with its own adapter).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.native.environment import NativeContext
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire import crossdesk

SECTION = "Live video › doctor --json"
#: Seconds the doctor may take (it probes the encoder).
DOCTOR_WAIT = 60.0
EXPECTED = {
    crossdesk.DOCTOR_VIDEO_TRANSPORT: crossdesk.VIDEO_TRANSPORT,
    crossdesk.DOCTOR_VIDEO_PROTOCOLS: list(crossdesk.VIDEO_PROTOCOLS),
    crossdesk.DOCTOR_VIDEO_DECODERS: list(crossdesk.VIDEO_DECODERS),
}


async def doctor(ctx: NativeContext) -> dict[str, Any]:
    """Run the doctor command; its stdout must be one JSON object."""
    argv = ctx.environment.doctor
    assert argv is not None  # the environment skips the case otherwise
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **ctx.environment.env},
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), DOCTOR_WAIT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        ctx.depart(f"`{' '.join(argv)}` did not finish within {DOCTOR_WAIT:g} s")
    ctx.evidence.received("doctor", out)
    if err.strip():
        ctx.evidence.note("doctor", f"stderr (diagnostics only): {err.decode(errors='replace')}")
    ctx.observe(f"exit status {proc.returncode}")
    try:
        fields = json.loads(out)
    except ValueError:
        ctx.depart(f"stdout is not one JSON object: {out[:120]!r}")
    ctx.require(isinstance(fields, dict), f"stdout is {type(fields).__name__}, not an object")
    return fields


@case(
    "CD-doctor-json",
    level=Level.MUST,
    section=SECTION,
    rule='`doctor --json` advertises automation_video_transport "loopback-websocket/1", '
    'automation_video_protocols ["h264-annexb/1", "nv12/1"] and automation_video_decoders '
    '["auto", "software"].',
    needs=("doctor",),
    timeout=90.0,
)
async def doctor_json(ctx: NativeContext) -> None:
    fields = await doctor(ctx)
    wrong = [
        f"{name} is {fields.get(name, 'absent')!r}"
        for name, value in EXPECTED.items()
        if (sorted(fields[name]) if isinstance(fields.get(name), list) else fields.get(name))
        != (sorted(value) if isinstance(value, list) else value)
    ]
    if wrong:
        ctx.depart("; ".join(wrong))


@case(
    "CD-doctor-hello-agree",
    level=Level.MUST,
    section=SECTION,
    rule="`hello` repeats the doctor's automation_video_* values without the automation_ prefix.",
    needs=("doctor",),
    timeout=90.0,
)
async def doctor_hello_agree(ctx: NativeContext) -> None:
    fields = await doctor(ctx)
    peer = await ctx.adapter()
    hello = await peer.result("hello", protocol=crossdesk.PROTOCOL)
    differ = []
    for name in EXPECTED:
        short = name.removeprefix(crossdesk.DOCTOR_PREFIX)
        if fields.get(name) != hello.get(short):
            differ.append(f"doctor {name} {fields.get(name, 'absent')!r}, hello {short} "
                          f"{hello.get(short, 'absent')!r}")  # fmt: skip
    if differ:
        ctx.depart("; ".join(differ))
