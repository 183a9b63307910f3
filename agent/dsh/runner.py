"""The agent's asyncio driver: `AgentCore` wired to HTTP, processes and files.

It carries out the core's actions (open/close the stream, POST, spawn, kill,
run a file operation in a worker thread), feeds back what happened, and
wakes the core at its next deadline. `start_runtime` is the §10.4 export: the
CLI's `run` and the hub's runtime mode (§10) both use it, so there is one
implementation of the wire protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tetherbed.agent.dsh import files, machine
from tetherbed.agent.dsh.core import (
    Action,
    AgentCore,
    AgentSettings,
    CloseStream,
    Kill,
    Log,
    OpenStream,
    Phase,
    Renamed,
    RunFs,
    SendPost,
    Spawn,
    Stopped,
)
from tetherbed.agent.dsh.processes import CommandRunner
from tetherbed.agent.dsh.transport import HubHttp, TransportError
from tetherbed.runtime.clock import Clock, SystemClock
from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh.sse import SseDecoder, SseError, SseEvent

logger = logging.getLogger("tetherbed.agent.dsh")

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


@dataclass(slots=True)
class RuntimeOptions:
    """§10.4 `options`: `{serverUrl, token, computerId, name?, heartbeatMs?, log?, onState?}`."""

    server_url: str
    token: str
    computer_id: str
    name: str = ""
    workspace_base: str = field(default_factory=lambda: str(Path.home()))
    capabilities: tuple[str, ...] = (C.Capability.EXEC, C.Capability.FS)
    chunk_format: str = "split"
    defects: frozenset[str] = frozenset()
    #: `(level, message)`; default: the `tetherbed.agent.dsh` logger.
    log: Callable[[str, str], None] | None = None
    #: Called with `status()` whenever the phase changes.
    on_state: Callable[[dict[str, Any]], None] | None = None
    #: Called with the new display name (`config` event or heartbeat answer).
    on_rename: Callable[[str], None] | None = None


class AgentRunner:
    def __init__(
        self,
        options: RuntimeOptions,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.options = options
        self.clock = clock or SystemClock()
        caps = list(options.capabilities)
        settings = AgentSettings(
            computer_id=options.computer_id,
            name=options.name or options.computer_id,
            capabilities=tuple(caps),
            metadata=machine.metadata_block(caps, options.workspace_base),
            meta=machine.heartbeat_meta(),
            chunk_format=options.chunk_format,
            defects=options.defects,
        )
        self.core = AgentCore(settings, self.clock, rng or random.Random())
        self.http = HubHttp(options.server_url, options.token)
        self.commands = CommandRunner(self._output, self._exited, options.workspace_base)
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stream_task: asyncio.Task[None] | None = None
        self._stream_generation = 0
        self._stopped: Stopped | None = None
        self._done = asyncio.Event()
        self._last_alive_log = 0.0
        self._phase = self.core.phase

    # --- public ------------------------------------------------------------

    async def run(self) -> int:
        """Serve until stopped; the exit code (0, or 3 when the token was refused)."""
        self._apply(self.core.start())
        try:
            while not self._done.is_set():
                deadline = self.core.next_deadline()
                timeout = None if deadline is None else max(0.0, deadline - self.clock.monotonic())
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                if self._done.is_set():
                    break
                await self._before_tick()
                self._apply(self.core.tick())
                self._alive_line()
        finally:
            await self._close()
        return self._stopped.exit_code if self._stopped else 0

    def stop(self) -> None:
        self._apply(self.core.shutdown())

    async def _before_tick(self) -> None:
        """A driver's hook before the core's timers run (the simulator freezes a
        paused agent here)."""

    def status(self) -> dict[str, Any]:
        status = self.core.status()
        status["serverUrl"] = self.options.server_url
        status["since"] = _iso(self.core.connected_since)
        return status

    # --- actions -----------------------------------------------------------

    def _apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, SendPost):
                self._spawn_task(self._post(action))
            elif isinstance(action, Spawn):
                self._spawn_task(
                    self.commands.spawn(action.request_id, action.command, action.cwd, action.shell)
                )
            elif isinstance(action, Kill):
                self.commands.kill(action.request_id)
            elif isinstance(action, RunFs):
                self._spawn_task(self._fs(action))
            elif isinstance(action, OpenStream):
                self._stream_generation = action.generation
                self._stream_task = self._spawn_task(self._stream(action.generation))
            elif isinstance(action, CloseStream):
                if self._stream_task is not None and action.generation == self._stream_generation:
                    self._stream_task.cancel()
                    self._stream_task = None
            elif isinstance(action, Renamed):
                if self.options.on_rename is not None:
                    self.options.on_rename(action.name)
            elif isinstance(action, Log):
                self._log(action.level, action.message)
            elif isinstance(action, Stopped):
                self._stopped = action
                self._done.set()
        if self.core.phase is not self._phase:
            self._phase = self.core.phase
            if self.options.on_state is not None:
                self.options.on_state(self.status())
        self._wake.set()

    def _spawn_task(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _log(self, level: str, message: str) -> None:
        if self.options.log is not None:
            self.options.log(level, message)
        else:
            logger.log(_LEVELS.get(level, logging.INFO), message)

    def _alive_line(self) -> None:
        """§6: a heartbeat log line at most every 60 s."""
        now = self.clock.monotonic()
        if self.core.phase is Phase.STREAMING and now - self._last_alive_log >= (
            C.AGENT_LOG_HEARTBEAT_S
        ):
            self._last_alive_log = now
            running = len(self.core.status()["running"])
            self._log("info", f"alive: connected as {self.core.name}, {running} running")

    # --- the stream ----------------------------------------------------------

    async def _stream(self, generation: int) -> None:
        try:
            stream = await self.http.open_stream(C.url(C.Route.EVENTS))
        except TransportError as exc:
            self._apply(self.core.stream_lost(generation, str(exc)))
            return
        try:
            status = stream.head.status
            if status != 200:
                body = await stream.read_all()
                self._apply(
                    self.core.stream_opened(generation, status, body.decode("utf-8", "replace"))
                )
                return
            if "text/event-stream" not in stream.head.header("content-type"):
                self._apply(self.core.stream_lost(generation, "the answer is not an event stream"))
                return
            self._apply(self.core.stream_opened(generation, 200))
            decoder = SseDecoder()
            async for data in stream.chunks():
                for item in decoder.feed(data):
                    if isinstance(item, SseEvent):
                        self._apply(self.core.stream_event(generation, item.event, item.data))
            self._apply(self.core.stream_lost(generation, "the hub ended the stream"))
        except (TransportError, SseError) as exc:
            self._apply(self.core.stream_lost(generation, str(exc)))
        finally:
            stream.close()

    # --- posts, commands, files ----------------------------------------------

    async def _post(self, action: SendPost) -> None:
        try:
            answer = await self.http.post_json(action.path, action.body)
        except TransportError as exc:
            self._log("debug", f"POST {action.path}: {exc}")
            self._apply(self.core.post_answered(action.post_id, None))
            return
        self._apply(self.core.post_answered(action.post_id, answer.status, answer.json()))

    def _output(self, request_id: str, stream: str, data: bytes) -> None:
        self._apply(self.core.process_output(request_id, stream, data))

    def _exited(
        self, request_id: str, code: int | None, signal: str | None, error: str | None
    ) -> None:
        self._apply(self.core.process_exited(request_id, code, signal, error))

    async def _fs(self, action: RunFs) -> None:
        timeout = C.FS_TIMEOUT_MS / 1000
        deadline = time.monotonic() + timeout
        try:
            result = await asyncio.wait_for(
                asyncio.to_thread(files.run, action.request, self.options.workspace_base, deadline),
                timeout,
            )
        except TimeoutError:
            result = {
                "ok": False,
                "op": str(action.request.get("op", "")),
                "path": str(action.request.get("path", "")),
                "error": f"timed out after {timeout:.0f} s",
            }
        self._apply(self.core.fs_finished(action.request_id, result))

    async def _close(self) -> None:
        if self._stream_task is not None:
            self._stream_task.cancel()
        await self.commands.close()
        for task in list(self._tasks):
            if not task.done():
                task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        await self.http.close()


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + (
        f".{int(seconds % 1 * 1000):03d}Z"
    )


@dataclass(slots=True)
class RuntimeHandle:
    """§10.4: `{ stop(), status() }` of a runtime started in this event loop."""

    runner: AgentRunner
    task: asyncio.Task[int]

    async def stop(self) -> int:
        if not self.task.done():
            self.runner.stop()
        return await self.task

    def status(self) -> dict[str, Any]:
        return self.runner.status()


def start_runtime(options: RuntimeOptions, **kwargs: Any) -> RuntimeHandle:
    """Run the agent in the current event loop until `stop()`."""
    runner = AgentRunner(options, **kwargs)
    return RuntimeHandle(runner, asyncio.ensure_future(runner.run()))
