"""The hub's side of the handshake: HELLO_ACK rules, versions, 4426, UNSUPPORTED_ARCH.

Sections: Message Types › HELLO_ACK; Versioning (Negotiation, Frame-level
version); HELLO.arch enum; WS close-code table (4426).
"""

from __future__ import annotations

import asyncio
import json

from tetherbed.simulator.conformance.hub.environment import HubContext
from tetherbed.simulator.conformance.hub.raw_agent import default_hello
from tetherbed.simulator.conformance.hub.relay import served_session
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire import strict
from tetherbed.wire.version import CURRENT_TEXT

ACK = "Message Types › HELLO_ACK"
LIMITS = ("max_file_size_bytes", "command_timeout_seconds", "max_concurrent")


@case(
    "LE-hub-ack-same-id",
    level=Level.MUST,
    section=ACK,
    rule="HELLO_ACK carries the same message id as the HELLO.",
)
async def same_id(ctx: HubContext) -> None:
    raw = await ctx.serving_agent(ctx.new_session())
    ctx.require(
        raw.ack is not None and raw.ack.id == raw.hello_id,
        f"HELLO_ACK id is {raw.ack.id if raw.ack else None!r}",
    )


@case(
    "LE-hub-ack-granted-subset",
    level=Level.MUST,
    section=ACK,
    rule="granted_capabilities is a subset of what the shim advertised.",
)
async def granted_subset(ctx: HubContext) -> None:
    for advertised in (["files"], ["files", "shell", "hardware_gpio"]):
        hello = default_hello("machine-a")
        hello["capabilities"] = advertised
        raw = await ctx.serving_agent(ctx.new_session(), hello=hello)
        granted = raw.ack_payload.get("granted_capabilities")
        ctx.require(isinstance(granted, list), f"granted_capabilities is {granted!r}")
        extra = sorted(set(granted) - set(advertised))
        ctx.require(
            not extra, f"advertised {advertised}, granted {granted}: {extra} never advertised"
        )


@case(
    "LE-hub-ack-limits-positive",
    level=Level.MUST,
    section=ACK,
    rule="All three limits (max_file_size_bytes, command_timeout_seconds, max_concurrent) must "
    "be positive.",
)
async def limits_positive(ctx: HubContext) -> None:
    raw = await ctx.serving_agent(ctx.new_session())
    bad = []
    for name in LIMITS:
        value = raw.ack_payload.get(name)
        if value is None and name not in raw.ack_payload:
            continue  # omitted: the shim uses the default
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            bad.append(f"{name}={value!r}")
    ctx.require(not bad, "HELLO_ACK limits: " + ", ".join(bad))


@case(
    "LE-hub-ack-session-id",
    level=Level.MUST,
    section=ACK,
    rule="On a data connection HELLO_ACK carries the exact session id selected.",
)
async def session_id(ctx: HubContext) -> None:
    session = ctx.new_session()
    raw = await ctx.serving_agent(session)
    got = raw.ack_payload.get("session_id")
    ctx.require(got == session, f"session_id is {got!r}, the connection is for {session!r}")


@case(
    "LE-hub-ack-control",
    level=Level.MUST,
    section=f"{ACK} (base control connection)",
    rule="On the control connection HELLO_ACK carries a null or empty session id, an opaque "
    "connection_id, protocol 1.1 and the directory_browse capability.",
)
async def control_ack(ctx: HubContext) -> None:
    raw = ctx.agent(None, machine="machine-ctl")
    answer = await raw.connect()
    if answer is None or answer.type != "HELLO_ACK":
        ctx.depart(f"a control HELLO got {answer.describe() if answer else 'nothing'}")
    payload = raw.ack_payload
    problems = []
    if payload.get("session_id") not in (None, ""):
        problems.append(f"session_id {payload.get('session_id')!r}")
    if not isinstance(payload.get("connection_id"), str) or not payload.get("connection_id"):
        problems.append(f"connection_id {payload.get('connection_id')!r}")
    if payload.get("protocol_version") != CURRENT_TEXT:
        problems.append(f"protocol_version {payload.get('protocol_version')!r}")
    if "directory_browse" not in (payload.get("granted_capabilities") or []):
        problems.append("directory_browse not granted")
    ctx.require(not problems, "control HELLO_ACK: " + "; ".join(problems))


