"""Control-mode agents on the sim backend: the children as runtimes on the sim loop.

A control agent on a real machine starts one `tetherbed agent --session-id`
process per activated session (`agent/control/children.ProcessLauncher`).
On the sim the same `ControlOperations` and `SessionBindings` run unchanged;
only the launcher differs: each child is the real `AgentRuntime`, in data
mode, on the sim network and loop, with the sim shell and overlapping file
operations, and its idle stop (`--idle-exit`) in virtual time. Its data
connection goes over the control agent's own link, so the wire recording of
that agent shows the control connection and every child's, as the process
backend's proxy in front of the control agent does.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import uuid
from collections.abc import Callable
from typing import Any

from tetherbed.agent.audit.sink import NullAuditSink
from tetherbed.agent.control.launcher import ChildSpec, ExitCallback
from tetherbed.agent.operations import DataOperations
from tetherbed.agent.runtime import AgentRuntime
from tetherbed.runtime.clock import Clock
from tetherbed.runtime.transport import Connector
from tetherbed.simulator.sim.shell import run_sim_command, sim_agent_environment
from tetherbed.simulator.sim.stepped_calls import SteppedCalls


class SimChild:
    """One child runtime and its task."""

    def __init__(self, runtime: AgentRuntime, on_exit: ExitCallback) -> None:
        self.runtime = runtime
        self._on_exit = on_exit
        self._stopping = False
        self.exit_code: int | None = None
        self.task = asyncio.ensure_future(self._run())

    @property
    def pid(self) -> int | None:
        return None

    async def _run(self) -> None:
        try:
            stop = await self.runtime.run()
        finally:
            await self.runtime.close()
        self.exit_code = int(stop.exit_code)
        if not self._stopping:
            self._on_exit(self.exit_code)

    async def stop(self) -> int | None:
        self._stopping = True
        if not self.task.done():
            await self.runtime.shutdown()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(self.task, return_exceptions=True)
        return self.exit_code

    def kill(self) -> None:
        """The machine died: the child goes without a word."""
        self._stopping = True
        self.task.cancel()


class SimChildren:
    """`Launcher` of children on the sim loop (see the module)."""

    def __init__(
        self,
        *,
        connector: Connector,
        clock: Clock,
        rng: random.Random,
        file_ops: Callable[[random.Random], Any] | None,
    ) -> None:
        self._connector = connector
        self._clock = clock
        self._rng = rng
        self._file_ops = file_ops
        self.children: list[SimChild] = []

    async def start(self, spec: ChildSpec, on_exit: ExitCallback) -> SimChild:
        rng = random.Random(self._rng.getrandbits(64))
        config = dataclasses.replace(spec.config, idle_exit=spec.idle_exit_seconds)
        runtime = AgentRuntime(
            config,
            connector=self._connector,
            clock=self._clock,
            rng=rng,
            new_id=lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            operations=DataOperations(
                root=spec.root,
                clock=self._clock,
                agent_env=sim_agent_environment(spec.root),
                offload=False,
                shell=run_sim_command,
                run_blocking=(
                    None
                    if self._file_ops is None
                    else self._file_ops(random.Random(rng.getrandbits(64)))
                ),
            ),
            audit=NullAuditSink(),
        )
        child = SimChild(runtime, on_exit)
        self.children.append(child)
        return child

    async def stop_all(self) -> None:
        for child in self.children:
            await child.stop()

    def kill_all(self) -> None:
        for child in self.children:
            child.kill()


def stepped_file_ops(rng: random.Random) -> Any:
    """Overlapping file operations for one child (`SteppedCalls`)."""
    return SteppedCalls(rng).run
