"""Plays the core's answers on asyncio: slots, queue, and the time between tokens.

Ollama serves one generation at a time by default (OLLAMA_NUM_PARALLEL=1):
later ones wait in a queue of OLLAMA_MAX_QUEUE, and beyond that get 503. The
runner keeps those slots and sleeps the plan's delays with the `sleep` it is
given — real time under `tetherbed llm-server`, virtual time on the sim
backend — and hands each piece to a `Responder`, which is the only part that
knows whether it is writing HTTP or feeding an in-process caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from tetherbed.runtime.clock import Clock
from tetherbed.simulator.peripherals.llm_server.core import (
    SERVER_BUSY,
    LlmServerCore,
    Plan,
    Reply,
)

Sleep = Callable[[float], Awaitable[None]]

_encode = msgspec.json.encode


class Responder(Protocol):
    """Where an answer goes: an HTTP response, or an in-process caller."""

    async def reply(self, reply: Reply) -> None: ...

    async def start_stream(self) -> None: ...

    async def write_line(self, line: bytes) -> None: ...

    async def end(self) -> None: ...

    async def cut(self) -> None: ...


class GenerationRunner:
    def __init__(self, core: LlmServerCore, clock: Clock, sleep: Sleep = asyncio.sleep) -> None:
        self.core = core
        self._clock = clock
        self._sleep = sleep
        self._slots = asyncio.Semaphore(core.config.parallel)
        #: Generations running or waiting for a slot.
        self.pending = 0

    async def serve(self, method: str, path: str, body: bytes, out: Responder) -> None:
        """Answer one request completely through `out`."""
        result = self.core.handle(method, path, body)
        if isinstance(result, Reply):
            await out.reply(result)
            return
        config = self.core.config
        if self.pending >= config.parallel + config.max_queue:
            await out.reply(Reply(503, {"error": SERVER_BUSY}))
            return
        self.pending += 1
        try:
            async with self._slots:
                await self._play(result, out)
        finally:
            self.pending -= 1

    async def _play(self, plan: Plan, out: Responder) -> None:
        if plan.failure is not None or not plan.stream:
            await self._sleep_for(plan.duration)
            reply = plan.assembled()
            if reply is None:
                await out.cut()
            else:
                await out.reply(self._stamped(reply))
            return
        await out.start_stream()
        for line in plan.lines:
            await self._sleep_for(line.delay)
            await out.write_line(self.line(line.fields))
        if plan.cut:
            await out.cut()
        else:
            await out.end()

    async def _sleep_for(self, seconds: float) -> None:
        if seconds > 0:
            await self._sleep(seconds)

    def line(self, fields: dict[str, Any]) -> bytes:
        """One NDJSON line, `created_at` set to now."""
        return _encode(self._stamp(fields)) + b"\n"

    def _stamped(self, reply: Reply) -> Reply:
        if isinstance(reply.body, dict) and "created_at" in reply.body:
            return Reply(reply.status, self._stamp(reply.body))
        return reply

    def _stamp(self, fields: dict[str, Any]) -> dict[str, Any]:
        if "created_at" not in fields:
            return fields
        now = datetime.fromtimestamp(self._clock.time(), UTC)
        return {**fields, "created_at": now.isoformat(timespec="microseconds")[:-6] + "Z"}
