"""The sim backend's in-memory network: WebSocket-like connections in virtual time.

Each node (agent or client) reaches the hub over its own `Link`, which holds
that node's fault state: partitions per direction, latency with seeded
jitter, blackholes, message rules by type, a byte limit, and whether the
node is paused (frozen like a sleeping laptop: it neither sends nor reads).

Messages in one direction of one connection are delivered in order, each
after the link's latency; a partitioned direction holds them (TCP keeps
retransmitting) and delivers them when healed. Everything random comes from
the network's seeded generator, so a seed fixes every interleaving.
"""

from __future__ import annotations

import asyncio
import collections
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tetherbed.runtime.transport import TransportClosed, UpgradeRefused
from tetherbed.simulator.wiretap.log import WireConnection, WireLog
from tetherbed.simulator.wiretap.records import DOWN, UP

#: Base one-way latency of every link, and its jitter (seconds).
BASE_LATENCY = 0.001
BASE_JITTER = 0.0005
#: How long a connect waits behind a partition before it times out.
OPEN_TIMEOUT = 10.0


class _TypeOnly(msgspec.Struct):
    type: str = ""


_type_decoder = msgspec.json.Decoder(_TypeOnly)


def message_type(data: bytes) -> str:
    try:
        return _type_decoder.decode(data).type
    except msgspec.MsgspecError:
        return ""


@dataclass(eq=False)
class Rule:
    """A message-aware fault: what to do with messages of some types."""

    action: str  # drop | delay | duplicate | reorder
    types: frozenset[str]
    direction: str  # up (node → hub) | down (hub → node) | both
    delay: float = 0.0
    count: int | None = None  # None: every match

    def matches(self, kind: str, direction: str) -> bool:
        if self.count is not None and self.count <= 0:
            return False
        if self.direction not in ("both", direction):
            return False
        return not self.types or kind in self.types


@dataclass(eq=False)
class Link:
    """The path between one node and the hub, with that node's faults."""

    name: str
    latency: float = 0.0
    jitter: float = 0.0
    held: dict[str, bool] = field(default_factory=lambda: {"up": False, "down": False})
    blackhole: bool = False
    paused: bool = False
    rules: list[Rule] = field(default_factory=list)
    limit_bytes: int | None = None
    bytes_sent: int = 0
    bandwidth: float | None = None  # bytes per second
    # Ordered (dicts used as sets): iteration order must never depend on
    # object addresses, or a seed would not fix the history.
    endpoints: dict[SimEndpoint, None] = field(default_factory=dict)
    #: Every pipe that may still hold messages (a closed end's pipe may).
    pipes: dict[_Pipe, None] = field(default_factory=dict)
    #: Set whenever the link's gates open (heal, resume); waiters re-check.
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def gate_closed(self, direction: str) -> bool:
        return self.held[direction] or self.paused

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class _Closed:
    """The marker a closed connection leaves in the reader's inbox."""

    def __init__(self, code: int | None, reason: str) -> None:
        self.code = code
        self.reason = reason


