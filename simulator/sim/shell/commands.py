"""The commands the sim shell runs: echo, cat, sleep, true, false, :, pwd, exit
(and `cd`, which changes the shell itself: `interpreter.py`).

Each behaves as dash's builtin or the coreutils program does for the
arguments it accepts, and refuses the arguments where those differ or where
it does not implement them (echo's backslash escapes and options other than
a first `-n`, cat reading stdin, sleep's suffixes, ...). `sleep` sleeps in
virtual time on the sim loop.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tetherbed.simulator.sim.shell.refusal import Refused

_ECHO_OPTION = re.compile(r"-[neE]+")
_SECONDS = re.compile(r"\d+(\.\d*)?|\.\d+")
_EXIT_STATUS = re.compile(r"\d{1,9}")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_./+-]+")
_SPACED_NAME = re.compile(r"[A-Za-z0-9_./+ -]+")


class ShellExit(Exception):
    """`exit N`: the script stops with status N."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass(slots=True)
class Output:
    """Where a command writes: the result's streams, or stdout into a file."""

    write: Callable[[bytes], object]
    err: Callable[[str], None]
    cwd: str
    #: The shell's logical working directory (what `pwd` prints).
    pwd: str
    status: int
    #: The file stdout is redirected to, if any (cat refuses to read it).
    redirected_to: str | None = None


Command = Callable[[list[str], Output], Awaitable[int]]


async def echo(args: list[str], out: Output) -> int:
    newline = "\n"
    if args and args[0] == "-n":
        args, newline = args[1:], ""
    if args and _ECHO_OPTION.fullmatch(args[0]):
        raise Refused(f"echo {args[0]} (sh and bash read it differently) is not supported")
    if any("\\" in arg for arg in args):
        raise Refused("echo with backslashes (sh and bash read them differently) is not supported")
    out.write((" ".join(args) + newline).encode("utf-8", "surrogateescape"))
    return 0


async def cat(args: list[str], out: Output) -> int:
    if not args or any(arg == "-" or arg.startswith("-") for arg in args):
        raise Refused("cat without files, from stdin or with options is not supported")
    status = 0
    for arg in args:
        path = os.path.join(out.cwd, arg)
        if out.redirected_to is not None and _same_file(path, out.redirected_to):
            raise Refused("cat into one of its own input files is not supported")
        try:
            out.write(_read(path))
        except OSError as exc:
            out.err(f"cat: {_quoted_name(arg)}: {exc.strerror}\n")
            status = 1
    return status


async def sleep(args: list[str], out: Output) -> int:
    if len(args) != 1 or not _SECONDS.fullmatch(args[0]):
        raise Refused("sleep takes one plain number of seconds here")
    await asyncio.sleep(float(args[0]))
    return 0


async def true(args: list[str], out: Output) -> int:
    return 0


async def false(args: list[str], out: Output) -> int:
    return 1


async def pwd(args: list[str], out: Output) -> int:
    if args:
        raise Refused("pwd with arguments is not supported")
    out.write((out.pwd + "\n").encode("utf-8", "surrogateescape"))
    return 0


async def exit_(args: list[str], out: Output) -> int:
    if not args:
        raise ShellExit(out.status)
    if len(args) > 1 or not _EXIT_STATUS.fullmatch(args[0]):
        raise Refused(f"exit {' '.join(args)} is not supported")
    raise ShellExit(int(args[0]) & 0xFF)


def _read(path: str) -> bytes:
    # Blocking on purpose: the sim loop must not hand work to threads.
    with open(path, "rb") as f:
        return f.read()


def _quoted_name(name: str) -> str:
    """A file name as coreutils quotes it in a message (plain, or '...' with spaces)."""
    if _PLAIN_NAME.fullmatch(name):
        return name
    if _SPACED_NAME.fullmatch(name):
        return f"'{name}'"
    raise Refused("cat's message about an oddly named file is not simulated")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


#: What the shell's command names run (dash builtins and coreutils programs).
SHELL_COMMANDS: dict[str, Command] = {
    "echo": echo,
    "cat": cat,
    "sleep": sleep,
    "true": true,
    "false": false,
    ":": true,
    "pwd": pwd,
    "exit": exit_,
}

#: What an argv runs: programs only (`exit` and `:` are not programs).
PROGRAMS: dict[str, Command] = {
    name: command for name, command in SHELL_COMMANDS.items() if name not in ("exit", ":")
}
