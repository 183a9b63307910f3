"""The sim backend's in-memory network: WebSocket-like connections in virtual time.

Each node (agent or client) reaches the hub over its own `Link`, which holds
that node's fault state: partitions per direction, the fault proxy's toxics and
message rules, and whether the node is paused (frozen like a sleeping laptop:
it neither sends nor reads).

Messages in one direction of one connection are delivered in order, each after
the network's own small latency; a partitioned direction holds them (TCP keeps
retransmitting) and delivers them when healed. Faults are the fault proxy's own
(`simulator/faults.py` maps a scenario's fault onto them for every backend): a
link's message rules are the proxy's `RuleBook`, and each direction of each
connection runs the proxy's `ToxicChain` over the bytes of every frame as it
would cross TCP (WebSocket header, mask and payload), so latency, bandwidth,
slicer, limit_data and blackhole give a frame the times, or the end, the proxy
would. (The proxy also counts the HTTP upgrade toward limit_data; the sim
starts counting at the first frame.) Each direction is bounded like a TCP
connection: once `window_bytes` are unread (on the wire, held, or waiting in
the receiver's inbox), the sender's `send` waits until the receiver reads, so
a peer that stops reading pushes back on whoever writes to it. Everything
random comes from the network's seeded generator, so a seed fixes every
interleaving.
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
from tetherbed.simulator.proxy.chain import ToxicChain
from tetherbed.simulator.proxy.events import Event, Signal
from tetherbed.simulator.proxy.streams import DOWNSTREAM, UPSTREAM, Stream
from tetherbed.simulator.proxy.toxics import Toxic
from tetherbed.simulator.proxy.ws.rules import ACTIONS, MessageRule, RuleBook
from tetherbed.simulator.virtual_time import owned_by
from tetherbed.simulator.wiretap.log import WireConnection, WireLog
from tetherbed.simulator.wiretap.records import DOWN, UP

#: Base one-way latency of every link, and its jitter (seconds).
BASE_LATENCY = 0.001
BASE_JITTER = 0.0005
#: Exploration: one message in STRAGGLER_ODDS is held back a seeded extra
#: delay of up to STRAGGLER_DELAY seconds (a busy host, a retransmission), so
#: messages on different connections overtake each other from seed to seed.
#: Per connection, messages stay in order.
STRAGGLER_ODDS = 4
STRAGGLER_DELAY = 0.004
#: The longest the network's own latency can be.
MAX_LATENCY = BASE_LATENCY + BASE_JITTER + STRAGGLER_DELAY
#: How long a connect waits behind a partition before it times out.
OPEN_TIMEOUT = 10.0
#: Bytes one direction of a connection holds unread before its sender waits:
#: about what loopback TCP buffers hold on both ends.
WINDOW_BYTES = 4 * 1024 * 1024
#: The network's directions → the proxy's streams (a node is the proxy's client).
STREAM_OF: dict[str, Stream] = {"up": UPSTREAM, "down": DOWNSTREAM}
_NO_REORDER = ACTIONS - {"reorder"}
#: Whose callbacks the hub's connection handlers are (the seeded scheduler's owner).
HUB_OWNER = "hub"
#: Where a connection is accepted: when a `reissue` rule's copies are sent.
_ACCEPTED = "HELLO_ACK"


class _TypeOnly(msgspec.Struct):
    type: str = ""


_type_decoder = msgspec.json.Decoder(_TypeOnly)


def message_type(data: bytes) -> str:
    try:
        return _type_decoder.decode(data).type
    except msgspec.MsgspecError:
        return ""


def frame_length(payload: int, masked: bool) -> int:
    """Bytes of a one-frame WebSocket message on the wire (RFC 6455 §5.2)."""
    header = 2 if payload < 126 else 4 if payload < 65536 else 10
    return header + (4 if masked else 0) + payload


class _WireBytes:
    """Stands for `n` bytes on the wire in the proxy's toxic stages, which only
    measure and slice what they carry: a frame's size crosses the stages
    without copying its payload."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, part: slice) -> _WireBytes:
        return _WireBytes(len(range(*part.indices(self.n))))


