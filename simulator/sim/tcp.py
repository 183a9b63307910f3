"""Byte-stream (TCP) connections on the sim network, for HTTP links in virtual time.

The WebSocket links of `network.py` carry whole frames; an SSE agent's link
carries HTTP/1.1, so it needs what TCP gives: an ordered byte stream in each
direction, half-closes, resets. A `SimTcp` opens such connections over the
same per-node `Link` (its partitions, pause and toxics), so a fault means the
same whatever the link carries. The node's side is an asyncio
`StreamReader`/`StreamWriter` pair (what `asyncio.open_connection` returns);
the hub's side is any asyncio `Protocol` (the hub's aiohttp request handler),
driven through a `Transport` of this module.

Each direction runs, in order: the fault proxy's HTTP stage (`proxy/http`:
the link's HTTP rules drop or replay whole requests and responses), the
proxy's toxic chain over the real bytes, the partition gate (held bytes are
delivered on heal, as TCP retransmits them), then the network's latency. The
wire recorder (`wiretap/dsh`) reads what the node sent before any fault and
what reached it after all of them, as the proxy's recorder does.

TCP behaviours the hub relies on are modelled: a window (a peer that does
not read pushes back on the writer through `pause_writing`), `eof_received`
and the close that follows it, RST, and `TCP_USER_TIMEOUT` — set through the
hub's socket, it aborts a connection whose written bytes have gone
undelivered (a partition, a blackhole) for that long, which is how the hub
finds a half-dead stream. A paused node's kernel still takes delivery (that
is not a timeout), but nothing reaches its code until it resumes.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import socket
from collections.abc import Callable
from typing import Any

from tetherbed.simulator.proxy.chain import ToxicChain
from tetherbed.simulator.proxy.events import Signal
from tetherbed.simulator.proxy.http.replay import replay_request
from tetherbed.simulator.proxy.http.rules import HttpRuleBook
from tetherbed.simulator.proxy.http.session import HttpSession, Replay, ResetConnection
from tetherbed.simulator.proxy.streams import DOWNSTREAM, UPSTREAM
from tetherbed.simulator.proxy.ws.session import Send, SendEof
from tetherbed.simulator.sim.network import OPEN_TIMEOUT, Link, SimNetwork
from tetherbed.simulator.wiretap.records import DOWN, UP

#: The hub's address as its sockets report it (the hub's install URLs use it).
HUB_ADDRESS = ("hub", 8765)
#: Reads handed to a StreamReader at once.
_READ_LIMIT = 64 * 1024


class _Fin:
    """The sender's half-close, in order behind its data."""


class _Rst:
    """A reset travelling to the receiver (it arrives when the path lets it)."""


_FIN = _Fin()
_RST = _Rst()
Item = bytes | _Fin | _Rst

AcceptFactory = Callable[[], asyncio.Protocol]


class FakeSocket:
    """What `get_extra_info("socket")` returns: options are kept, and
    TCP_USER_TIMEOUT is honoured by the transport that owns it."""

    family = socket.AF_INET
    type = socket.SOCK_STREAM

    def __init__(self, end: _End) -> None:
        self._end = end
        self.options: dict[tuple[int, int], Any] = {}

    def setsockopt(self, level: int, option: int, value: Any, *rest: Any) -> None:
        self.options[level, option] = value
        if level == socket.IPPROTO_TCP and option == getattr(socket, "TCP_USER_TIMEOUT", -1):
            self._end.user_timeout = int(value) / 1000 if value else None

    def getsockopt(self, level: int, option: int, *rest: Any) -> Any:
        return self.options.get((level, option), 0)

    def fileno(self) -> int:
        return -1


