"""Running dsh-agent cases: a scripted hub, a private home, and the agent's §6 commands.

The target is the agent's program (`tetherbed conform dsh-agent -- CMD`); the
suite runs it as §6 defines its command line: `CMD enroll --server URL --key
KEY` with a key the case's scripted hub created, then `CMD run` (plus
`--run-arg`s) for as long as the case needs. Every case has its own hub on an
ephemeral port and its own `DSH_COMPUTERS_HOME` (and `HOME`, so nothing
touches the real one), so cases run in parallel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetherbed.simulator.conformance.case import Case, Context
from tetherbed.simulator.conformance.dsh_agent.scripted_hub import ScriptedHub, ServedStream
from tetherbed.simulator.conformance.environment import TargetUnavailable
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.processes import (
    CaseProcess,
    findable,
    start_agent_process,
    stop_processes,
)
from tetherbed.simulator.conformance.profiles import Profile
from tetherbed.wire.dsh import constants as C

#: Tetherbed's own dsh agent, as a program like anyone else's.
REFERENCE = (sys.executable, "-m", "tetherbed", "agent", "--transport", "sse")
#: Seconds `enroll` may take (§6: it holds the stream ~5 s to prove the round trip).
ENROLL_TIMEOUT = 30.0
#: Seconds from `run` to a stream that got hello.
STARTUP_TIMEOUT = 20.0


@dataclass(frozen=True, slots=True)
class Enrollment:
    """How `CMD enroll` ended: its exit code (None: it did not end) and its output."""

    exit_code: int | None
    output: str


class DshAgentContext(Context):
    def __init__(
        self,
        case: Case,
        evidence: Evidence,
        profile: Profile,
        environment: DshAgentEnvironment,
        folder: Path,
    ) -> None:
        super().__init__(case, evidence, profile)
        self.environment = environment
        self.folder = folder
        self.home = folder / "home"
        self.agent_home = self.home / C.AGENT_HOME_DIR
        self.work = folder / "work"
        for path in (self.home, self.work):
            path.mkdir(parents=True, exist_ok=True)
        self.hub = ScriptedHub(evidence)
        self.processes: list[CaseProcess] = []

    def env(self) -> dict[str, str]:
        return {"HOME": str(self.home), C.AGENT_HOME_ENV: str(self.agent_home)}

    async def enroll(self, *extra: str) -> Enrollment:
        """`CMD enroll --server URL --key KEY`, to its end."""
        self.evidence.note("agent", f"enroll --server {self.hub.url} --key dshc_…")
        code, output = await self._invoke(
            "enroll", "--server", self.hub.url, "--key", self.hub.key, *extra
        )
        return Enrollment(code, output)

    async def command(self, *args: str) -> str:
        """`CMD ARGS` to its end (e.g. `status`): what it printed."""
        return (await self._invoke(*args))[1]

    async def _invoke(self, *args: str) -> tuple[int | None, str]:
        argv = [*self.environment.command, *args]
        try:
            done = await asyncio.to_thread(
                subprocess.run, argv, capture_output=True, text=True, cwd=self.work,
                env={**os.environ, **self.env()}, timeout=ENROLL_TIMEOUT, check=False,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            self.evidence.note("agent", f"`{args[0]}` did not exit within {ENROLL_TIMEOUT:g} s")
            return None, ""
        except OSError as exc:
            raise TargetUnavailable(f"cannot start {argv[0]}: {exc}") from None
        self.evidence.add("agent", "event", "exit", f"`{args[0]}` exited with {done.returncode}")
        return done.returncode, done.stdout + done.stderr

    def run(self) -> CaseProcess:
        """`CMD run`, in the background until the case ends."""
        argv = [*self.environment.command, "run", *self.environment.run_args]
        return start_agent_process(
            self.processes, argv, env=self.env(), logs=self.folder, evidence=self.evidence,
            cwd=self.work,
        )  # fmt: skip

    async def serving(self) -> tuple[CaseProcess, ServedStream]:
        """Enrolled and running: the stream of `run` that got hello."""
        enrolled = await self.enroll()
        if enrolled.exit_code != 0:
            self.depart(
                f"enroll with a valid key exited {enrolled.exit_code}: {enrolled.output[-300:]}"
            )
        after = len(self.hub.streams)
        process = self.run()
        stream = await self.hub.wait_stream(STARTUP_TIMEOUT, after=after)
        if stream is None:
            code = process.returncode
            self.depart(f"`run` opened no stream within {STARTUP_TIMEOUT:g} s (exit code {code})")
        return process, stream

    async def close(self) -> None:
        await stop_processes(self.processes, self.evidence)
        await self.hub.stop()


class DshAgentEnvironment:
    def __init__(self, command: list[str], run_args: list[str], *, reference: bool) -> None:
        self.command = command
        self.run_args = run_args
        self.reference = reference
        self._base: Path | None = None
        self.description = "Tetherbed's dsh agent" if reference else f"agent `{command[0]}`"
        self.details: dict[str, Any] = {"command": " ".join(command)}
        if run_args:
            self.details["run arguments"] = " ".join(run_args)

    async def start(self) -> None:
        program = self.command[0]
        if not findable(program):
            raise TargetUnavailable(f"cannot find the agent's program {program!r}")
        self._base = Path(tempfile.mkdtemp(prefix="tetherbed-conform-dsh-agent-"))

    async def stop(self) -> None:
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)

    def applicable(self, case: Case) -> str | None:
        return None

    @contextlib.asynccontextmanager
    async def context(
        self, case: Case, evidence: Evidence, profile: Profile
    ) -> AsyncIterator[DshAgentContext]:
        assert self._base is not None
        folder = Path(tempfile.mkdtemp(prefix=f"{case.id[:40]}-", dir=self._base))
        context = DshAgentContext(case, evidence, profile, self, folder)
        await context.hub.start()
        try:
            yield context
        finally:
            await context.close()
            await asyncio.to_thread(shutil.rmtree, folder, True)
