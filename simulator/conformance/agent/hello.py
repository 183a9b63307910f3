"""Handshake: HELLO's fields and normalisation, version negotiation, 4426.

Sections: Transport; Message Format; Versioning (Negotiation, Frame-level
version); Message Types › Handshake (HELLO, HELLO.platform, HELLO.arch).
"""

from __future__ import annotations

import json
import platform as host
import re
from pathlib import Path

from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.agent.platform import AckPolicy
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.recorded_socket import Frame
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.host import ARCHES, PLATFORMS, detect_platform, normalize_arch

VERSION = re.compile(r"^\d+\.\d+$")
#: Seconds to watch for a reconnect after a close the agent must not come back from.
RECONNECT_WATCH = 8.0


def _this_platform() -> str:
    try:
        proc = Path("/proc/version").read_text(encoding="utf-8", errors="replace")
    except OSError:
        proc = ""
    import sys

    return detect_platform(sys.platform, proc)


@case(
    "LE-hello-first-frame",
    level=Level.MUST,
    section="Message Types › Handshake › HELLO; Message Format",
    rule="On connect the shim sends HELLO first, in the envelope: type, a string id, ts, and "
    "version as major.minor (always emitted).",
)
async def first_frame(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    hello = conn.hello
    assert hello is not None
    envelope = hello.envelope or {}
    ctx.require(isinstance(envelope.get("id"), str) and envelope["id"], "HELLO has no string id")
    ctx.require(
        isinstance(envelope.get("ts"), int | float) and not isinstance(envelope.get("ts"), bool),
        f"HELLO's ts is {envelope.get('ts')!r}, not a number",
    )
    version = envelope.get("version")
    ctx.require(
        isinstance(version, str) and VERSION.match(version),
        f"HELLO's envelope version is {version!r}, not major.minor",
    )


@case(
    "LE-hello-fields",
    level=Level.MUST,
    section="Message Types › Handshake › HELLO",
    rule="HELLO carries shim_version, protocol_version (major.minor), machine_id, platform, arch, "
    "screen_resolution, capabilities, allowed_root, local_llm_models and hardware_devices, "
    "with the types the spec shows.",
)
async def hello_fields(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    payload = conn.hello_payload
    problems = []
    for name in ("shim_version", "machine_id"):
        if not isinstance(payload.get(name), str) or not payload.get(name):
            problems.append(f"{name} is {payload.get(name)!r}")
    if not isinstance(payload.get("protocol_version"), str) or not VERSION.match(
        payload["protocol_version"]
    ):
        problems.append(f"protocol_version is {payload.get('protocol_version')!r}")
    resolution = payload.get("screen_resolution", "absent")
    if resolution is not None and not (
        isinstance(resolution, list)
        and len(resolution) == 2
        and all(isinstance(v, int) and v > 0 for v in resolution)
    ):
        problems.append(f"screen_resolution is {resolution!r}")
    for name in ("capabilities", "local_llm_models", "hardware_devices"):
        if not isinstance(payload.get(name), list):
            problems.append(f"{name} is {payload.get(name, 'absent')!r}, not a list")
    if "allowed_root" not in payload:
        problems.append("allowed_root is absent")
    ctx.require(not problems, "HELLO: " + "; ".join(problems))


@case(
    "LE-hello-arch-normalised",
    level=Level.MUST,
    section="Message Types › HELLO.arch enum",
    rule="The shim normalises arch to x86_64 or arm64 (platform.machine() aliases), matching "
    "the machine it runs on.",
)
async def arch(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    value = conn.hello_payload.get("arch")
    ctx.require(value in ARCHES, f"arch is {value!r}, not one of {ARCHES}")
    try:
        expected = normalize_arch(host.machine())
    except Exception:
        ctx.no_evidence(f"this host's architecture {host.machine()!r} has no spec name")
    ctx.require(value == expected, f"arch is {value!r} on a {host.machine()} machine")


@case(
    "LE-hello-platform",
    level=Level.MUST,
    section="Message Types › HELLO.platform enum",
    rule="platform is one of darwin, linux, windows, wsl2, detected as the table says.",
)
async def platform_name(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    value = conn.hello_payload.get("platform")
    ctx.require(value in PLATFORMS, f"platform is {value!r}, not one of {PLATFORMS}")
    expected = _this_platform()
    ctx.require(value == expected, f"platform is {value!r} on a {expected} host")


@case(
    "LE-hello-files-always",
    level=Level.MUST,
    section="Message Types › Handshake › HELLO (capabilities)",
    rule="A data connection's HELLO advertises the files capability (always present).",
)
async def files_always(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    ctx.require("files" in conn.advertised, f"capabilities {conn.advertised} lack files")


@case(
    "LE-hello-recording-never",
    level=Level.MUST,
    section="Message Types › Handshake (recording)",
    rule="The shim never advertises the recording capability (a reserved design preview).",
)
async def recording_never(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    ctx.require("recording" not in conn.advertised, "HELLO advertises recording")


@case(
    "LE-hello-allowed-root",
    level=Level.MUST,
    section="Message Types › Handshake › HELLO (allowed_root)",
    rule="On a data connection allowed_root is the canonical path of the root it serves.",
)
async def allowed_root(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    value = conn.hello_payload.get("allowed_root")
    ctx.require(value == str(ctx.root), f"allowed_root is {value!r}, the root is {ctx.root}")


@case(
    "LE-hello-shell-opt-in",
    level=Level.MUST,
    section="Shell Execution",
    rule="Without the local --enable-shell opt-in the shell is neither advertised nor accepted: "
    "EXECUTE_COMMAND is refused and nothing runs.",
)
async def shell_opt_in(ctx: AgentContext) -> None:
    conn = await ctx.connect(shell=False)
    ctx.require("shell" not in conn.advertised, "shell is advertised without the opt-in")
    marker = ctx.root / "ran"
    answer = await conn.request(
        "EXECUTE_COMMAND", {"argv": ["touch", str(marker)], "timeout_seconds": 10}
    )
    ctx.require(answer.type == "ERROR", f"EXECUTE_COMMAND was answered {answer.describe()}")
    ctx.require(not marker.exists(), "the command ran although the shell is off")


@case(
    "LE-hello-no-pending-capacity",
    level=Level.MUST,
    section="Backpressure › pending_capacity on every response envelope",
    rule="pending_capacity is omitted (or null) on shim-internal frames like HELLO.",
)
async def hello_capacity(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    value = (conn.hello.envelope if conn.hello else {}).get("pending_capacity")  # type: ignore[union-attr]
    ctx.require(value is None, f"HELLO carries pending_capacity {value!r}")


@case(
    "LE-hello-empty-llm-models",
    level=Level.MUST,
    section="Message Types › Handshake › HELLO (local_llm_models)",
    rule="local_llm_models is empty when the local_llm capability is not advertised.",
)
async def llm_models(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    models = conn.hello_payload.get("local_llm_models")
    if "local_llm" in conn.advertised:
        ctx.require(isinstance(models, list) and models, "local_llm advertised with no models")
    else:
        ctx.require(models == [], f"local_llm_models is {models!r} without local_llm")


@case(
    "LE-hello-screen-resolution",
    level=Level.MUST,
    section="Message Types › Handshake › HELLO (screen_resolution)",
    rule="screen_resolution is null when computer use is not available, [width, height] "
    "when it is.",
)
async def screen_resolution(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    value = conn.hello_payload.get("screen_resolution", "absent")
    if "computer_use" in conn.advertised:
        ctx.require(
            isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value),
            f"computer_use advertised with screen_resolution {value!r}",
        )
    else:
        ctx.require(value is None, f"screen_resolution is {value!r} without computer_use")


@case(
    "LE-hello-bearer-token",
    level=Level.MUST,
    section="Transport (Auth)",
    rule="The shim sends its bearer token in the Authorization header of the WebSocket upgrade, "
    "on the session's data endpoint /ws/local-executor/{session_id}.",
)
async def bearer(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    attempt = ctx.platform.attempts[0]
    ctx.require(attempt.bearer, "the upgrade did not carry `Authorization: Bearer <token>`")
    expected = f"/ws/local-executor/{ctx.session}"
    ctx.require(
        attempt.path.split("?", 1)[0] == expected, f"it dialled {attempt.path}, not {expected}"
    )
    ctx.require(conn.session == ctx.session, "wrong session path")


# --- versions ---------------------------------------------------------------------------


async def _answered_stat(ctx: AgentContext, conn, **extra: object) -> Frame:  # type: ignore[no-untyped-def]
    ctx.write("probe.txt", "probe\n")
    return await conn.request(
        "FILE_STAT", {"path": str(ctx.root / "probe.txt"), "follow_symlinks": True}, **extra
    )


@case(
    "LE-version-minor-negotiated",
    level=Level.MUST,
    section="Versioning › Negotiation",
    rule="Same major, different minor: both sides use min(minors) and carry on; the shim "
    "serves requests after an ACK of 1.0.",
)
async def minor_negotiated(ctx: AgentContext) -> None:
    conn = await ctx.connect(AckPolicy(protocol_version="1.0"))
    ctx.require(not conn.socket.closed, "the agent closed after an ACK of protocol 1.0")
    answer = await _answered_stat(ctx, conn, version="1.0")
    ctx.require(answer.type == "FILE_STAT_RESPONSE", f"FILE_STAT got {answer.describe()}")


@case(
    "LE-version-frames-negotiated",
    level=Level.SHOULD,
    section="Versioning › Frame-level version",
    rule="Non-HELLO frames set version to the negotiated value (1.0 after an ACK of 1.0).",
)
async def frames_negotiated(ctx: AgentContext) -> None:
    conn = await ctx.connect(AckPolicy(protocol_version="1.0"))
    await _answered_stat(ctx, conn, version="1.0")
    others = [f for f in conn.socket.received if f.type not in (None, "HELLO")]
    wrong = sorted({str((f.envelope or {}).get("version")) for f in others} - {"1.0"})
    ctx.require(not wrong, f"frames after the handshake carry version {', '.join(wrong)}")


@case(
    "LE-version-always-emitted",
    level=Level.MUST,
    section="Message Format (version)",
    rule="version is always emitted: every frame the shim sends carries it.",
)
async def always_emitted(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    await _answered_stat(ctx, conn)
    missing = [
        f.describe() for f in conn.socket.received if f.envelope and "version" not in f.envelope
    ]
    ctx.require(not missing, f"frames without version: {', '.join(missing[:5])}")


@case(
    "LE-version-minor-frame-processed",
    level=Level.MUST,
    section="Versioning › Frame-level version",
    rule="A non-HELLO frame with a different minor is processed normally.",
)
async def minor_frame(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    answer = await _answered_stat(ctx, conn, version="1.9")
    ctx.require(answer.type == "FILE_STAT_RESPONSE", f"a 1.9 frame got {answer.describe()}")


@case(
    "LE-version-major-frame-dropped",
    level=Level.MUST,
    section="Versioning › Frame-level version",
    rule="A frame with a different major is dropped (no answer) and the connection carries on.",
)
async def major_frame(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    ctx.write("probe.txt", "probe\n")
    frame = conn.envelope("FILE_STAT", {"path": str(ctx.root / "probe.txt")})
    frame["version"] = "2.0"
    sent = ctx.evidence.now()
    await conn.send(frame)
    answer = await conn.answer_to(frame["id"], timeout=3.0, after=sent)
    ctx.require(
        answer is None, f"a version 2.0 frame was answered with {answer and answer.describe()}"
    )
    later = await _answered_stat(ctx, conn)
    ctx.require(later.type == "FILE_STAT_RESPONSE", "the connection did not carry on")


@case(
    "LE-version-4426-no-reconnect",
    level=Level.MUST,
    section="Versioning › Negotiation; WS close-code table (4426)",
    rule="After close 4426 PROTOCOL_VERSION_MISMATCH the shim does not auto-reconnect until "
    "restarted.",
    timeout=40,
)
async def mismatch_no_reconnect(ctx: AgentContext) -> None:
    reason = json.dumps(
        {
            "error": "PROTOCOL_VERSION_MISMATCH",
            "shim_max": "1.1",
            "platform_max": "2.0",
            "hint": "upgrade the shim",
        }
    )
    policy = AckPolicy(close_instead=(4426, reason))
    conn = await ctx.connect(policy)
    ended = await conn.socket.wait_closed(5)
    ctx.require(ended is not None, "the connection did not end after close 4426")
    again = await ctx.attempts_within(ended.t, RECONNECT_WATCH, ctx.processes[-1])
    if again:
        ctx.depart(f"the agent dialled again {again[0].t - ended.t:.1f} s after 4426")


@case(
    "LE-version-ack-major-mismatch",
    level=Level.INFO,
    section="Versioning › Negotiation (different majors)",
    rule="What the shim does with a HELLO_ACK of another major (the platform should have "
    "closed with 4426 instead): worth knowing, not required.",
    timeout=40,
)
async def ack_major(ctx: AgentContext) -> None:
    conn = await ctx.connect(AckPolicy(protocol_version="2.0"))
    ended = await conn.socket.wait_closed(5)
    if ended is None:
        ctx.depart("the agent accepted a HELLO_ACK of protocol 2.0 and stayed connected")
    ctx.observe(f"the agent ended the connection ({ended.by}, {ended.code} {ended.reason})")


@case(
    "LE-hello-grants-enforced",
    level=Level.MUST,
    section="Message Types › HELLO_ACK (the shim enforces the granted subset)",
    rule="A request needing a capability the ACK did not grant is CAPABILITY_NOT_GRANTED and "
    "nothing runs.",
)
async def grants_enforced(ctx: AgentContext) -> None:
    conn = await ctx.connect(AckPolicy(grant={"files"}))
    if "shell" not in conn.advertised:
        ctx.not_applicable("the agent does not advertise the shell")
    marker = ctx.root / "ran"
    answer = await conn.request(
        "EXECUTE_COMMAND", {"argv": ["touch", str(marker)], "timeout_seconds": 10}
    )
    ctx.require(not marker.exists(), "the ungranted command ran")
    if answer.type != "ERROR" or answer.payload.get("code") != "CAPABILITY_NOT_GRANTED":
        ctx.depart(f"an ungranted EXECUTE_COMMAND got {answer.describe()}")