@case(
    "LE-hub-ack-version",
    level=Level.MUST,
    section="Versioning › Negotiation",
    rule="The platform answers with its own maximum version and accepts a shim of the same "
    "major with another minor (1.0, 1.7).",
)
async def ack_version(ctx: HubContext) -> None:
    for version in ("1.0", "1.7"):
        hello = default_hello("machine-a")
        hello["protocol_version"] = version
        raw = await ctx.serving_agent(ctx.new_session(), hello=hello)
        got = raw.ack_payload.get("protocol_version")
        ctx.require(
            got == CURRENT_TEXT,
            f"a {version} shim got protocol_version {got!r}, not the platform's 1.1",
        )


@case(
    "LE-hub-version-mismatch-4426",
    level=Level.MUST,
    section="Versioning › Negotiation (different majors); WS close-code table (4426)",
    rule="A HELLO of another major is closed with 4426 and the JSON reason {error: "
    "PROTOCOL_VERSION_MISMATCH, shim_max, platform_max, hint}, without HELLO_ACK.",
)
async def mismatch(ctx: HubContext) -> None:
    hello = default_hello("machine-a")
    hello["protocol_version"] = "2.0"
    raw = ctx.agent(ctx.new_session())
    answer = await raw.connect(hello)
    ctx.require(answer is None or answer.type != "HELLO_ACK", "a 2.0 shim got HELLO_ACK")
    assert raw.socket is not None
    ended = await raw.socket.wait_closed(10)
    ctx.require(ended is not None, "the connection was not closed")
    ctx.require(ended.code == 4426, f"closed with {ended.code}, not 4426")
    try:
        reason = json.loads(ended.reason)
    except ValueError:
        ctx.depart(f"the 4426 reason is not JSON: {ended.reason!r}")
    ctx.require(isinstance(reason, dict), "the 4426 reason is not a JSON object")
    ctx.require(
        reason.get("error") == "PROTOCOL_VERSION_MISMATCH", f"error is {reason.get('error')!r}"
    )
    missing = [k for k in ("shim_max", "platform_max", "hint") if k not in reason]
    ctx.require(not missing, f"the 4426 reason lacks {missing}")
    ctx.require(reason.get("shim_max") == "2.0", f"shim_max is {reason.get('shim_max')!r}")


@case(
    "LE-hub-unsupported-arch",
    level=Level.MUST,
    section="Message Types › HELLO.arch enum; Error › UNSUPPORTED_ARCH",
    rule="An arch outside the spec's values and aliases is rejected with UNSUPPORTED_ARCH.",
)
async def unsupported_arch(ctx: HubContext) -> None:
    hello = default_hello("machine-a")
    hello["arch"] = "mips64"
    raw = ctx.agent(ctx.new_session())
    answer = await raw.connect(hello)
    ctx.require(answer is None or answer.type != "HELLO_ACK", "arch mips64 got HELLO_ACK")
    error = raw.socket.frames(lambda f: f.type == "ERROR") if raw.socket else []
    codes = [f.payload.get("code") for f in error]
    ctx.require("UNSUPPORTED_ARCH" in codes, f"no ERROR UNSUPPORTED_ARCH (got {codes or 'none'})")


@case(
    "LE-hub-arch-aliases",
    level=Level.MUST,
    section="Message Types › HELLO.arch enum",
    rule="The aliases the spec lists (AMD64, amd64, aarch64, ARM64) are accepted.",
)
async def arch_aliases(ctx: HubContext) -> None:
    for arch in ("AMD64", "amd64", "aarch64", "ARM64"):
        hello = default_hello("machine-a")
        hello["arch"] = arch
        await ctx.serving_agent(ctx.new_session(), hello=hello)


