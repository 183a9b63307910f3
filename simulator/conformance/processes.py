"""Processes a case starts (an agent, an adapter), each in its own process group.

Stopped by PID at the end of the case, whatever happened: SIGTERM to the
group, then SIGKILL. Their output goes to a log file beside the case's
workspace — for a person reading a failure, never for a verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tetherbed.simulator.conformance.environment import TargetUnavailable
from tetherbed.simulator.conformance.evidence import Evidence


class CaseProcess:
    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        log: Path,
        evidence: Evidence,
        cwd: Path | None = None,
        stdin: int | None = subprocess.DEVNULL,
        stdout: int | None = None,
        pass_fds: Sequence[int] = (),
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.evidence = evidence
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            try:
                self.proc = subprocess.Popen(
                    self.argv,
                    stdin=stdin,
                    stdout=out if stdout is None else stdout,
                    stderr=out,
                    env={**os.environ, **env},
                    cwd=cwd,
                    start_new_session=True,
                    pass_fds=tuple(pass_fds),
                )
            except OSError as exc:
                raise StartFailed(f"cannot start {self.argv[0]}: {exc}") from None
        self._reported = False
        evidence.note(name, f"started (pid {self.proc.pid})")

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        code = self.proc.poll()
        if code is not None and not self._reported:
            self._reported = True
            self.evidence.add(self.name, "event", "exit", f"exited with {code}")
        return code

    def alive(self) -> bool:
        return self.returncode is None

    async def wait_exit(self, timeout: float) -> int | None:
        """The exit code, or None if it is still running after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.returncode is None:
            if loop.time() >= deadline:
                return None
            await asyncio.sleep(0.05)
        return self.returncode

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signum)

    async def stop(self, grace: float = 5.0) -> None:
        if self.alive():
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            if await self.wait_exit(grace) is None:
                self.signal(signal.SIGKILL)
                await self.wait_exit(5.0)
        else:
            self.signal(signal.SIGKILL)  # what it left behind in its group
        with contextlib.suppress(Exception):
            self.proc.wait(1)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class StartFailed(RuntimeError):
    """The target's command could not be started at all."""


def findable(program: str) -> bool:
    """Whether a target's program can be started: on the PATH, or a file."""
    return shutil.which(program) is not None or Path(program).is_file()


async def stop_processes(processes: Sequence[CaseProcess], evidence: Evidence) -> None:
    """Stop a case's processes, newest first. The log of one that had stopped by itself
    goes into the evidence as a note: its last words help a person, never a verdict."""
    for process in reversed(processes):
        if process.returncode is not None:
            tail = process.log_tail(12)
            if tail:
                evidence.note(process.name, f"its log (diagnostics only):\n{tail}")
        await process.stop()


def start_agent_process(
    processes: list[CaseProcess],
    argv: Sequence[str],
    *,
    env: dict[str, str],
    logs: Path,
    evidence: Evidence,
    cwd: Path,
) -> CaseProcess:
    """A case's next agent process, `agent#N` (its log in `logs`), added to `processes`.
    A command that cannot start at all makes the target unavailable, not the case failed."""
    name = f"agent#{len(processes) + 1}"
    try:
        process = CaseProcess(
            name, argv, env=env, log=logs / f"{name}.log", evidence=evidence, cwd=cwd
        )
    except StartFailed as exc:
        raise TargetUnavailable(str(exc)) from None
    processes.append(process)
    return process
