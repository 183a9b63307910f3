"""The writer of one direction: releases each queued event at its time.

Events arrive with the time the toxic chain gave them and leave in arrival order.
A partition gate sits in front of the socket: `hold` keeps everything queued
until the partition heals; `drop` and `timeout` discard data (a FIN still waits
for the heal, as a FIN cannot cross a partition either). CLOSE and RESET are the
proxy's own actions and pass any gate.

The pump stops at the first signal and returns it; the connection acts on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable

from tetherbed.simulator.proxy.events import Event, Signal
from tetherbed.simulator.proxy.streams import Stream

# Bytes queued in one direction before the proxy stops reading from the sender.
HIGH_WATER = 1024 * 1024
LOW_WATER = 256 * 1024


class DirectionPump:
    def __init__(
        self,
        stream: Stream,
        destination: asyncio.StreamWriter,
        gate: Callable[[], str | None],
        on_write: Callable[[bytes], None] | None = None,
    ) -> None:
        """`on_write` sees every chunk as it is written (the wire recorder)."""
        self.stream = stream
        self._on_write = on_write
        self._destination = destination
        self._gate = gate
        self._queue: deque[list] = deque()  # [when, event]; lists so flush() can edit
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._queued_bytes = 0

    def put(self, when: float, event: Event) -> None:
        self._queue.append([when, event])
        if isinstance(event, bytes):
            self._queued_bytes += len(event)
            if self._queued_bytes > HIGH_WATER:
                self._room.clear()
        self._wake.set()

    def flush(self) -> None:
        """Make everything queued due now: the toxics that delayed it changed."""
        for item in self._queue:
            item[0] = 0.0
        self._wake.set()

    def poke(self) -> None:
        """Look at the gate again (the partition changed)."""
        self._wake.set()

    async def wait_for_room(self) -> None:
        await self._room.wait()

    async def run(self) -> Signal:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                await self._sleep(None)
                continue
            when, event = self._queue[0]
            delay = when - loop.time()
            if delay > 0:
                await self._sleep(delay)
                continue
            gate = self._gate()
            if gate == "hold" or (gate is not None and event is Signal.EOF):
                await self._sleep(None)
                continue
            self._queue.popleft()
            if not isinstance(event, bytes):
                return event
            self._release(len(event))
            if gate is None:  # else a drop/timeout partition swallows it
                if self._on_write is not None:
                    self._on_write(event)
                self._destination.write(event)
                await self._destination.drain()

    async def _sleep(self, seconds: float | None) -> None:
        """Until woken (new event, flush, gate change) or `seconds` passed."""
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    def _release(self, size: int) -> None:
        self._queued_bytes -= size
        if self._queued_bytes <= LOW_WATER:
            self._room.set()