@case(
    "LE-hub-frame-minor-processed",
    level=Level.MUST,
    section="Versioning › Frame-level version",
    rule="An agent's frame with another minor version is processed normally: its answer "
    "reaches the client.",
)
async def minor_processed(ctx: HubContext) -> None:
    served = await served_session(ctx)
    request_id = await served.client.send(
        "FILE_STAT", {"path": "/srv/conform/a", "follow_symlinks": True}
    )
    relayed = await served.agent.next_request(10)
    ctx.require(relayed is not None, "the request never reached the agent")
    await served.agent.answer(relayed, {"exists": False, "path": "/srv/conform/a"}, version="1.7")
    answer = await served.client.answer_to(request_id, 10)
    got = answer.describe() if answer else "nothing"
    ctx.require(
        answer is not None and answer.kind == "FILE_STAT_RESPONSE",
        f"the 1.7 answer reached the client as {got}",
    )


@case(
    "LE-hub-frame-major-dropped",
    level=Level.MUST,
    section="Versioning › Frame-level version",
    rule="An agent's frame with another major is dropped: it never reaches the client.",
)
async def major_dropped(ctx: HubContext) -> None:
    served = await served_session(ctx)
    request_id = await served.client.send(
        "FILE_STAT", {"path": "/srv/conform/a", "follow_symlinks": True}
    )
    relayed = await served.agent.next_request(10)
    ctx.require(relayed is not None, "the request never reached the agent")
    await served.agent.answer(relayed, {"exists": False, "path": "/srv/conform/a"}, version="2.0")
    answer = await served.client.answer_to(request_id, 2.0)
    ctx.require(
        answer is None or answer.kind != "FILE_STAT_RESPONSE",
        "an answer of version 2.0 was relayed to the client",
    )


@case(
    "LE-hub-frame-major-teardown",
    level=Level.SHOULD,
    section="Versioning › Frame-level version",
    rule="On a frame of another major the platform tears the session down with 4426.",
)
async def major_teardown(ctx: HubContext) -> None:
    served = await served_session(ctx)
    await served.agent.send("STATUS", {"in_flight": 0, "max_concurrent": 4, "queue_depth": 0,
                                       "audit_log_bytes": 0, "uptime_seconds": 1.0},
                            "status-x", version="2.0", pending_capacity=4)  # fmt: skip
    assert served.agent.socket is not None
    ended = await served.agent.socket.wait_closed(3)
    state = "still open" if ended is None else ended.code
    ctx.require(ended is not None and ended.code == 4426, f"not torn down with 4426 ({state})")


@case(
    "LE-hub-strict-frames",
    level=Level.SHOULD,
    section="Message Format; Message Types (the frames the platform sends)",
    rule="Frames the platform sends to the shim carry exactly the fields the spec names, with "
    "its types (a shim with strict models drops anything else).",
)
async def strict_frames(ctx: HubContext) -> None:
    served = await served_session(ctx)
    request_id = await served.client.send(
        "FILE_READ", {"path": "/srv/conform/a.txt", "encoding": "utf-8", "format": "text",
                      "offset": 0, "length": None},
    )  # fmt: skip
    relayed = await served.agent.next_request(10)
    ctx.require(relayed is not None, "the request never reached the agent")
    await served.agent.answer(relayed, {"content": "a", "encoding": "utf-8", "size_bytes": 1,
                                        "truncated": False})  # fmt: skip
    await served.client.answer_to(request_id, 10)
    await asyncio.sleep(0.2)
    assert served.agent.socket is not None
    refused = []
    for frame in served.agent.socket.received:
        try:
            strict.check_frame(frame.data, from_shim=False)
        except strict.StrictViolation as exc:
            refused.append(f"{frame.describe()}: {exc}")
    ctx.require(not refused, "a strict shim would drop: " + "; ".join(refused[:3]))