class _Pipe:
    """One direction of one connection: ordered, delayed, holdable delivery."""

    def __init__(self, network: SimNetwork, link: Link, direction: str, target: SimEndpoint):
        self.network = network
        self.link = link
        self.direction = direction
        self.target = target
        self.held: list[tuple[bytes | _Closed, float]] = []
        self.last_at = 0.0
        self.reorder_slot: bytes | None = None
        #: Messages on the wire, in order, with their arrival times. One timer
        #: at a time delivers them: asyncio does not keep timers with equal
        #: times in the order they were set, and a pipe must.
        self.in_flight: collections.deque[tuple[float, bytes | _Closed]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None

    def push(self, item: bytes | _Closed, extra: float = 0.0) -> None:
        """Send `item`, `extra` seconds later than the link's latency."""
        if self.link.gate_closed(self.direction) or self.held:
            self.held.append((item, extra))
            return
        self._schedule(item, extra)

    def flush(self) -> None:
        if self.link.gate_closed(self.direction):
            return
        held, self.held = self.held, []
        for item, extra in held:
            self._schedule(item, extra)

    def _schedule(self, item: bytes | _Closed, extra: float = 0.0) -> None:
        loop = asyncio.get_running_loop()
        delay = self.network.delay(self.link, item) + extra
        at = loop.time() + delay
        if extra:
            # A delayed message lets later ones overtake it (like the proxy's rule).
            loop.call_at(at, self.target.deliver, item)
            return
        at = max(at, self.last_at)
        self.last_at = at
        self.in_flight.append((at, item))
        if self.timer is None:
            self.timer = loop.call_at(at, self._arrive)

    def _arrive(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self.in_flight and self.in_flight[0][0] <= now:
            self.target.deliver(self.in_flight.popleft()[1])
        self.timer = loop.call_at(self.in_flight[0][0], self._arrive) if self.in_flight else None


class SimEndpoint:
    """One end of a simulated WebSocket; a `MessageTransport`."""

    def __init__(self, network: SimNetwork, link: Link, side: str) -> None:
        self.network = network
        self.link = link
        self.side = side  # "node" or "hub"
        self.inbox: asyncio.Queue[bytes | _Closed] = asyncio.Queue()
        self.peer: SimEndpoint | None = None
        self.out: _Pipe | None = None
        self.closed: _Closed | None = None
        self.aborted = False
        #: The wire recorder's view of this connection (node ends of tapped links).
        self.wire: WireConnection | None = None

    @property
    def direction(self) -> str:
        return "up" if self.side == "node" else "down"

    # --- MessageTransport ----------------------------------------------------

    async def send(self, data: bytes) -> None:
        if self.side == "node":
            while self.link.paused:  # a frozen process sends nothing
                await self.link.changed.wait()
        if self.closed is not None:
            raise TransportClosed(self.closed.code, self.closed.reason)
        assert self.out is not None
        if self.wire is not None:
            self.wire.message(UP, data, _now())
        link = self.link
        if link.blackhole:
            return
        if link.limit_bytes is not None:
            link.bytes_sent += len(data)
            if link.bytes_sent > link.limit_bytes:
                self.network.abort(self)
                raise TransportClosed(None, "connection closed after the data limit")
        if link.rules:
            kind = message_type(data)
            for rule in link.rules:
                if rule.matches(kind, self.direction):
                    if rule.count is not None:
                        rule.count -= 1
                    if rule.action == "drop":
                        return
                    if rule.action == "duplicate":
                        self.out.push(data)
                        break
                    if rule.action == "delay":
                        self.out.push(data, rule.delay)
                        return
                    if rule.action == "reorder" and self.out.reorder_slot is None:
                        self.out.reorder_slot = data
                        return
                    break
        self.out.push(data)
        if self.out.reorder_slot is not None and self.out.reorder_slot is not data:
            slot, self.out.reorder_slot = self.out.reorder_slot, None
            self.out.push(slot)

    async def recv(self) -> bytes:
        if self.closed is not None and self.inbox.empty():
            raise TransportClosed(self.closed.code, self.closed.reason)
        item = await self.inbox.get()
        if isinstance(item, _Closed):
            self.closed = self.closed or item
            raise TransportClosed(item.code, item.reason)
        return item

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.closed is not None:
            return
        if self.wire is not None:
            self.wire.close(UP, code, reason, _now())
        self.closed = _Closed(code, reason)
        if self.out is not None:
            self.out.push(_Closed(code, reason))
        self.inbox.put_nowait(_Closed(code, reason))
        self.network.forget(self)

    # --- network side --------------------------------------------------------

    def deliver(self, item: bytes | _Closed) -> None:
        if self.aborted:
            return
        if self.wire is not None:
            self._record_delivery(self.wire, item)
        if isinstance(item, _Closed) and self.closed is None:
            self.closed = item
            # Answer a close with a close, as the WebSocket handshake does.
            if self.out is not None:
                self.out.push(_Closed(item.code, item.reason))
            self.network.forget(self)
        self.inbox.put_nowait(item)

    def _record_delivery(self, wire: WireConnection, item: bytes | _Closed) -> None:
        now = _now()
        if isinstance(item, bytes):
            wire.message(DOWN, item, now)
            return
        wire.close(DOWN, item.code, item.reason, now)
        if self.closed is None:  # our automatic reply
            wire.close(UP, item.code, item.reason, now)
        wire.end("closed", now)


def _now() -> float:
    return asyncio.get_running_loop().time()


Listener = Callable[[SimEndpoint, str, Mapping[str, str]], Awaitable[None]]
Admit = Callable[[str, Mapping[str, str]], tuple[int, bytes] | None]


class SimNetwork:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.links: dict[str, Link] = {}
        self._admit: Admit | None = None
        self._serve: Listener | None = None
        self._serving: set[asyncio.Task[None]] = set()
        #: Nodes whose links the wire recorder watches.
        self.taps: dict[str, WireLog] = {}

    def link(self, name: str) -> Link:
        link = self.links.get(name)
        if link is None:
            link = self.links[name] = Link(name)
        return link

    def listen(self, admit: Admit, serve: Listener) -> None:
        """The hub starts accepting: `admit` checks an upgrade, `serve` runs it."""
        self._admit, self._serve = admit, serve

    def stop_listening(self) -> None:
        self._admit = self._serve = None

    def delay(self, link: Link, item: bytes | _Closed) -> float:
        jitter = BASE_JITTER + link.jitter
        delay = BASE_LATENCY + link.latency + self.rng.uniform(0.0, jitter)
        if link.bandwidth and isinstance(item, bytes):
            delay += len(item) / link.bandwidth
        return delay

    def connector(self, node: str) -> Callable[[str, Mapping[str, str]], Awaitable[SimEndpoint]]:
        link = self.link(node)

        async def connect(url: str, headers: Mapping[str, str]) -> SimEndpoint:
            log = self.taps.get(node)
            wire = log.connect(_now()) if log is not None else None
            deadline = asyncio.get_running_loop().time() + OPEN_TIMEOUT
            while link.paused or link.held["up"] or link.held["down"] or link.blackhole:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    if wire is not None:
                        wire.end("closed", _now())
                    raise TimeoutError(f"{node}: connecting timed out behind a partition")
                try:
                    await asyncio.wait_for(link.changed.wait(), remaining)
                except TimeoutError:
                    continue
            await asyncio.sleep(self.delay(link, b"") * 2)  # the TCP and HTTP round trips
            if self._admit is None or self._serve is None:
                if wire is not None:
                    wire.unreachable(_now())
                    wire.end("closed", _now())
                raise ConnectionRefusedError(f"{node}: nothing listening at {url}")
            path = "/" + url.split("://", 1)[-1].partition("/")[2]
            if wire is not None:
                wire.upgrade(path, _now())
            refusal = self._admit(path, headers)
            if refusal is not None:
                if wire is not None:
                    wire.response(refusal[0], _now())
                    wire.end("closed", _now())
                raise UpgradeRefused(*refusal)
            if wire is not None:
                wire.response(101, _now())
            node_end = SimEndpoint(self, link, "node")
            node_end.wire = wire
            hub_end = SimEndpoint(self, link, "hub")
            node_end.peer, hub_end.peer = hub_end, node_end
            node_end.out = _Pipe(self, link, "up", hub_end)
            hub_end.out = _Pipe(self, link, "down", node_end)
            link.endpoints.update(dict.fromkeys((node_end, hub_end)))
            link.pipes.update(dict.fromkeys((node_end.out, hub_end.out)))
            serve = self._serve
            task = asyncio.ensure_future(serve(hub_end, path, headers))
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)
            return node_end

        return connect

    # --- faults ----------------------------------------------------------------

    def forget(self, endpoint: SimEndpoint) -> None:
        endpoint.link.endpoints.pop(endpoint, None)

    def abort(self, endpoint: SimEndpoint) -> None:
        """Both ends see the connection drop without a close frame."""
        for end in (endpoint, endpoint.peer):
            if end is None or end.aborted:
                continue
            if end.closed is None:
                end.closed = _Closed(None, "connection reset")
                end.inbox.put_nowait(end.closed)
            end.aborted = True
            if end.wire is not None:
                end.wire.end("reset", _now())
            self.forget(end)

    def reset(self, node: str) -> int:
        link = self.link(node)
        ends = [e for e in list(link.endpoints) if e.side == "node"]
        for end in ends:
            self.abort(end)
        return len(ends)

    def abort_all(self) -> None:
        for link in self.links.values():
            for end in list(link.endpoints):
                self.abort(end)

    def set_held(self, node: str, direction: str, held: bool) -> None:
        link = self.link(node)
        directions = ("up", "down") if direction == "both" else (direction,)
        for d in directions:
            link.held[d] = held
        if not held:
            self._flush(link)
        link.notify()

    def set_paused(self, node: str, paused: bool) -> None:
        link = self.link(node)
        link.paused = paused
        if not paused:
            self._flush(link)
        link.notify()

    def _flush(self, link: Link) -> None:
        for pipe in list(link.pipes):
            pipe.flush()
            if not pipe.held and pipe.target.closed is not None:
                link.pipes.pop(pipe, None)

    def inject_close(self, node: str, code: int, reason: str, toward: str) -> None:
        """A close frame reaches one side of the node's connections as if the
        other side had sent it; the other side sees the connection drop."""
        side = "node" if toward == "agent" else "hub"
        for end in list(self.link(node).endpoints):
            if end.side == side:
                end.deliver(_Closed(code, reason))
                if end.peer is not None:
                    self.abort(end.peer)

    def clear_faults(self, node: str) -> None:
        link = self.link(node)
        link.latency = link.jitter = 0.0
        link.blackhole = False
        link.rules.clear()
        link.limit_bytes = None
        link.bandwidth = None
        link.notify()

    def describe(self, node: str) -> dict[str, Any]:
        link = self.link(node)
        return {"held": dict(link.held), "paused": link.paused, "rules": len(link.rules)}