@dataclass(eq=False)
class Link:
    """The path between one node and the hub, with that node's faults."""

    name: str
    held: dict[str, bool] = field(default_factory=lambda: {"up": False, "down": False})
    paused: bool = False
    #: The fault proxy's toxics on this link, in the order they were added.
    toxics: list[Toxic] = field(default_factory=list)
    #: The fault proxy's message rules (counts shared by all connections).
    rules: RuleBook = field(default_factory=RuleBook)
    # Ordered (dicts used as sets): iteration order must never depend on
    # object addresses, or a seed would not fix the history.
    endpoints: dict[SimEndpoint, None] = field(default_factory=dict)
    #: Every pipe that may still hold messages (a closed end's pipe may).
    pipes: dict[_Pipe, None] = field(default_factory=dict)
    #: Set whenever the link's gates open (heal, resume); waiters re-check.
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def gate_closed(self, direction: str) -> bool:
        return self.held[direction] or self.paused

    def toxics_for(self, direction: str) -> list[Toxic]:
        stream = STREAM_OF[direction]
        return [toxic for toxic in self.toxics if toxic.stream == stream]

    @property
    def blackholed(self) -> bool:
        """A `timeout` toxic drops the upgrade's bytes too: no connection can open."""
        return any(toxic.type == "timeout" for toxic in self.toxics)

    def handshake_latency(self) -> float:
        """What the latency toxics add to the upgrade's round trip."""
        return sum(
            (toxic.attribute("latency") / 1000 for toxic in self.toxics if toxic.type == "latency"),
            0.0,
        )

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class _Closed:
    """The marker a closed connection leaves in the reader's inbox."""

    def __init__(self, code: int | None, reason: str) -> None:
        self.code = code
        self.reason = reason

    def wire_length(self, masked: bool) -> int:
        payload = 0 if self.code is None else 2 + len(self.reason.encode())
        return frame_length(payload, masked)


class _Abort:
    """A toxic ended the connection (limit_data, a timeout): both ends drop it."""


Item = bytes | _Closed
_Timed = bytes | _Closed | _Abort


