"""One client connection through a fault proxy, and its connection to the upstream.

Each direction runs: a reader (stamps what it reads with the loop time), the
WebSocket stage (`WsSession`, when enabled), the toxic chain, and a pump that
writes each event at its time. Endings follow TCP: a half-close (FIN) is passed on
as a half-close; the connection is over when both directions have ended, when a
CLOSE reaches one side (the other side then drains and closes), or at a RESET.
A reset is a real RST: SO_LINGER 0 and then an abort, on both sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tetherbed.simulator.proxy.addresses import format_address
from tetherbed.simulator.proxy.chain import ToxicChain
from tetherbed.simulator.proxy.events import Signal
from tetherbed.simulator.proxy.http.session import HttpSession, Replay, ResetConnection
from tetherbed.simulator.proxy.pump import DirectionPump
from tetherbed.simulator.proxy.scheduler.driver import ScheduledConnection
from tetherbed.simulator.proxy.scheduler.frames import DOWN, UP
from tetherbed.simulator.proxy.streams import DOWNSTREAM, STREAMS, UPSTREAM, Stream
from tetherbed.simulator.proxy.ws.handshake import MAX_HEAD
from tetherbed.simulator.proxy.ws.session import (
    CallAt,
    EndConnection,
    Send,
    SendEof,
    SessionAction,
    WsSession,
)

if TYPE_CHECKING:
    from tetherbed.simulator.proxy.proxy import FaultProxy

log = logging.getLogger(__name__)
READ_SIZE = 64 * 1024
#: How long an unreachable upstream's connecting side may take to show its request.
UNREACHABLE_READ = 0.25
_OTHER: dict[Stream, Stream] = {UPSTREAM: DOWNSTREAM, DOWNSTREAM: UPSTREAM}
_DIRECTION: dict[Stream, str] = {UPSTREAM: UP, DOWNSTREAM: DOWN}


def abort_with_rst(writer: asyncio.StreamWriter) -> None:
    """Close so the peer gets RST ("connection reset by peer"), not FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class ProxiedConnection:
    def __init__(
        self,
        proxy: FaultProxy,
        client_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
        rng: random.Random,
    ) -> None:
        self._proxy = proxy
        self._client_reader = client_reader
        self._client_writer = client_writer
        self._rng = rng
        peer = client_writer.get_extra_info("peername") or ("?", 0)
        self.client = format_address(str(peer[0]), int(peer[1]))
        self._loop = asyncio.get_running_loop()
        self._writers: dict[Stream, asyncio.StreamWriter] = {}
        self._chains: dict[Stream, ToxicChain] = {}
        self._pumps: dict[Stream, DirectionPump] = {}
        self._session: WsSession | HttpSession | None = None
        #: This connection's handle on the run's frame scheduler, when one is on.
        self._scheduled: ScheduledConnection | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._timers: set[asyncio.TimerHandle] = set()
        self._partition_timer: asyncio.TimerHandle | None = None
        self._ended: set[Stream] = set()
        self._closing = False
        self._done = asyncio.Event()
        self._dialable = asyncio.Event()
        self._was_reset = False
        wire = proxy.wire
        self._tap = wire.stream_tap(proxy.wire_clock()) if wire is not None else None

    # -- lifecycle ------------------------------------------------------------

    async def run(self) -> None:
        try:
            self.partition_changed()
            await self._dialable.wait()
            if self._done.is_set():
                return
            host, port = self._proxy.upstream_address
            try:
                server_reader, server_writer = await asyncio.open_connection(
                    host,
                    port,
                    ssl=self._proxy.upstream_ssl,
                    server_hostname=self._proxy.upstream_hostname
                    if self._proxy.upstream_ssl is not None
                    else None,
                )
            except OSError as exc:
                log.info("%s: upstream %s:%s unreachable: %s", self._proxy.name, host, port, exc)
                if self._tap is not None:
                    await self._record_unreachable(self._tap)
                return
            if self._done.is_set():
                server_writer.close()
                return
            self._start(server_reader, server_writer)
            await self._done.wait()
        finally:
            self._finish()

    def _start(self, server_reader: asyncio.StreamReader, server_writer: asyncio.StreamWriter):
        self._writers = {UPSTREAM: server_writer, DOWNSTREAM: self._client_writer}
        readers = {UPSTREAM: self._client_reader, DOWNSTREAM: server_reader}
        for stream in STREAMS:
            pump = DirectionPump(
                stream,
                self._writers[stream],
                lambda s=stream: self._proxy.partitions.gate(s),
                self._recorded_write if stream == DOWNSTREAM and self._tap else None,
            )
            self._pumps[stream] = pump
            chain = ToxicChain(pump.put, rng=self._rng, call_at=self._call_at, clock=self._now)
            chain.sync(self._proxy.toxics_for(stream))
            self._chains[stream] = chain
        if self._proxy.http:
            self._session = HttpSession(self._proxy.http_rules)
        elif self._proxy.websocket:
            self._session = WsSession(
                self._proxy.rules,
                self._rng,
                strip_extensions=self._proxy.strip_extensions,
                close_timeout=self._proxy.close_timeout,
            )
            if self._proxy.scheduler is not None:
                self._scheduled = self._proxy.scheduler.open(self._proxy.schedule_link)
        for stream in STREAMS:
            self._tasks.append(asyncio.create_task(self._read(stream, readers[stream])))
            self._tasks.append(asyncio.create_task(self._write(stream)))

    def close(self) -> None:
        """End now: the proxy was disabled or deleted, or a timeout partition expired.

        Both sockets close at once and bytes the proxy still holds are discarded,
        so a peer that stopped reading cannot keep the connection alive.
        """
        for writer in (self._client_writer, *self._writers.values()):
            writer.transport.abort()
        self._done.set()
        self._dialable.set()

    def reset(self) -> None:
        """End now with an RST on both sides."""
        self._was_reset = True
        for writer in (self._client_writer, *self._writers.values()):
            abort_with_rst(writer)
        self._done.set()
        self._dialable.set()

    def _finish(self) -> None:
        if self._scheduled is not None:
            self._scheduled.close()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        for timer in self._timers:
            timer.cancel()
        if self._partition_timer is not None:
            self._partition_timer.cancel()
        for chain in self._chains.values():
            chain.close()
        for writer in (self._client_writer, *self._writers.values()):
            writer.close()
        self._done.set()
        if self._tap is not None:
            self._tap.end("reset" if self._was_reset else "closed", self._proxy.wire_clock())

    async def _record_unreachable(self, tap: Any) -> None:
        """Record what the connecting side asked for before it is turned away."""
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(UNREACHABLE_READ):
                data = await self._client_reader.read(MAX_HEAD)
                tap.feed("up", data, self._proxy.wire_clock())
        tap.unreachable(self._proxy.wire_clock())

    def _recorded_write(self, data: bytes) -> None:
        """Bytes about to reach the connecting side: what it receives."""
        assert self._tap is not None
        self._tap.feed("down", data, self._proxy.wire_clock())

    # -- notifications from the proxy ------------------------------------------

    def toxics_changed(self) -> None:
        for stream, chain in self._chains.items():
            if chain.sync(self._proxy.toxics_for(stream)):
                self._pumps[stream].flush()

    def partition_changed(self) -> None:
        partitions = self._proxy.partitions
        if not partitions.fully_cut:
            self._dialable.set()
        for pump in self._pumps.values():
            pump.poke()
        close_after = partitions.close_after()
        if close_after is None and self._partition_timer is not None:
            self._partition_timer.cancel()
            self._partition_timer = None
        elif close_after is not None and self._partition_timer is None:
            self._partition_timer = self._loop.call_later(close_after, self.close)

    def inject_close(self, toward: str, code: int, reason: str) -> bool:
        if self._session is None or self._done.is_set():
            return False
        actions = self._session.inject_close(toward, code, reason, self._now())
        self._apply(actions)
        return bool(actions)

    def describe(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "websocket": self._session is not None and self._session.is_websocket,
            "toxics": {stream: chain.active() for stream, chain in self._chains.items()},
        }

    # -- directions -----------------------------------------------------------

    async def _read(self, stream: Stream, reader: asyncio.StreamReader) -> None:
        pump = self._pumps[stream]
        try:
            while True:
                data = await reader.read(READ_SIZE)
                if not data:
                    break
                if stream == UPSTREAM and self._tap is not None:
                    self._tap.feed("up", data, self._proxy.wire_clock())
                self._ingest(stream, data)
                await pump.wait_for_room()
        except OSError:  # the sender reset its connection: pass the reset on
            if not self._done.is_set():
                self.reset()
            return
        if self._session is not None:
            self._apply(self._session.receive_eof(stream, self._now()))
        else:
            self._chains[stream].feed(Signal.EOF, self._now())

    async def _write(self, stream: Stream) -> None:
        try:
            signal = await self._pumps[stream].run()
        except OSError:
            self.reset()
            return
        self._ended.add(stream)
        destination = self._writers[stream]
        if signal is Signal.RESET:
            self.reset()
            return
        if signal is Signal.CLOSE or self._closing:
            self._closing = True
            destination.close()
            other = _OTHER[stream]
            if other not in self._ended:
                self._chains[other].feed(Signal.CLOSE, self._now())
        elif destination.can_write_eof():
            with contextlib.suppress(OSError):
                destination.write_eof()
        else:
            destination.close()
        if len(self._ended) == len(STREAMS):
            self._done.set()

    def _ingest(self, stream: Stream, data: bytes) -> None:
        if self._session is not None:
            self._apply(self._session.receive(stream, data, self._now()))
        else:
            self._chains[stream].feed(data, self._now())

    def _apply(self, actions: list[SessionAction] | list[Any]) -> None:
        now = self._now()
        for action in actions:
            match action:
                case Send(stream, data, frame):
                    if frame and self._scheduled is not None:
                        self._scheduled.submit(
                            _DIRECTION[stream], data, lambda s=stream, d=data: self._deliver(s, d)
                        )
                    else:
                        self._chains[stream].feed(data, now)
                case SendEof(stream):
                    if self._scheduled is not None:  # after the frames still held
                        self._scheduled.when_drained(
                            _DIRECTION[stream], lambda s=stream: self._deliver(s, Signal.EOF)
                        )
                    else:
                        self._chains[stream].feed(Signal.EOF, now)
                case CallAt(when, token):
                    self._call_at(when, lambda token=token: self._on_timer(token))
                case ResetConnection(reason):
                    log.debug("%s %s: reset: %s", self._proxy.name, self.client, reason)
                    self.reset()
                    return
                case Replay(data, delay):
                    self._proxy.replay(data, delay)
                case EndConnection(reason):
                    log.debug("%s %s: ending: %s", self._proxy.name, self.client, reason)
                    for chain in self._chains.values():
                        chain.feed(Signal.CLOSE, now)

    def _deliver(self, stream: Stream, event: bytes | Signal) -> None:
        """The frame scheduler released a frame (or a half-close after them)."""
        if not self._done.is_set():
            self._chains[stream].feed(event, self._now())

    def _on_timer(self, token: int) -> None:
        if self._session is not None and not self._done.is_set():
            self._apply(self._session.timer_fired(token, self._now()))

    def _call_at(self, when: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        """A timer that is cancelled if the connection ends first."""

        def fire() -> None:
            self._timers.discard(handle)
            callback()

        handle = self._loop.call_at(when, fire)
        self._timers.add(handle)
        return handle

    def _now(self) -> float:
        return self._loop.time()
