"""Enrollment from the agent's side: the body it sends, what it keeps, how it fails.

Sections: §3.1 POST /agent/enroll, §6 (enroll, config file, never print the
token), §11.1 and §11.6.1 (capabilities and the metadata block).
"""

from __future__ import annotations

import json
import stat

from tetherbed.simulator.conformance.dsh_agent.environment import DshAgentContext
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.dsh import constants as C


@case(
    "DSH-agent-enroll-body",
    level=Level.MUST,
    section="§3.1 POST /api/dsh-computers/agent/enroll; §6 enroll",
    rule="enroll POSTs {key, agentVersion, machine: {hostname, name, os, arch, …}} with the "
    "key it was given, and exits 0 once the hub accepted it.",
)
async def enroll_body(ctx: DshAgentContext) -> None:
    enrolled = await ctx.enroll()
    ctx.require(ctx.hub.enrolls, "enroll sent nothing to the hub")
    body = ctx.hub.enrolls[0].body
    ctx.require(isinstance(body, dict), f"the enroll body is {body!r}")
    ctx.require(body.get("key") == ctx.hub.key, "the body does not carry the key it was given")
    ctx.require(
        isinstance(body.get("agentVersion"), str), f"agentVersion {body.get('agentVersion')!r}"
    )
    machine = body.get("machine")
    ctx.require(isinstance(machine, dict), f"machine {machine!r}")
    for name in ("hostname", "os", "arch"):
        ctx.require(isinstance(machine.get(name), str) and machine[name], f"machine.{name} missing")
    ctx.require(enrolled.exit_code == 0, f"enroll exited with {enrolled.exit_code}")


@case(
    "DSH-agent-enroll-capabilities",
    level=Level.MUST,
    section="§11.1 enroll carries capabilities; §11.6.1 the metadata block",
    rule="enroll reports capabilities drawn from exec, fs, pty and including exec (where: "
    "profile capability-field).",
    reads=("capability-field",),
)
async def enroll_capabilities(ctx: DshAgentContext) -> None:
    reading = ctx.reading("capability-field")
    await ctx.enroll()
    ctx.require(ctx.hub.enrolls, "enroll sent nothing to the hub")
    body = ctx.hub.enrolls[0].body if isinstance(ctx.hub.enrolls[0].body, dict) else {}
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    places = {"top-level": body.get("capabilities"), "metadata": metadata.get("capabilities")}
    wanted = [places[reading]] if reading in places else list(places.values())
    found = [v for v in wanted if isinstance(v, list)]
    if not found:
        ctx.depart(f"no capabilities list ({reading}): {json.dumps(places)}")
    for caps in found:
        ctx.require(set(caps) <= set(C.CAPABILITIES), f"unknown capabilities in {caps!r}")
        ctx.require(C.Capability.EXEC in caps, f"{caps!r} lacks exec")


@case(
    "DSH-agent-enroll-refused",
    level=Level.MUST,
    section="§6 enroll: exit non-zero with the server's message on failure",
    rule="When the hub refuses the key (409 key-used), enroll exits non-zero, saying the "
    "hub's message, and opens no stream.",
)
async def enroll_refused(ctx: DshAgentContext) -> None:
    ctx.hub.enroll_refusal = (409, C.ErrorCode.KEY_USED)
    enrolled = await ctx.enroll()
    ctx.require(enrolled.exit_code not in (0, None), f"enroll exited with {enrolled.exit_code}")
    ctx.require(
        "scripted key-used" in enrolled.output or C.ErrorCode.KEY_USED in enrolled.output,
        "the output does not say the hub's message",
    )
    ctx.require(not ctx.hub.attempts, "it opened the events stream anyway")


@case(
    "DSH-agent-config-private",
    level=Level.MUST,
    section="§6 Config: ${DSH_COMPUTERS_HOME}/config.json, mode 0600; never print the token",
    rule="enroll saves {serverUrl, computerId, token, …} in $DSH_COMPUTERS_HOME/config.json "
    "with mode 0600, and neither enroll nor status prints the token.",
)
async def config_private(ctx: DshAgentContext) -> None:
    enrolled = await ctx.enroll()
    path = ctx.agent_home / C.AGENT_CONFIG_FILE
    ctx.require(path.is_file(), f"no {C.AGENT_CONFIG_FILE} in $DSH_COMPUTERS_HOME")
    mode = stat.S_IMODE(path.stat().st_mode)
    ctx.observe(f"config.json mode {mode:o}")
    ctx.require(mode & 0o077 == 0, f"config.json has mode {mode:o}, not 0600")
    saved = json.loads(path.read_text(encoding="utf-8"))
    ctx.require(saved.get("token") == ctx.hub.token, "the saved token is not the hub's")
    ctx.require(saved.get("computerId") == ctx.hub.computer_id, "the saved computerId is wrong")
    ctx.require(str(saved.get("serverUrl", "")).rstrip("/") == ctx.hub.url, "serverUrl is wrong")
    ctx.require(ctx.hub.token not in enrolled.output, "enroll printed the token")
    status = await ctx.command("status")
    ctx.require(ctx.hub.token not in status, "status printed the token")
