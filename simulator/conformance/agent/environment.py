"""Running agent cases: a workspace, a scripted platform and the agent, per case.

Each case gets its own folder (the allowed root, a folder outside it that an
escape would reach, the agent's state folder), its own scripted platform on
an ephemeral port, and its own agent process started from the target's
command template (docs/targets.md) — so cases run in parallel without
sharing anything. The agent's environment carries a secret variable the
shell cases look for in a command's environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetherbed.simulator.conformance.agent.platform import (
    AckPolicy,
    AgentConnection,
    Attempt,
    ScriptedPlatform,
)
from tetherbed.simulator.conformance.case import Case, Context, Departure
from tetherbed.simulator.conformance.environment import TargetUnavailable
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.processes import (
    CaseProcess,
    findable,
    start_agent_process,
    stop_processes,
)
from tetherbed.simulator.conformance.profiles import Profile
from tetherbed.simulator.targets import AgentTarget
from tetherbed.wire.version import CURRENT_TEXT

#: Tetherbed's own agent, as a command template like anyone else's.
REFERENCE_DATA = (
    sys.executable, "-m", "tetherbed", "agent", "--hub", "{hub_url}", "--token", "{token}",
    "--session-id", "{session}", "--root", "{root}", "--machine-id", "{machine}",
    "--state-dir", "{state}", "{shell_flag}", "--max-concurrent", "{max_concurrent}",
    "--protocol-version", "{protocol_version}", "--ollama-url={ollama_url}",
    "--serial-port={serial_ports}", "--usb-device={usb_devices}", "--gpio-line={gpio_lines}",
    "--recycle-bin={recycle_bin}",
)  # fmt: skip
REFERENCE_CONTROL = (
    sys.executable, "-m", "tetherbed", "agent", "--hub", "{hub_url}", "--token", "{token}",
    "--browse-root", "{root}", "--machine-id", "{machine}", "--state-dir", "{state}",
)  # fmt: skip

#: The variable every agent process gets and no command may see.
SECRET_VARIABLE = "TETHERBED_CONFORM_SECRET"
#: Seconds an agent gets from its start to a finished handshake.
STARTUP_TIMEOUT = 20.0
#: The machine id every agent is given.
MACHINE = "conform-machine-1"


@dataclass(slots=True)
class Workspace:
    base: Path
    root: Path
    outside: Path
    state: Path
    logs: Path

    @classmethod
    def create(cls, parent: Path, name: str) -> Workspace:
        base = Path(tempfile.mkdtemp(prefix=f"{name[:40]}-", dir=parent)).resolve()
        made = {part: base / part for part in ("root", "outside", "state", "logs")}
        for path in made.values():
            path.mkdir()
        return cls(base, **made)

    def remove(self) -> None:
        for path in self.base.rglob("*"):
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    path.chmod(0o700)
        shutil.rmtree(self.base, ignore_errors=True)


class AgentContext(Context):
    """A case's scripted platform, workspace and agent processes."""

    def __init__(
        self,
        case: Case,
        evidence: Evidence,
        profile: Profile,
        environment: AgentEnvironment,
        workspace: Workspace,
    ) -> None:
        super().__init__(case, evidence, profile)
        self.environment = environment
        self.workspace = workspace
        self.token = "tok" + secrets.token_hex(20)  # never starts with "-": it is an argument
        self.secret = secrets.token_hex(16)
        self.platform = ScriptedPlatform(evidence, self.token)
        self.session = f"conform-{secrets.token_hex(6)}"
        self.processes: list[CaseProcess] = []
        #: Peripherals a case started (LLM servers, serial ports): stopped at its end.
        self.cleanups: list[Callable[[], Awaitable[None]]] = []

    @property
    def root(self) -> Path:
        return self.workspace.root

    @property
    def outside(self) -> Path:
        return self.workspace.outside

    # --- the agent ------------------------------------------------------------------

    def start_agent(
        self,
        *,
        shell: bool = True,
        max_concurrent: int = 4,
        protocol_version: str = CURRENT_TEXT,
        control: bool = False,
        wrap: Sequence[str] = (),
        env: dict[str, str] | None = None,
        ollama_url: str = "",
        serial_ports: str = "",
        usb_devices: str = "",
        gpio_lines: str = "",
        recycle_bin: str = "",
    ) -> CaseProcess:
        """One agent process from the target's template. `ollama_url`,
        `serial_ports`, `usb_devices`, `gpio_lines` and `recycle_bin` fill the
        placeholders of the same names (docs/targets.md): a case that gives an
        agent a local LLM, a serial device, a USB device, a GPIO line or a
        recycle bin; empty otherwise."""
        target = self.environment.control if control else self.environment.agent
        if target is None:
            self.not_applicable("no control-mode command for this agent (--control-command)")
        values = {
            "hub_url": self.platform.url,
            "token": self.token,
            "session": "" if control else self.session,
            "root": str(self.root),
            "machine": MACHINE,
            "name": self.case.id,
            "state": str(self.workspace.state),
            "shell": shell,
            "max_concurrent": max_concurrent,
            "protocol_version": protocol_version,
            "ollama_url": ollama_url,
            "serial_ports": serial_ports,
            "usb_devices": usb_devices,
            "gpio_lines": gpio_lines,
            "recycle_bin": recycle_bin,
        }
        argv = [*wrap, *absolute_paths(target.argv(values))]
        environment = target.environment(values)
        environment[SECRET_VARIABLE] = self.secret
        environment.update(self.environment.extra_env)
        environment.update(env or {})
        return start_agent_process(
            self.processes,
            argv,
            env=environment,
            logs=self.workspace.logs,
            evidence=self.evidence,
            cwd=self.workspace.base,
        )

    async def connect(
        self, policy: AckPolicy | None = None, *, handshake: bool = True, **agent: Any
    ) -> AgentConnection:
        """Start the agent and return its first connection once the handshake is over.

        With `handshake` (the default) the agent must have sent HELLO and got the
        ACK the policy describes, else the case departs: an agent that cannot
        connect to a platform that follows the spec fails every case."""
        self.platform.policy = policy or AckPolicy()
        process = self.start_agent(**agent)
        connection = await self.wait_connection(process, after=len(self.platform.connections))
        if handshake:
            if connection.hello is None or connection.hello.type != "HELLO":
                got = connection.hello.describe() if connection.hello else "nothing"
                self.depart(f"the agent's first frame was {got}, not HELLO")
            if self.platform.policy.close_instead is None and connection.socket.closed:
                ending = connection.socket.ending
                self.depart(
                    f"the agent closed its connection during the handshake "
                    f"({ending.code if ending else '?'} {ending.reason if ending else ''})"
                )
        return connection

    async def wait_connection(
        self, process: CaseProcess, *, after: int, timeout: float = STARTUP_TIMEOUT
    ) -> AgentConnection:
        connection = await self.platform.next_connection(timeout, after=after)
        if connection is None:
            code = process.returncode
            why = f"it exited with {code}" if code is not None else "it is still running"
            self.depart(f"the agent did not connect within {timeout:g} s ({why})")
        return connection

    async def attempts_within(
        self, since: float, window: float, process: CaseProcess | None = None
    ) -> list[Attempt]:
        """Upgrade attempts after case time `since`, watching for `window` seconds
        (or less, once the process has exited and so can never dial again)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + window
        while loop.time() < deadline:
            if self.platform.attempts_after(since):
                break
            if process is not None and process.returncode is not None:
                break
            await asyncio.sleep(0.1)
        return self.platform.attempts_after(since)

    # --- the root -------------------------------------------------------------------

    def write(self, relative: str, data: bytes | str) -> Path:
        """A file in the allowed root, as the case's fixture (not through the agent)."""
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    async def close(self) -> None:
        await stop_processes(self.processes, self.evidence)
        for cleanup in reversed(self.cleanups):
            await cleanup()
        await self.platform.stop()


