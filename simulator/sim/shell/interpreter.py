"""Runs a parsed script: and-or lists, assignments, redirections, commands.

The whole script is parsed before anything runs, so shell language the sim
does not implement is refused before any side effect; a refusal found only
while running (an expanded command name, a file that cannot be opened)
stops the script there, with what it printed so far.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import BinaryIO

from tetherbed.simulator.sim.shell import expansion
from tetherbed.simulator.sim.shell.commands import PROGRAMS, SHELL_COMMANDS, Output, ShellExit
from tetherbed.simulator.sim.shell.refusal import REFUSED_EXIT, Refused
from tetherbed.simulator.sim.shell.syntax import AndOr, Command, parse

#: Variables whose meaning in the shell this interpreter does not model.
_UNMODELLED = frozenset({"IFS", "ENV", "CDPATH"})


async def run_script(
    script: str,
    cwd: str,
    out: list[str],
    err: list[str],
    env: Mapping[str, str] | None = None,
) -> int:
    """Run `script` in `cwd` as `sh -c` would; what it prints is appended to
    `out` and `err` as it is printed (a list whose `append` streams it
    elsewhere streams it). Returns the exit status."""
    try:
        variables = dict(env or {})
        unmodelled = _UNMODELLED & variables.keys()
        if unmodelled:
            raise Refused(f"a command environment setting {', '.join(sorted(unmodelled))}")
        return await _Shell(cwd, out, err, variables).run(parse(script))
    except Refused as refused:
        err.append(refused.message)
        return REFUSED_EXIT


async def run_argv(
    argv: list[str],
    cwd: str,
    out: list[str],
    err: list[str],
    env: Mapping[str, str] | None = None,
) -> int:
    """Run an argv (no shell: no expansion) as exec would."""
    try:
        if len(argv) >= 3 and argv[0] in ("sh", "/bin/sh") and argv[1] == "-c":
            if len(argv) > 3:
                raise Refused("'sh -c' with positional parameters is not supported")
            return await run_script(argv[2], cwd, out, err, env)
        if not argv or argv[0] not in PROGRAMS:
            name = argv[0] if argv else ""
            raise Refused(f"the program {name!r} is not simulated")
        if any(arg in ("--help", "--version") for arg in argv[1:]):
            raise Refused("--help and --version are not simulated")
        shell = _Shell(cwd, out, err, dict(env or {}))
        return await PROGRAMS[argv[0]](argv[1:], shell.output(None))
    except ShellExit as exited:
        return exited.code
    except Refused as refused:
        err.append(refused.message)
        return REFUSED_EXIT


def _open_for_output(path: str, *, append: bool) -> BinaryIO:
    """The redirection's file, opened as `sh` opens it (blocking: the sim loop
    must not hand work to threads); a failure is refused, since sh's message
    for it is its own."""
    try:
        return open(path, "ab" if append else "wb")
    except OSError as exc:
        raise Refused(f"a redirection that fails ({exc.strerror}) is not supported") from None


def _real_path(path: str) -> str:
    return os.path.realpath(path)


def _normal(path: str) -> str:
    normal = os.path.normpath(path)
    return "/" + normal.lstrip("/")  # POSIX may keep a leading '//'; sh does not here


def _enterable(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.X_OK)


class _Shell:
    def __init__(self, cwd: str, out: list[str], err: list[str], variables: dict[str, str]) -> None:
        self.cwd = cwd
        #: The logical working directory, as `sh` keeps it in PWD: it starts
        #: physical (the command's environment has no PWD) and `cd` moves it.
        self.pwd = _real_path(cwd)
        self.out = out
        self.err = err
        self.variables = variables
        self.status = 0

    async def run(self, lists: list[AndOr]) -> int:
        try:
            for and_or in lists:
                for joiner, command in and_or:
                    if (joiner == "&&" and self.status != 0) or (
                        joiner == "||" and self.status == 0
                    ):
                        continue
                    self.status = await self._command(command)
        except ShellExit as exited:
            return exited.code
        return self.status

    async def _command(self, command: Command) -> int:
        if command.assignments and command.words:
            raise Refused("assignments before a command are not supported")
        for name, value in command.assignments:
            self.variables[name] = expansion.single(value, self.variables, self.status, split=False)
        words = expansion.fields(command.words, self.variables, self.status)
        if words:
            name = words[0]
            run = self._cd if name == "cd" else SHELL_COMMANDS.get(name)
            if run is None:
                raise Refused(f"the command {name!r} is not simulated")
        target = None
        if command.redirect is not None:
            file = expansion.single(
                command.redirect.target, self.variables, self.status, split=True
            )
            target = os.path.join(self.cwd, file)
        if target is None:
            return await run(words[1:], self.output(None)) if words else 0
        with _open_for_output(
            target, append=bool(command.redirect and command.redirect.append)
        ) as sink:
            if not words:
                return 0
            return await run(words[1:], self.output(sink.write, target))

    async def _cd(self, args: list[str], out: Output) -> int:
        """`cd [DIR]` as `cd -L` does it: the logical path, `..` taken textually."""
        if len(args) > 1 or (args and (not args[0] or args[0].startswith("-"))):
            raise Refused(f"cd {' '.join(args)} is not supported")
        target = args[0] if args else self.variables.get("HOME")
        if not target:
            raise Refused("cd with HOME unset is not supported")
        given = os.path.join(self.pwd, target)
        logical = _normal(given)
        # Every component must exist too: dash takes `missing/..` textually,
        # bash refuses it; where they differ the sim does neither.
        if not _enterable(given) or not _enterable(logical):
            raise Refused(f"cd into {target!r}, which is no directory it can enter (sh's message)")
        self.pwd = self.cwd = logical
        return 0

    def output(
        self, write_file: Callable[[bytes], object] | None, target: str | None = None
    ) -> Output:
        def to_stdout(data: bytes) -> None:
            if data:
                self.out.append(data.decode("utf-8", "replace"))

        return Output(
            write=to_stdout if write_file is None else write_file,
            err=self.err.append,
            cwd=self.cwd,
            pwd=self.pwd,
            status=self.status,
            redirected_to=target,
        )
