"""Running the commands of `exec` events (§6 "Exec").

POSIX: `/bin/sh -lc <command>` (or the requested shell when it exists), in
its own session so that a timeout or cancel kills the whole process group
with SIGKILL; Windows: `cmd.exe /d /s /c <command>`. stdin is /dev/null, the
environment is inherited, the working directory defaults to the agent's
workspace base. Output is handed to the core as it arrives; the core caps it.

A command whose main process exited while background children still hold its
output pipes is given `DRAIN_AFTER_EXIT_S` to finish writing; then its
result is reported and the pipes are closed (the children are left alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass

DRAIN_AFTER_EXIT_S = 2.0
READ_SIZE = 64 * 1024

OnOutput = Callable[[str, str, bytes], None]
OnExit = Callable[[str, int | None, str | None, str | None], None]


def shell_argv(shell: str, command: str) -> list[str]:
    if sys.platform == "win32":
        return ["cmd.exe", "/d", "/s", "/c", command]
    path = "/bin/sh"
    if shell not in ("", "sh"):
        if "/" in shell:
            found = shell if os.access(shell, os.X_OK) else None
        else:
            found = shutil.which(shell)
        path = found or path
    return [path, "-lc", command]


def _spawn_failure(directory: str, exc: FileNotFoundError) -> str:
    if not os.path.isdir(directory):
        return f"ENOENT: no such directory, chdir '{directory}'"
    return f"ENOENT: no such file or directory, spawn '{exc.filename}'"


@dataclass(slots=True)
class _Running:
    process: asyncio.subprocess.Process
    task: asyncio.Task[None]
    killed: bool = False


class CommandRunner:
    def __init__(self, on_output: OnOutput, on_exit: OnExit, workspace: str) -> None:
        self._on_output = on_output
        self._on_exit = on_exit
        self._workspace = workspace
        self._running: dict[str, _Running] = {}

    @property
    def running(self) -> int:
        return len(self._running)

    async def spawn(self, request_id: str, command: str, cwd: str | None, shell: str) -> None:
        directory = cwd or self._workspace
        try:
            process = await asyncio.create_subprocess_exec(
                *shell_argv(shell, command),
                cwd=directory,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=sys.platform != "win32",
            )
        except FileNotFoundError as exc:
            self._on_exit(request_id, None, None, _spawn_failure(directory, exc))
            return
        except OSError as exc:
            self._on_exit(request_id, None, None, f"cannot start the command: {exc}")
            return
        task = asyncio.ensure_future(self._watch(request_id, process))
        self._running[request_id] = _Running(process, task)

    async def _watch(self, request_id: str, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None and process.stderr is not None
        readers = [
            asyncio.ensure_future(self._pump(request_id, "stdout", process.stdout)),
            asyncio.ensure_future(self._pump(request_id, "stderr", process.stderr)),
        ]
        try:
            code = await process.wait()
            _, pending = await asyncio.wait(readers, timeout=DRAIN_AFTER_EXIT_S)
            for reader in pending:
                reader.cancel()
        finally:
            for reader in readers:
                reader.cancel()
            self._running.pop(request_id, None)
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"SIG{-code}"
            self._on_exit(request_id, None, name, None)
        else:
            self._on_exit(request_id, code, None, None)

    async def _pump(self, request_id: str, name: str, pipe: asyncio.StreamReader) -> None:
        while True:
            data = await pipe.read(READ_SIZE)
            if not data:
                return
            self._on_output(request_id, name, data)

    def kill(self, request_id: str) -> None:
        running = self._running.get(request_id)
        if running is None:
            return
        running.killed = True
        process = running.process
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if sys.platform == "win32":
                process.kill()
            else:
                os.killpg(process.pid, signal.SIGKILL)

    async def close(self) -> None:
        for request_id in list(self._running):
            self.kill(request_id)
        tasks = [r.task for r in self._running.values()]
        if tasks:
            await asyncio.wait(tasks, timeout=5)
