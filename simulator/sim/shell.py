"""A tiny deterministic shell for EXECUTE_COMMAND on the sim backend.

A real subprocess runs in real time, which virtual time cannot wait for; so
on the sim backend commands are interpreted instead. The language is a small
subset every POSIX shell also runs the same way, so a scenario's commands
behave identically on the sim, process and docker backends:

    sleep SECONDS            (virtual seconds)
    echo WORDS [> FILE | >> FILE]
    cat FILE
    true | false | exit N

joined with `;` or `&&`. Anything else exits 127 with "command not found" on
stderr, as a shell would. Files are taken relative to the command's cwd.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Mapping

from tetherbed.agent.config import Limits
from tetherbed.runtime.clock import Clock
from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import CommandResult, ExecuteCommand


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


async def run_sim_command(
    request: ExecuteCommand,
    *,
    cwd: str,
    limits: Limits,
    agent_env: Mapping[str, str],
    clock: Clock,
) -> CommandResult:
    if (request.command is None) == (request.argv is None):
        raise ProtocolError(ExtensionCode.INVALID_MESSAGE, "exactly one of command and argv")
    timeout = min(
        request.timeout_seconds or limits.command_timeout_seconds, limits.command_timeout_seconds
    )
    out: list[str] = []
    err: list[str] = []
    started = clock.monotonic()
    script = shlex.join(request.argv) if request.argv is not None else request.command or ""
    try:
        code = await asyncio.wait_for(run_script(script, cwd, out, err), timeout)
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


async def run_script(script: str, cwd: str, out: list[str], err: list[str]) -> int:
    """Run `script` in `cwd`; what it prints is appended to `out` and `err`
    as it is printed (a list whose `append` streams it elsewhere streams it)."""
    code = 0
    try:
        for chain in script.split(";"):
            for command in chain.split("&&"):
                code = await _run_one(command.strip(), cwd, out, err)
                if code != 0:
                    break
    except _Exit as exited:
        return exited.code
    return code


async def _run_one(command: str, cwd: str, out: list[str], err: list[str]) -> int:
    if not command:
        return 0
    try:
        words = shlex.split(command)
    except ValueError as exc:
        err.append(f"sh: {exc}\n")
        return 2
    name, args = words[0], words[1:]
    if name == "sleep":
        await asyncio.sleep(float(args[0]) if args else 0.0)
        return 0
    if name == "true":
        return 0
    if name == "false":
        return 1
    if name == "exit":
        raise _Exit(int(args[0]) if args else 0)
    if name == "echo":
        return _echo(args, cwd, out, err)
    if name == "cat":
        return _cat(args, cwd, out, err)
    err.append(f"sh: {name}: command not found\n")
    return 127


def _cat(args: list[str], cwd: str, out: list[str], err: list[str]) -> int:
    # Blocking file reads on purpose: the sim loop must not hand work to threads.
    for arg in args:
        try:
            with open(os.path.join(cwd, arg), encoding="utf-8", errors="replace") as f:
                out.append(f.read())
        except OSError as exc:
            err.append(f"cat: {arg}: {exc.strerror}\n")
            return 1
    return 0


def _echo(args: list[str], cwd: str, out: list[str], err: list[str]) -> int:
    target, mode = None, "w"
    for operator, file_mode in ((">>", "a"), (">", "w")):
        if operator in args:
            at = args.index(operator)
            if at + 1 >= len(args):
                err.append("sh: syntax error near unexpected token `newline'\n")
                return 2
            target, mode = args[at + 1], file_mode
            args = args[:at]
            break
    text = " ".join(args) + "\n"
    if target is None:
        out.append(text)
        return 0
    try:
        with open(os.path.join(cwd, target), mode, encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        err.append(f"sh: {target}: {exc.strerror}\n")
        return 1
    return 0