class _Pipe:
    """One direction of one connection: toxics, then ordered, delayed, holdable delivery.

    A frame first crosses the proxy's toxic chain for this direction (when the
    link has toxics), which says when its last byte is through, or that it never
    is; then the partition gate, which holds it; then the network's latency.
    """

    def __init__(self, network: SimNetwork, link: Link, direction: str, target: SimEndpoint):
        self.network = network
        self.link = link
        self.direction = direction
        self.target = target
        self.held: list[Item] = []
        self.last_at = 0.0
        #: The message a `reorder` rule holds until the next one has passed.
        self.reorder_slot: bytes | None = None
        self.reorder_timer: asyncio.TimerHandle | None = None
        #: Messages on the wire, in order, with their arrival times. One timer
        #: at a time delivers them: asyncio does not keep timers with equal
        #: times in the order they were set, and a pipe must.
        self.in_flight: collections.deque[tuple[float, Item]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None
        #: The toxic chain, made when the link first has toxics for this direction.
        self.chain: ToxicChain | None = None
        #: What the chain lets out while a frame is being fed to it.
        self._feeding: list[tuple[float, Event]] | None = None
        #: Frames through the toxics, in order, waiting for the time they are through.
        self.toxic_out: collections.deque[tuple[float, _Timed]] = collections.deque()
        self.toxic_timer: asyncio.TimerHandle | None = None
        self.toxic_last = 0.0
        #: Bytes pushed and not yet read by the receiver (the window in use).
        self.unread = 0
        #: Set while the window has room; senders wait on it.
        self.room = asyncio.Event()
        self.room.set()
        #: This direction of the link is its own owner for the seeded scheduler:
        #: deliveries on different links due at one instant come in a seeded order.
        self.context = owned_by(f"{link.name}/{direction}")
        self.sync_toxics()

    @property
    def masked(self) -> bool:
        return self.direction == "up"  # a client masks what it sends

    # --- the window ----------------------------------------------------------------

    async def wait_for_room(self, sender: SimEndpoint) -> None:
        """Until the receiver has read enough (or the connection ended)."""
        while self.unread >= self.network.window_bytes:
            if sender.closed is not None or sender.aborted:
                return
            self.room.clear()
            await self.room.wait()

    def consumed(self, size: int) -> None:
        """The receiver read `size` bytes of what this pipe delivered."""
        self.unread -= size
        if self.unread < self.network.window_bytes:
            self.room.set()

    def release(self) -> None:
        """The connection ended: nobody waits for room any more."""
        self.room.set()

    # --- entering ----------------------------------------------------------------

    def push(self, item: Item, extra: float = 0.0) -> None:
        """Send `item`; a `delay` rule's `extra` seconds let later messages overtake it."""
        if not isinstance(item, _Closed):
            self.unread += len(item)
        if extra:
            asyncio.get_running_loop().call_later(extra, self._enter, item)
            return
        self._enter(item)

    def _enter(self, item: Item) -> None:
        if self.chain is None and not self.toxic_out:
            self._gate(item)
            return
        now = asyncio.get_running_loop().time()
        if self.chain is None:
            self._after_toxics(now, item)
            return
        if isinstance(item, _Closed):
            wire = item.wire_length(self.masked)
        else:
            wire = frame_length(len(item), self.masked)
        through = self._feeding = []
        try:
            self.chain.feed(_WireBytes(wire), now)  # type: ignore[arg-type]
        finally:
            self._feeding = None
        passed = sum(len(piece) for _, piece in through if not isinstance(piece, Signal))
        ends = [when for when, piece in through if isinstance(piece, Signal)]
        if passed == wire:
            self._after_toxics(max(when for when, _ in through), item)
        elif isinstance(item, _Closed) and not ends:
            # The close frame was dropped; the FIN after it still ends the connection.
            self._after_toxics(now, _Abort())
        if ends:
            self._after_toxics(min(ends), _Abort())

    def _from_chain(self, when: float, event: Event) -> None:
        if self._feeding is not None:
            self._feeding.append((when, event))
        elif event is Signal.CLOSE or event is Signal.RESET:
            # A toxic's own timer ended the connection (timeout, reset_peer);
            # stages only ever let data out while they are fed.
            self._after_toxics(when, _Abort())

    def sync_toxics(self) -> None:
        """Follow the link's toxics for this direction (a fault was added or cleared).

        As in the proxy, a change releases what the old toxics were delaying.
        """
        toxics = self.link.toxics_for(self.direction)
        if self.chain is None:
            if not toxics:
                return
            loop = asyncio.get_running_loop()
            self.chain = ToxicChain(
                self._from_chain, rng=self.network.rng, call_at=loop.call_at, clock=loop.time
            )
        if self.chain.sync(toxics) and self.toxic_out:
            now = asyncio.get_running_loop().time()
            waiting = [item for _, item in self.toxic_out]
            self.toxic_out.clear()
            self.toxic_last = now
            if self.toxic_timer is not None:
                self.toxic_timer.cancel()
                self.toxic_timer = None
            for item in waiting:
                self._after_toxics(now, item)

    def _after_toxics(self, at: float, item: _Timed) -> None:
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
            if isinstance(item, _Abort):
                self.toxic_out.clear()
                self.network.abort(self.target)
                break
            self._gate(item)
        self.toxic_timer = (
            loop.call_at(self.toxic_out[0][0], self._toxics_done) if self.toxic_out else None
        )

    # --- the gate and the network's own latency -------------------------------------

    def _gate(self, item: Item) -> None:
        if self.link.gate_closed(self.direction) or self.held:
            self.held.append(item)
            return
        self._schedule(item)

    def flush(self) -> None:
        if self.link.gate_closed(self.direction):
            return
        held, self.held = self.held, []
        for item in held:
            self._schedule(item)

    def _schedule(self, item: Item) -> None:
        loop = asyncio.get_running_loop()
        at = max(loop.time() + self.network.delay(), self.last_at)
        self.last_at = at
        self.in_flight.append((at, item))
        if self.timer is None:
            self.timer = loop.call_at(at, self._arrive, context=self.context)

    def _arrive(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self.in_flight and self.in_flight[0][0] <= now:
            self.target.deliver(self.in_flight.popleft()[1])
        self.timer = (
            loop.call_at(self.in_flight[0][0], self._arrive, context=self.context)
            if self.in_flight
            else None
        )

    # --- reorder -------------------------------------------------------------------

    def hold_for_reorder(self, data: bytes, max_hold_ms: int | None) -> None:
        self.reorder_slot = data
        if max_hold_ms is not None:
            loop = asyncio.get_running_loop()
            self.reorder_timer = loop.call_later(max_hold_ms / 1000, self.release_reordered)

    def release_reordered(self) -> None:
        slot, self.reorder_slot = self.reorder_slot, None
        if self.reorder_timer is not None:
            self.reorder_timer.cancel()
            self.reorder_timer = None
        if slot is not None:
            self.push(slot)


class SimEndpoint:
    """One end of a simulated WebSocket; a `MessageTransport`."""

    def __init__(self, network: SimNetwork, link: Link, side: str) -> None:
        self.network = network
        self.link = link
        self.side = side  # "node" or "hub"
        self.inbox: asyncio.Queue[bytes | _Closed] = asyncio.Queue()
        self.peer: SimEndpoint | None = None
        self.out: _Pipe | None = None
        #: The pipe that delivers to this end (the peer's `out`).
        self.feed: _Pipe | None = None
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
        out = self.out
        assert out is not None
        await out.wait_for_room(self)
        if self.closed is not None:
            raise TransportClosed(self.closed.code, self.closed.reason)
        if self.wire is not None:
            self.wire.message(UP, data, _now())
        rules = self.link.rules
        stream = STREAM_OF[self.direction]
        rule = None
        kind = ""
        if (len(rules) and rules.watches(stream)) or rules.reissues:
            kind = message_type(data)
        if len(rules) and rules.watches(stream):
            allow = ACTIONS if out.reorder_slot is None else _NO_REORDER
            rule = rules.decide(stream, kind, self.network.rng, allow=allow)
        if rule is None:
            out.push(data)
            if kind == _ACCEPTED and self.side == "hub" and rules.reissues:
                for copy in reissued(rules):
                    out.push(copy)
        elif rule.action == "reissue":
            rules.reissues.append(data)
            out.push(data)
        elif rule.action == "drop":
            return
        elif rule.action == "delay":
            out.push(data, rule.delay / 1000)
            return
        elif rule.action == "duplicate":
            for _ in range(1 + rule.copies):
                out.push(data)
        elif rule.action == "reorder":
            out.hold_for_reorder(data, rule.max_hold)
            return
        else:  # close: the message is dropped and a close frame sent
            self.network.inject_close(
                self.link.name,
                rule.code,
                rule.reason,
                "agent" if rule.toward == "client" else "hub",
            )
            return
        if out.reorder_slot is not None:
            out.release_reordered()

    async def recv(self) -> bytes:
        if self.closed is not None and self.inbox.empty():
            raise TransportClosed(self.closed.code, self.closed.reason)
        item = await self.inbox.get()
        if isinstance(item, _Closed):
            self.closed = self.closed or item
            raise TransportClosed(item.code, item.reason)
        if self.feed is not None:
            self.feed.consumed(len(item))
        return item

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.closed is not None:
            return
        if self.wire is not None:
            self.wire.close(UP, code, reason, _now())
        self.closed = _Closed(code, reason)
        if self.out is not None:
            self.out.push(_Closed(code, reason))
            self.out.release()
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
                self.out.release()
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


def reissued(rules: RuleBook) -> list[bytes]:
    """The requests a `reissue` rule saved, each again under a new id."""
    copies: list[bytes] = []
    saved, rules.reissues = rules.reissues, []
    for data in saved:
        try:
            body = msgspec.json.decode(data)
        except msgspec.DecodeError:
            continue
        if isinstance(body, dict):
            body["id"] = f"{body.get('id')}-again"
            copies.append(msgspec.json.encode(body))
    return copies


def _now() -> float:
    return asyncio.get_running_loop().time()


Listener = Callable[[SimEndpoint, str, Mapping[str, str]], Awaitable[None]]
Admit = Callable[[str, Mapping[str, str]], tuple[int, bytes] | None]


class SimNetwork:
    #: The seeded scheduler's owner of the hub's side of every connection.
    hub_owner = HUB_OWNER

    def __init__(
        self, rng: random.Random, *, window_bytes: int = WINDOW_BYTES, stragglers: bool = True
    ) -> None:
        self.rng = rng
        #: Whether some messages take a seeded extra delay (STRAGGLER_DELAY).
        self.stragglers = stragglers
        self.window_bytes = window_bytes
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

    def delay(self) -> float:
        """The network's own one-way latency, with its seeded jitter and stragglers."""
        rng = self.rng
        delay = BASE_LATENCY + rng.uniform(0.0, BASE_JITTER)
        if self.stragglers and rng.randrange(STRAGGLER_ODDS) == 0:
            delay += rng.uniform(0.0, STRAGGLER_DELAY)
        return delay

    def connector(self, node: str) -> Callable[[str, Mapping[str, str]], Awaitable[SimEndpoint]]:
        link = self.link(node)

        async def connect(url: str, headers: Mapping[str, str]) -> SimEndpoint:
            log = self.taps.get(node)
            wire = log.connect(_now()) if log is not None else None
            deadline = asyncio.get_running_loop().time() + OPEN_TIMEOUT
            while link.paused or link.held["up"] or link.held["down"] or link.blackholed:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    if wire is not None:
                        wire.end("closed", _now())
                    raise TimeoutError(f"{node}: connecting timed out behind a partition")
                try:
                    await asyncio.wait_for(link.changed.wait(), remaining)
                except TimeoutError:
                    continue
            # The TCP and HTTP round trips, through the link's latency toxics.
            await asyncio.sleep(self.delay() * 2 + link.handshake_latency())
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
            node_end.out = hub_end.feed = _Pipe(self, link, "up", hub_end)
            hub_end.out = node_end.feed = _Pipe(self, link, "down", node_end)
            link.endpoints.update(dict.fromkeys((node_end, hub_end)))
            link.pipes.update(dict.fromkeys((node_end.out, hub_end.out)))
            serve = self._serve
            task = asyncio.get_running_loop().create_task(
                serve(hub_end, path, headers), context=owned_by(HUB_OWNER)
            )
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
            if end.out is not None:
                end.out.release()
            if end.wire is not None:
                end.wire.end("reset", _now())
            self.forget(end)

    def reset(self, node: str) -> int:
        link = self.link(node)
        ends = [e for e in list(link.endpoints) if e.side == "node"]
        for end in ends:
            self.abort(end)
        return len(ends)

    def add_toxic(self, node: str, toxic: Toxic) -> None:
        """A fault proxy toxic on the node's link; replaces one of the same name."""
        link = self.link(node)
        link.toxics = [t for t in link.toxics if t.name != toxic.name] + [toxic]
        self._toxics_changed(link)

    def add_rule(self, node: str, rule: MessageRule) -> None:
        self.link(node).rules.add(rule)

    def _toxics_changed(self, link: Link) -> None:
        for pipe in list(link.pipes):
            pipe.sync_toxics()
        link.notify()

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
            if not pipe.held and not pipe.toxic_out and pipe.target.closed is not None:
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
        """Every toxic and message rule goes; partitions and pauses stay."""
        link = self.link(node)
        link.rules.clear()
        link.toxics = []
        self._toxics_changed(link)

    def describe(self, node: str) -> dict[str, Any]:
        link = self.link(node)
        return {
            "held": dict(link.held),
            "paused": link.paused,
            "toxics": [toxic.name for toxic in link.toxics],
            "rules": len(link.rules),
        }
