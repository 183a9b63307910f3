"""Runs admitted requests: maps a message type to the code that performs it.

File operations are blocking system calls, so they run in worker threads by
default; the simulator sets `offload=False` to keep everything on its one
deterministic loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from tetherbed.agent.computer_use.service import ComputerUse
from tetherbed.agent.config import Limits
from tetherbed.agent.files import FILE_OPERATIONS, delete_path
from tetherbed.agent.files.recycle_bin import RecycleBin
from tetherbed.agent.hardware import SerialPorts
from tetherbed.agent.local_llm import LocalLlm
from tetherbed.agent.local_llm.service import Emit
from tetherbed.agent.path_jail import PathJail
from tetherbed.agent.shell import run_command
from tetherbed.agent.temporaries import TemporaryLedger
from tetherbed.runtime.clock import Clock
from tetherbed.wire import serial_io
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import (
    CommandResult,
    ExecuteCommand,
    LocalLlmCompletion,
    MessageType,
    Payload,
)

log = logging.getLogger(__name__)

Reply = tuple[MessageType, Payload]


class DataOperations:
    """The data-plane operations of one agent, bound to its allowed root."""

    def __init__(
        self,
        *,
        root: str,
        clock: Clock,
        agent_env: Mapping[str, str] | None = None,
        offload: bool = True,
        shell: Callable[..., Awaitable[CommandResult]] = run_command,
        computer_use: ComputerUse | None = None,
        temporaries_dir: Path | None = None,
        local_llm: LocalLlm | None = None,
        recycle_bin: str | None = None,
        serial_ports: SerialPorts | None = None,
        run_blocking: Callable[..., Awaitable[Any]] | None = None,
    ) -> None:
        """`offload=False` and a `shell` interpreter keep everything on one
        virtual-time loop (the simulator); the defaults are the real thing.
        `run_blocking(fn, *args)`, when given, runs the blocking file
        operations instead (the sim's `SteppedCalls`: overlapping, seeded).

        With `temporaries_dir` (in the agent's state directory) the temporary
        files writes and moves create in the tree are recorded there, and the
        ones a killed agent on this root left behind are removed now, before
        any request is served."""
        self.temporaries = TemporaryLedger(temporaries_dir, os.path.realpath(root))
        self.jail = PathJail(root, temporaries=self.temporaries)
        self.temporaries.sweep(self.jail)
        self.limits = Limits()
        self._clock = clock
        self._agent_env = dict(os.environ if agent_env is None else agent_env)
        self._offload = offload
        self._run_blocking = run_blocking
        self._shell = shell
        self.computer_use = computer_use
        self.local_llm = local_llm
        #: The serial extension's open ports (None: no serial ports here).
        self.serial_ports = serial_ports
        #: FILE_DELETE moves entries here instead of unlinking (--recycle-bin).
        self.recycle_bin = (
            RecycleBin(recycle_bin, root=self.jail.root, clock=clock) if recycle_bin else None
        )

    @property
    def root(self) -> str:
        return self.jail.root

    async def close(self) -> None:
        if self.computer_use is not None:
            await self.computer_use.close()
        if self.local_llm is not None:
            await self.local_llm.close()
        self.temporaries.close()

    async def on_disconnect(self) -> None:
        """Input held down, or a port opened, by a request must not outlive its connection."""
        if self.computer_use is not None:
            await self.computer_use.release_all()
        if self.serial_ports is not None:
            await self.serial_ports.close_all()

    async def run(self, kind: MessageType, payload: Payload, emit: Emit | None = None) -> Reply:
        """Perform one request; raises ProtocolError with the spec's code.

        `emit` sends a streaming request's non-terminal frames (the chunks of
        LOCAL_LLM_COMPLETION) before the answer this returns."""
        if kind in serial_io.REQUESTS and self.serial_ports is not None:
            return await self.serial_ports.run(kind, payload)  # type: ignore[return-value]
        if kind is MessageType.LOCAL_LLM_COMPLETION:
            assert isinstance(payload, LocalLlmCompletion)
            if self.local_llm is None:  # never granted: the protocol refused it already
                raise ProtocolError(ErrorCode.FEATURE_NOT_SUPPORTED, "no local LLM here")
            response = await self.local_llm.complete(
                payload, limits=self.limits, emit=emit or _drop
            )
            return MessageType.LOCAL_LLM_COMPLETION_RESPONSE, response
        if kind is MessageType.EXECUTE_COMMAND:
            assert isinstance(payload, ExecuteCommand)
            # The child starts in the directory object the jail checked, held
            # open until it has run: swapping the path meanwhile changes nothing.
            with self.jail.working_directory(payload.cwd) as cwd:
                result = await self._shell(
                    payload,
                    cwd=cwd,
                    limits=self.limits,
                    agent_env=self._agent_env,
                    clock=self._clock,
                )
            return MessageType.COMMAND_RESULT, result
        if self.computer_use is not None and kind in self.computer_use.KINDS:
            return await self.computer_use.run(kind, payload)
        entry = FILE_OPERATIONS.get(kind)
        if entry is None:
            raise ProtocolError(
                ErrorCode.FEATURE_NOT_SUPPORTED, f"this agent does not implement {kind}"
            )
        response_kind, operation = entry
        if kind is MessageType.FILE_DELETE and self.recycle_bin is not None:
            operation = functools.partial(delete_path, recycle_bin=self.recycle_bin)
        if self._run_blocking is not None:
            response = await self._run_blocking(operation, payload, self.jail, self.limits)
        elif self._offload:
            response = await asyncio.to_thread(operation, payload, self.jail, self.limits)
        else:
            response = operation(payload, self.jail, self.limits)
        return response_kind, response


async def _drop(kind: MessageType, payload: Payload) -> None:
    """Where chunks go when nobody streams them."""
