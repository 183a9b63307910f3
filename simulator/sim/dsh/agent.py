"""The reference dsh agent's own driver, on the sim network and the sim shell.

`SimAgentRunner` is `agent/dsh/runner.AgentRunner` — the same core, actions
and stream loop as `tetherbed agent --transport sse run` — with three things
swapped for the simulator: HTTP goes over `SimTcp` (`hub_http`), commands
run in the sim shell (`SimCommandRunner`, output streamed as the script
prints it, in virtual time), and file operations overlap one system call at a
time in virtual time (`SteppedCalls`), as the real agent's threads do. A
paused agent is frozen: its timers do not run and nothing reaches it (the
network holds its input) until it resumes.
Machine facts (hostname, CPU, memory) come from the scenario, not the host,
so a seed gives the same history anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from tetherbed.agent.dsh import files
from tetherbed.agent.dsh.core import RunFs
from tetherbed.agent.dsh.runner import AgentRunner, RuntimeOptions
from tetherbed.agent.dsh.transport import HubHttp
from tetherbed.agent.dsh.version import AGENT_VERSION
from tetherbed.simulator.sim.shell import run_script, sim_agent_environment
from tetherbed.simulator.sim.stepped_calls import SteppedCalls
from tetherbed.simulator.sim.tcp import SimTcp
from tetherbed.wire.dsh import constants as C

#: The sim hub's URL as its agents know it (SimTcp has one hub).
HUB_URL = "http://hub:8765"


def machine_block(name: str, hostname: str) -> dict[str, Any]:
    """§3.1 `machine` of a simulated Linux machine."""
    return {
        "hostname": hostname,
        "name": name,
        "os": "linux",
        "arch": "x64",
        "platform": C.PLATFORM_LABELS["linux"],
        "cpuModel": "sim",
        "memoryBytes": 1 << 30,
    }


def metadata_block(hostname: str, workspace: str, capabilities: list[str]) -> dict[str, Any]:
    """§11.6.1's handshake metadata of a simulated machine."""
    return {
        "version": C.RECORD_VERSION,
        "agentVersion": AGENT_VERSION,
        "hostname": hostname,
        "os": "linux",
        "arch": "x64",
        "capabilities": capabilities,
        "workspaceBase": workspace,
    }


def hub_http(tcp: SimTcp, node: str, token: str | None = None) -> HubHttp:
    """The agent's HTTP client, its connections opened on the node's sim link."""
    return HubHttp(HUB_URL, token, open_connection=lambda: tcp.open(node))


class _Printed(list):  # type: ignore[type-arg]
    """What the sim shell appends to, streamed to the agent as it is printed."""

    def __init__(self, emit: Callable[[bytes], None]) -> None:
        super().__init__()
        self._emit = emit

    def append(self, text: str) -> None:
        self._emit(text.encode("utf-8"))


class SimCommandRunner:
    """`agent/dsh/processes.CommandRunner`'s interface over the sim shell.

    Output reaches the agent as the script prints it; while the agent is
    paused it waits (a stopped process reads nothing from its pipes)."""

    def __init__(
        self,
        on_output: Callable[[str, str, bytes], None],
        on_exit: Callable[[str, int | None, str | None, str | None], None],
        workspace: str,
        frozen: Callable[[], Any],
    ) -> None:
        self._on_output = on_output
        self._on_exit = on_exit
        self._workspace = workspace
        self._frozen = frozen
        self._running: dict[str, asyncio.Task[None]] = {}

    @property
    def running(self) -> int:
        return len(self._running)

    async def spawn(self, request_id: str, command: str, cwd: str | None, shell: str) -> None:
        task = asyncio.ensure_future(self._run(request_id, command, cwd or self._workspace))
        self._running[request_id] = task

    async def _run(self, request_id: str, command: str, cwd: str) -> None:
        pipe: asyncio.Queue[tuple[str, bytes] | None] = asyncio.Queue()
        reader = asyncio.ensure_future(self._read(request_id, pipe))

        def printed(stream: str) -> _Printed:
            return _Printed(lambda data: pipe.put_nowait((stream, data)))

        code: int | None = None
        signal: str | None = None
        try:
            code = await run_script(
                command,
                cwd,
                printed("stdout"),
                printed("stderr"),
                sim_agent_environment(self._workspace),
            )
        except asyncio.CancelledError:
            signal = "SIGKILL"
        self._running.pop(request_id, None)
        pipe.put_nowait(None)
        await reader
        await self._frozen()
        self._on_exit(request_id, code, signal, None)

    async def _read(self, request_id: str, pipe: asyncio.Queue[tuple[str, bytes] | None]) -> None:
        while True:
            item = await pipe.get()
            if item is None:
                return
            await self._frozen()
            self._on_output(request_id, *item)

    def kill(self, request_id: str) -> None:
        task = self._running.get(request_id)
        if task is not None:
            task.cancel()

    async def close(self) -> None:
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


class SimAgentRunner(AgentRunner):
    def __init__(
        self,
        options: RuntimeOptions,
        *,
        tcp: SimTcp,
        node: str,
        hostname: str,
        paused: Callable[[], bool],
        resumed: Callable[[], asyncio.Event],
        file_ops: SteppedCalls | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(options, **kwargs)
        #: File operations overlap one system call at a time, as the real
        #: agent's worker threads do (None: inline, one at a time).
        self._file_ops = file_ops
        self.http = hub_http(tcp, node, options.token)
        self.commands = SimCommandRunner(  # type: ignore[assignment]
            self._output, self._exited, options.workspace_base, self._frozen
        )
        settings = self.core.settings
        capabilities = list(settings.capabilities)
        settings.metadata = metadata_block(hostname, options.workspace_base, capabilities)
        settings.meta = {"cpuModel": "sim", "memoryBytes": 1 << 30, "agentVersion": AGENT_VERSION}
        self._paused = paused
        self._resumed = resumed
        self._killed = False

    def kill(self) -> None:
        """The process is gone: nothing it had scheduled runs any more, and
        `run()` returns (its clean-up only stops what the process left)."""
        self._killed = True
        self._done.set()
        self._wake.set()

    def _apply(self, actions: list[Any]) -> None:
        if not self._killed:
            super()._apply(actions)

    async def _frozen(self) -> None:
        """Wait while the agent is paused (SIGSTOP)."""
        while self._paused():
            await self._resumed().wait()

    async def _before_tick(self) -> None:
        await self._frozen()

    async def _fs(self, action: RunFs) -> None:
        await self._frozen()
        deadline = time.monotonic() + C.FS_TIMEOUT_MS / 1000
        if self._file_ops is None:
            result = files.run(action.request, self.options.workspace_base, deadline)
        else:
            result = await self._file_ops.run(
                files.run, action.request, self.options.workspace_base, deadline
            )
        self._apply(self.core.fs_finished(action.request_id, result))

    async def _close(self) -> None:
        with contextlib.suppress(Exception):
            await super()._close()