class AgentEnvironment:
    def __init__(
        self,
        agent: AgentTarget,
        control: AgentTarget | None,
        *,
        display: str | None = None,
        xvfb: bool = False,
        reference: bool = False,
    ) -> None:
        self.agent = agent
        self.control = control
        self._display = display
        self._want_xvfb = xvfb
        self._xvfb: Any = None
        self._base: Path | None = None
        self.extra_env: dict[str, str] = {}
        self.reference = reference
        self.unshare = _unshare_works()
        name = "Tetherbed's agent" if reference else f"agent `{agent.command[0]}`"  # type: ignore[index]
        self.description = name
        self.details: dict[str, Any] = {
            "command": " ".join(agent.command or ()),
            "control command": " ".join(control.command or ()) if control else "(none)",
        }

    async def start(self) -> None:
        for target in (self.agent, self.control):
            program = (target.command or ("",))[0] if target is not None else None
            if program and not findable(program):
                raise TargetUnavailable(f"cannot find the agent's program {program!r}")
        self._base = Path(tempfile.mkdtemp(prefix="tetherbed-conform-agent-"))
        display = self._display
        if self._want_xvfb:
            from tetherbed.agent.desktop.xvfb import XvfbDisplay

            self._xvfb = XvfbDisplay(1280, 800, 24)
            await asyncio.to_thread(self._xvfb.start)
            display = self._xvfb.name
        if display is not None:
            self.extra_env["DISPLAY"] = display
        self.details["display"] = display or "(none: computer use cases are skipped)"

    async def stop(self) -> None:
        if self._xvfb is not None:
            await asyncio.to_thread(self._xvfb.stop)
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)

    def applicable(self, case: Case) -> str | None:
        if "control" in case.needs and self.control is None:
            return "no control-mode command for this agent (--control-command)"
        if "display" in case.needs and "DISPLAY" not in self.extra_env:
            return "no X display for the agent (--xvfb or --display)"
        if "unshare" in case.needs and not self.unshare:
            return "needs a second file system inside the root: `unshare -rm` does not work here"
        return None

    @contextlib.asynccontextmanager
    async def context(
        self, case: Case, evidence: Evidence, profile: Profile
    ) -> AsyncIterator[AgentContext]:
        assert self._base is not None
        workspace = Workspace.create(self._base, case.id)
        context = AgentContext(case, evidence, profile, self, workspace)
        await context.platform.start()
        try:
            yield context
        finally:
            await context.close()
            await asyncio.to_thread(workspace.remove)


def absolute_paths(argv: list[str]) -> list[str]:
    """Relative paths in the command (`./my-shim`, `venv/bin/python x.py`) are taken from
    where conform runs; the agent itself starts in its case's folder."""
    return [
        os.path.abspath(part)
        if "/" in part and not part.startswith(("/", "-")) and os.path.exists(part)
        else part
        for part in argv
    ]


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(
            ["unshare", "-rm", "true"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def expect_answer_type(answer: Any, kind: str, what: str) -> None:
    """Depart unless the answer is of `kind` (an ERROR is quoted)."""
    if answer.type != kind:
        detail = answer.describe()
        if answer.type == "ERROR":
            detail += f": {answer.payload.get('message', '')!s}"[:200]
        raise Departure(f"{what}: expected {kind}, got {detail}")
