"""A deterministic shell for EXECUTE_COMMAND (and dsh exec) on the sim backend.

A real subprocess runs in real time, which virtual time cannot wait for; so
on the sim backend commands are interpreted instead. The rule: whatever this
shell implements behaves exactly as `sh` (dash) does — same stdout, stderr,
exit status and files — and whatever it does not implement stops the script
with exit status 127 and a "tetherbed sim shell: ... is not supported; run on
the process backend" message on stderr, never with a different result.

Implemented: quoting, `;`, newlines, `&&`, `||`, `#` comments, NAME=value,
$NAME, ${NAME}, $? and a leading ~ (the command's environment: the agent's
baseline variables, HOME included, and the request's `env`), field
splitting, `>` and `>>` on one command, `cd`, and the commands echo, cat,
sleep (virtual seconds), true, false, :, pwd and exit (`commands.py`). The grammar
and what is refused are in `syntax.py`; tests/unit/simulator/test_sim_shell.py
runs command lines through both this and /bin/sh and compares.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from tetherbed.agent.config import Limits
from tetherbed.agent.environment import safe_environment
from tetherbed.runtime.clock import Clock
from tetherbed.simulator.sim.shell.interpreter import run_argv, run_script
from tetherbed.simulator.sim.shell.refusal import REFUSAL_PREFIX, REFUSED_EXIT, Refused
from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import CommandResult, ExecuteCommand

__all__ = [
    "REFUSAL_PREFIX",
    "REFUSED_EXIT",
    "Refused",
    "run_argv",
    "run_script",
    "run_sim_command",
    "sim_agent_environment",
]


async def run_sim_command(
    request: ExecuteCommand,
    *,
    cwd: str,
    limits: Limits,
    agent_env: Mapping[str, str],
    clock: Clock,
) -> CommandResult:
    """`agent/shell.run_command`'s interface, interpreted in virtual time."""
    if (request.command is None) == (request.argv is None):
        raise ProtocolError(ExtensionCode.INVALID_MESSAGE, "exactly one of command and argv")
    env = safe_environment(agent_env, request.env)
    timeout = min(
        request.timeout_seconds or limits.command_timeout_seconds, limits.command_timeout_seconds
    )
    out: list[str] = []
    err: list[str] = []
    started = clock.monotonic()
    if request.argv is not None:
        running = run_argv(list(request.argv), cwd, out, err, env)
    else:
        running = run_script(request.command or "", cwd, out, err, env)
    try:
        code = await asyncio.wait_for(running, timeout)
        timed_out = False
    except TimeoutError:
        code, timed_out = -1, True
    return CommandResult(
        stdout="".join(out),
        stderr="".join(err),
        exit_code=code,
        timed_out=timed_out,
        duration_seconds=round(clock.monotonic() - started, 6),
        output_truncated=False,
    )


def sim_agent_environment(root: str) -> dict[str, str]:
    """The sim agent's own environment: HOME is its root (a sandbox has no other)."""
    return {"HOME": os.path.realpath(root), "LANG": "C.UTF-8", "SHELL": "/bin/sh"}