class _Pipe:
    """One direction: toxics, the partition gate, latency, then the receiver."""

    def __init__(self, connection: _Connection, direction: str, target: _End) -> None:
        self.connection = connection
        self.direction = direction  # "up" (node → hub) or "down"
        self.target = target
        self.stream = UPSTREAM if direction == "up" else DOWNSTREAM
        self.chain: ToxicChain | None = None
        self.toxic_out: collections.deque[tuple[float, Item]] = collections.deque()
        self.toxic_timer: asyncio.TimerHandle | None = None
        self.toxic_last = 0.0
        self.held: list[Item] = []
        self.in_flight: collections.deque[tuple[float, Item]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None
        self.last_at = 0.0
        #: Written and not yet in the receiver's kernel: (time written, bytes).
        self.unacked: collections.deque[tuple[float, int]] = collections.deque()
        self.user_timer: asyncio.TimerHandle | None = None
        self.sync_toxics()

    @property
    def link(self) -> Link:
        return self.connection.link

    def gate_closed(self) -> bool:
        link = self.link
        if link.held[self.direction]:
            return True
        return self.direction == "up" and link.paused  # a frozen node sends nothing

    # --- entering -------------------------------------------------------------------

    def push(self, item: Item) -> None:
        loop = asyncio.get_running_loop()
        if isinstance(item, bytes):
            if not item:
                return
            self.unacked.append((loop.time(), len(item)))
            self.connection.sender_of(self).watch_user_timeout(self)
        if self.chain is None and not self.toxic_out:
            self._gate(item)
            return
        if self.chain is None:
            self._after_toxics(loop.time(), item)
            return
        if isinstance(item, _Rst):
            self._after_toxics(loop.time(), item)
            return
        self.chain.feed(Signal.EOF if isinstance(item, _Fin) else item, loop.time())

    def _from_chain(self, when: float, event: Any) -> None:
        if isinstance(event, bytes):
            self._after_toxics(when, event)
        elif event is Signal.EOF:
            self._after_toxics(when, _FIN)
        else:  # a toxic ended the connection (limit_data, a timeout)
            self._after_toxics(when, _RST)

    def sync_toxics(self) -> None:
        toxics = self.link.toxics_for(self.direction)
        if self.chain is None:
            if not toxics:
                return
            loop = asyncio.get_running_loop()
            self.chain = ToxicChain(
                self._from_chain,
                rng=self.connection.tcp.network.rng,
                call_at=loop.call_at,
                clock=loop.time,
            )
        if self.chain.sync(toxics) and self.toxic_out:
            # As in the proxy: a change releases what the old toxics delayed.
            now = asyncio.get_running_loop().time()
            waiting = [item for _, item in self.toxic_out]
            self.toxic_out.clear()
            self.toxic_last = now
            if self.toxic_timer is not None:
                self.toxic_timer.cancel()
                self.toxic_timer = None
            for item in waiting:
                self._after_toxics(now, item)

    def _after_toxics(self, at: float, item: Item) -> None:
        loop = asyncio.get_running_loop()
        at = max(at, self.toxic_last)
        self.toxic_last = at
        self.toxic_out.append((at, item))
        if self.toxic_timer is None:
            self.toxic_timer = loop.call_at(at, self._toxics_done)

    def _toxics_done(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self.toxic_out and self.toxic_out[0][0] <= now:
            item = self.toxic_out.popleft()[1]
            if isinstance(item, _Rst):
                self.toxic_out.clear()
                self.connection.reset("a toxic ended the connection")
                break
            self._gate(item)
        self.toxic_timer = (
            loop.call_at(self.toxic_out[0][0], self._toxics_done) if self.toxic_out else None
        )

    # --- the gate and the latency -------------------------------------------------------

    def _gate(self, item: Item) -> None:
        if self.gate_closed() or self.held:
            self.held.append(item)
            return
        self._schedule(item)

    def flush(self) -> None:
        if self.gate_closed():
            return
        held, self.held = self.held, []
        for item in held:
            self._schedule(item)

    def _schedule(self, item: Item) -> None:
        loop = asyncio.get_running_loop()
        at = max(loop.time() + self.connection.tcp.network.delay(), self.last_at)
        self.last_at = at
        self.in_flight.append((at, item))
        if self.timer is None:
            self.timer = loop.call_at(at, self._arrive)

    def _arrive(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self.in_flight and self.in_flight[0][0] <= now:
            item = self.in_flight.popleft()[1]
            if isinstance(item, bytes):
                self._acked(len(item))
            self.target.arrive(item)
        self.timer = loop.call_at(self.in_flight[0][0], self._arrive) if self.in_flight else None

    def _acked(self, size: int) -> None:
        while size > 0 and self.unacked:
            written, left = self.unacked[0]
            if left > size:
                self.unacked[0] = (written, left - size)
                return
            size -= left
            self.unacked.popleft()

    def stop(self) -> None:
        for timer in (self.timer, self.toxic_timer, self.user_timer):
            if timer is not None:
                timer.cancel()
        self.timer = self.toxic_timer = self.user_timer = None
        self.in_flight.clear()
        self.toxic_out.clear()
        self.held.clear()
        self.unacked.clear()
        if self.chain is not None:
            self.chain.close()


class _End(asyncio.Transport):
    """One side of a connection, as the asyncio transport its protocol writes to."""

    def __init__(self, connection: _Connection, side: str) -> None:
        super().__init__()
        self.connection = connection
        self.side = side  # "node" or "hub"
        self.protocol: asyncio.Protocol | None = None
        self.out: _Pipe | None = None
        self.closing = False  # close() was called
        self.lost = False  # connection_lost was (or is about to be) called
        self.reading = True
        self.eof_received = False
        self.writing_paused = False
        #: Arrived (acknowledged by this side's kernel), not yet given to the protocol.
        self.kernel: collections.deque[Item] = collections.deque()
        #: Bytes the protocol has not read yet, including the kernel's.
        self.unread = 0
        self.user_timeout: float | None = None
        self.reset_sent = False
        self.socket = FakeSocket(self)
        self._extra = {
            "socket": self.socket,
            "sockname": HUB_ADDRESS if side == "hub" else ("node", connection.number),
            "peername": ("node", connection.number) if side == "hub" else HUB_ADDRESS,
            "sslcontext": None,
        }

    # --- asyncio.Transport ------------------------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._extra.get(name, default)

    def is_closing(self) -> bool:
        return self.closing or self.lost

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.is_closing() or not data:
            return
        self.connection.sent(self, bytes(data))

    def writelines(self, chunks: Any) -> None:
        self.write(b"".join(chunks))

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        if not self.is_closing():
            self.connection.sent_eof(self)

    def close(self) -> None:
        if self.is_closing():
            return
        self.closing = True
        self.reading = False
        self.connection.sent_eof(self)
        self._lose(None)

    def abort(self) -> None:
        if self.lost:
            return
        self.connection.reset("aborted", origin=self)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        if not self.reading and not self.closing:
            self.reading = True
            self.deliver()

    def is_reading(self) -> bool:
        return self.reading

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol  # type: ignore[assignment]

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.protocol  # type: ignore[return-value]

    def get_write_buffer_size(self) -> int:
        return self.out.connection.peer(self).unread if self.out is not None else 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    # --- the network side ---------------------------------------------------------------

    def arrive(self, item: Item) -> None:
        """Something reached this side's kernel."""
        if self.lost:
            # A closed socket's kernel answers data with a reset.
            if isinstance(item, bytes) and not self.reset_sent and self.out is not None:
                self.reset_sent = True
                self.out.push(_RST)
            return
        if isinstance(item, _Rst):
            self.connection.reset("reset by peer", delivered_to=self)
            return
        if isinstance(item, bytes):
            self.unread += len(item)
            self.connection.arrived(self, item)
        self.kernel.append(item)
        self.deliver()

    def deliver(self) -> None:
        """Hand what the kernel holds to the protocol, as far as it reads."""
        while self.kernel and self.reading and not self.lost and self.connection.running(self):
            item = self.kernel.popleft()
            protocol = self.protocol
            assert protocol is not None
            if isinstance(item, bytes):
                self.unread -= len(item)
                self.connection.room(self)
                protocol.data_received(item)
            elif isinstance(item, _Fin) and not self.eof_received:
                self.eof_received = True
                keep_open = protocol.eof_received()
                if not keep_open:
                    self.close()

    def watch_user_timeout(self, pipe: _Pipe) -> None:
        if self.user_timeout is None or pipe.user_timer is not None or not pipe.unacked:
            return
        loop = asyncio.get_running_loop()
        pipe.user_timer = loop.call_at(
            pipe.unacked[0][0] + self.user_timeout, self._user_timer_fired, pipe
        )

    def _user_timer_fired(self, pipe: _Pipe) -> None:
        pipe.user_timer = None
        if self.lost or not pipe.unacked or self.user_timeout is None:
            return
        now = asyncio.get_running_loop().time()
        if now >= pipe.unacked[0][0] + self.user_timeout:  # the very sum it was armed for
            # The kernel gives up: this side's protocol sees ETIMEDOUT; the peer
            # gets a reset once anything can reach it.
            self.connection.timed_out(self)
            return
        self.watch_user_timeout(pipe)

    def _lose(self, exc: BaseException | None) -> None:
        if self.lost:
            return
        self.lost = True
        self.reading = False
        protocol = self.protocol
        if protocol is not None:
            asyncio.get_running_loop().call_soon(protocol.connection_lost, exc)
        self.connection.side_lost(self)


class _Connection:
    def __init__(self, tcp: SimTcp, link: Link, number: int, *, tapped: bool) -> None:
        self.tcp = tcp
        self.link = link
        self.number = number
        self.node = _End(self, "node")
        self.hub = _End(self, "hub")
        self.up = _Pipe(self, "up", self.hub)
        self.down = _Pipe(self, "down", self.node)
        self.node.out, self.hub.out = self.up, self.down
        log = tcp.taps.get(link.name) if tapped else None
        self.tap = log.stream_tap(_now()) if log is not None else None
        self.session = HttpSession(tcp.rules(link.name)) if tapped else None
        self.ended = False
        self._resetting = False

    def peer(self, end: _End) -> _End:
        return self.hub if end is self.node else self.node

    def sender_of(self, pipe: _Pipe) -> _End:
        return self.node if pipe is self.up else self.hub

    def running(self, end: _End) -> bool:
        """A paused node's code gets nothing until it resumes."""
        return not (end is self.node and self.link.paused)

    # --- what the sides do -------------------------------------------------------------

    def sent(self, end: _End, data: bytes) -> None:
        pipe = end.out
        assert pipe is not None
        if end is self.node and self.tap is not None:
            self.tap.feed(UP, data, _now())
        if self.session is None:
            pipe.push(data)
        else:
            stream = UPSTREAM if end is self.node else DOWNSTREAM
            self._apply(self.session.receive(stream, data, _now()))
        peer = self.peer(end)
        if peer.unread + _pending(pipe) >= self.tcp.network.window_bytes and not end.writing_paused:
            end.writing_paused = True
            with contextlib.suppress(Exception):
                end.protocol.pause_writing()  # type: ignore[union-attr]

    def sent_eof(self, end: _End) -> None:
        pipe = end.out
        assert pipe is not None
        if self.session is None:
            pipe.push(_FIN)
        else:
            stream = UPSTREAM if end is self.node else DOWNSTREAM
            self._apply(self.session.receive_eof(stream, _now()))

    def _apply(self, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, Send):
                (self.up if action.stream == UPSTREAM else self.down).push(action.data)
            elif isinstance(action, SendEof):
                (self.up if action.stream == UPSTREAM else self.down).push(_FIN)
            elif isinstance(action, ResetConnection):
                self.reset(action.reason)
                return
            elif isinstance(action, Replay):
                self.tcp.replay(action.data, action.delay)

    def arrived(self, end: _End, data: bytes) -> None:
        if end is self.node and self.tap is not None:
            self.tap.feed(DOWN, data, _now())

    def room(self, end: _End) -> None:
        """`end` read some: its peer may write again."""
        writer = self.peer(end)
        pipe = writer.out
        if (
            writer.writing_paused
            and pipe is not None
            and end.unread + _pending(pipe) < self.tcp.network.window_bytes // 2
        ):
            writer.writing_paused = False
            with contextlib.suppress(Exception):
                writer.protocol.resume_writing()  # type: ignore[union-attr]

    # --- endings ----------------------------------------------------------------------

    def reset(
        self, why: str, *, origin: _End | None = None, delivered_to: _End | None = None
    ) -> None:
        """RST: both sides lose the connection now (an abort of `origin` is no
        error for `origin` itself)."""
        self._resetting = True
        # What the node saw: it had closed already, or the reset ended it.
        how = "closed" if self.node.closing else "reset"
        for end in (self.node, self.hub):
            if end.lost:
                continue
            exc = None if end is origin else ConnectionResetError(f"connection reset: {why}")
            end._lose(exc)
        self._finish(how)

    def timed_out(self, end: _End) -> None:
        """`end`'s kernel gave up (TCP_USER_TIMEOUT): it loses the connection now,
        and its peer gets a reset whenever the path lets one through."""
        end._lose(TimeoutError("connection timed out"))
        pipe = end.out
        assert pipe is not None
        pipe.held.clear()
        pipe.toxic_out.clear()
        pipe.in_flight.clear()
        pipe.push(_RST)

    def side_lost(self, end: _End) -> None:
        if self.node.lost and self.hub.lost and not self._resetting:
            self._finish("closed")

    def _finish(self, how: str) -> None:
        if self.ended:
            return
        self.ended = True
        if self.tap is not None:
            self.tap.end(how, _now())
        if how == "reset":
            self.up.stop()
            self.down.stop()
        self.tcp.forget(self)

    def link_changed(self) -> None:
        for pipe in (self.up, self.down):
            pipe.sync_toxics()
            pipe.flush()
        self.node.deliver()


def _pending(pipe: _Pipe) -> int:
    return sum(size for _, size in pipe.unacked)


def _now() -> float:
    return asyncio.get_running_loop().time()


class SimTcp:
    def __init__(self, network: SimNetwork) -> None:
        self.network = network
        #: The wire recorder of each node whose link it watches (`DshWireLog`).
        self.taps: dict[str, Any] = {}
        self._rules: dict[str, HttpRuleBook] = {}
        self._accept: AcceptFactory | None = None
        self._connections: dict[_Connection, None] = {}
        self._numbers = itertools.count(1)
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- the hub's side ------------------------------------------------------------------

    def listen(self, accept: AcceptFactory) -> None:
        """The hub accepts: `accept()` makes the protocol of each new connection."""
        self._accept = accept

    def stop_listening(self) -> None:
        self._accept = None

    def crash(self) -> None:
        """The hub is gone without a goodbye: every connection is reset."""
        self._accept = None
        for connection in list(self._connections):
            connection.reset("the hub crashed")

    # --- the nodes' side -----------------------------------------------------------------

    def rules(self, node: str) -> HttpRuleBook:
        book = self._rules.get(node)
        if book is None:
            book = self._rules[node] = HttpRuleBook()
        return book

    async def open(self, node: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection from `node` to the hub, as `asyncio.open_connection` gives it."""
        link = self.network.link(node)
        self._watch(link)
        loop = asyncio.get_running_loop()
        connection = _Connection(self, link, next(self._numbers), tapped=True)
        deadline = loop.time() + OPEN_TIMEOUT
        while link.paused or link.held["up"] or link.held["down"] or link.blackholed:
            remaining = deadline - loop.time()
            if remaining <= 0:
                if connection.tap is not None:
                    connection.tap.end("closed", _now())
                raise TimeoutError(f"{node}: connecting timed out behind a partition")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(link.changed.wait(), remaining)
        await asyncio.sleep(self.network.delay() * 2 + link.handshake_latency())
        if self._accept is None:
            if connection.tap is not None:
                connection.tap.unreachable(_now())
                connection.tap.end("closed", _now())
            raise ConnectionRefusedError(f"{node}: nothing listening at the hub")
        return self._connect(connection, loop)

    def _connect(
        self, connection: _Connection, loop: asyncio.AbstractEventLoop
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        assert self._accept is not None
        self._connections[connection] = None
        reader = asyncio.StreamReader(limit=_READ_LIMIT * 2, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        connection.node.protocol = protocol
        protocol.connection_made(connection.node)
        writer = asyncio.StreamWriter(connection.node, protocol, reader, loop)
        hub_protocol = self._accept()
        connection.hub.protocol = hub_protocol
        hub_protocol.connection_made(connection.hub)
        return reader, writer

    def reset(self, node: str) -> int:
        """RST every connection of the node's link (a `reset` fault, a killed node)."""
        found = [c for c in self._connections if c.link.name == node]
        for connection in found:
            connection.reset("reset by the network")
        return len(found)

    def wake(self, node: str) -> None:
        """The node's link changed (it resumed): every connection looks again now."""
        for connection in [c for c in self._connections if c.link.name == node]:
            connection.link_changed()

    def forget(self, connection: _Connection) -> None:
        self._connections.pop(connection, None)

    def replay(self, data: bytes, delay: float) -> None:
        """An intermediary sends `data` to the hub again (`HttpSession`'s Replay)."""
        loop = asyncio.get_running_loop()
        loop.call_later(delay, lambda: self._spawn(self._replay(data)))

    async def _replay(self, data: bytes) -> None:
        if self._accept is None:
            return

        async def open_direct() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            # The intermediary's own path to the hub: no faults, no recorder.
            connection = _Connection(self, Link("~replay"), next(self._numbers), tapped=False)
            return self._connect(connection, asyncio.get_running_loop())

        await replay_request(open_direct, data)

    # --- watching the links ----------------------------------------------------------------

    def _watch(self, link: Link) -> None:
        if link.name not in self._watchers:
            self._watchers[link.name] = self._spawn(self._follow(link))

    async def _follow(self, link: Link) -> None:
        """Partitions healed, toxics changed, a node resumed: every connection looks again."""
        while True:
            await link.changed.wait()
            for connection in [c for c in self._connections if c.link is link]:
                connection.link_changed()

    def _spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        for connection in list(self._connections):
            connection.reset("the network is shutting down")
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._watchers.clear()
