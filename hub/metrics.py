"""The hub's Prometheus metrics: counted by the driver, turned into metrics at scrape time.

The core stays sans-I/O and knows nothing of metrics. The driver counts what
it sees — frames it reads, frames and bytes it writes, the `Close` actions and
journal events (`Record`) it carries out, upgrades it refuses, slow consumers
it cuts off — in plain integers, and gauges (sessions, requests in flight or
queued) are read off the core's state. A prometheus-client `Collector` turns
all of it into metric families only when `/metrics` is scraped, so the relay
path pays a few integer additions per frame: no lock, no label lookup, no
object per connection.

The relay-latency histogram times each relayed frame from the moment the hub
read it to the moment it handed the frame to the receiving peer's socket:
in the read loop when the frame goes straight out (the common case), or in
the peer's outbox when it had to wait behind others (backpressure).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from tetherbed.hub.core import HubCore

PREFIX = "tetherbed_hub"
#: What `/metrics` answers with (the classic text format every scraper reads).
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
#: Upper bounds of the relay-latency buckets, in seconds (+Inf is implied).
LATENCY_BOUNDS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)
#: Kinds of connection the hub serves (the `kind` label).
CONNECTION_KINDS = ("agent", "agent-control", "client", "machine-client")
#: Which side of the relay a frame came from or went to (the `peer` label).
PEERS = ("agent", "client")
#: Journal events that have a metric of their own; every event is also in
#: `tetherbed_hub_events_total{event}`.
DEADLINE_EVENTS = {"request_timeout": "request", "pong_timeout": "pong", "hold_expired": "hold"}


class LatencyHistogram:
    """Bucket counts of one histogram (not cumulative; the collector sums them)."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BOUNDS) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(LATENCY_BOUNDS, seconds)] += 1
        self.total += seconds


class FrameCount:
    """Frames and bytes that crossed between the hub and one kind of peer."""

    __slots__ = ("bytes", "frames")

    def __init__(self) -> None:
        self.frames = 0
        self.bytes = 0


class HubMetrics:
    """Every count the driver keeps, and the registry `/metrics` renders."""

    def __init__(self, core: HubCore) -> None:
        self.core = core
        #: Frames read from agents / clients (by the peer they came from).
        self.received = {peer: FrameCount() for peer in PEERS}
        #: Frames handed to agents' / clients' outboxes (by the peer they go to).
        self.sent = {peer: FrameCount() for peer in PEERS}
        self.relay_latency = LatencyHistogram()
        #: Live connections, and connections ever accepted, by kind.
        self.connections: Counter[str] = Counter()
        self.accepted: Counter[str] = Counter()
        #: Upgrades refused before any WebSocket existed, by (status, error code).
        self.refused_upgrades: Counter[tuple[int, str]] = Counter()
        #: Connections the hub closed (its Close actions), by close code.
        self.closes: Counter[int] = Counter()
        #: Journal events (the core's `Record` actions), by name.
        self.events: Counter[str] = Counter()
        #: Handshakes refused, by the close code the newcomer got.
        self.refusals: Counter[int] = Counter()
        self.slow_consumers = 0
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_HubCollector(self))
        ProcessCollector(namespace=PREFIX, registry=self.registry)

    # --- hooks for the driver ------------------------------------------------------

    def journal(self, observer: Callable[..., None] | None) -> Callable[..., None]:
        """An observer for `ActionRunner` that counts every journal event, then
        hands it on to `observer` (the hub's event log), if any."""
        events = self.events
        refusals = self.refusals

        def record(event: str, **fields: Any) -> None:
            events[event] += 1
            if event == "refused":
                code = fields.get("code")
                if isinstance(code, int):
                    refusals[code] += 1
            elif event == "takeover_rejected":
                refusals[4427] += 1
            if observer is not None:
                observer(event, **fields)

        return record

    def closed(self, code: int) -> None:
        """The driver carried out a `Close` with this code."""
        self.closes[code] += 1

    def opened(self, kind: str) -> None:
        self.connections[kind] += 1
        self.accepted[kind] += 1

    def ended(self, kind: str) -> None:
        self.connections[kind] -= 1

    def refused_upgrade(self, status: int, code: str) -> None:
        self.refused_upgrades[status, code] += 1

    def slow_consumer(self) -> None:
        self.slow_consumers += 1

    # --- scraping ------------------------------------------------------------------

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _HubCollector(Collector):
    """Builds the metric families from `HubMetrics` and the core, per scrape."""

    def __init__(self, metrics: HubMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        m = self.metrics
        core = m.core
        yield _gauge("agents", "Agent connections the core knows (any state)", len(core.agents))
        connections = GaugeMetricFamily(
            f"{PREFIX}_connections", "Open WebSocket connections, by kind", labels=["kind"]
        )
        accepted = CounterMetricFamily(
            f"{PREFIX}_connections_accepted",
            "WebSocket upgrades accepted, by kind",
            labels=["kind"],
        )
        for kind in CONNECTION_KINDS:
            connections.add_metric([kind], m.connections[kind])
            accepted.add_metric([kind], m.accepted[kind])
        yield connections
        yield accepted

        sessions = list(core.sessions.values())
        owned = sum(1 for target in sessions if target.owner is not None)
        yield _gauge("sessions", "Sessions the hub knows since it started", len(sessions))
        yield _gauge("sessions_owned", "Sessions an agent serves now", owned)
        yield _gauge(
            "machines_present",
            "Machines with a control connection (the presence registry)",
            sum(1 for target in core.machines.values() if target.owner is not None),
        )
        yield _gauge(
            "requests_in_flight",
            "Requests sent to agents and not answered yet",
            sum(len(link.routes) for link in core.agents),
        )
        targets = [*sessions, *core.machines.values()]
        yield _gauge(
            "requests_queued",
            "Requests waiting for a free slot, an agent, or the end of an overload back-off",
            sum(len(target.queue) + len(target.deferred) for target in targets),
        )

        for name, counts, what in (
            ("frames_received", m.received, "read from"),
            ("frames_sent", m.sent, "written to"),
        ):
            frames = CounterMetricFamily(
                f"{PREFIX}_{name}", f"WebSocket messages {what} peers, by peer", labels=["peer"]
            )
            size = CounterMetricFamily(
                f"{PREFIX}_{name.replace('frames', 'bytes')}",
                f"Payload bytes of the WebSocket messages {what} peers, by peer",
                labels=["peer"],
            )
            for peer in PEERS:
                frames.add_metric([peer], counts[peer].frames)
                size.add_metric([peer], counts[peer].bytes)
            yield frames
            yield size

        latency = m.relay_latency
        buckets, running = [], 0
        for bound, count in zip((*LATENCY_BOUNDS, float("inf")), latency.counts, strict=True):
            running += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), running))
        yield HistogramMetricFamily(
            f"{PREFIX}_relay_latency_seconds",
            "Time from reading a relayed frame to handing it to the receiving peer's socket "
            "(outbox waiting included)",
            buckets=buckets,
            sum_value=latency.total,
        )

        yield _counter("takeovers", "Sessions or machines taken over", m.events["takeover"])
        refusals = CounterMetricFamily(
            f"{PREFIX}_refusals",
            "Agent handshakes refused, by the close code the newcomer got",
            labels=["code"],
        )
        for code, count in sorted(m.refusals.items()):
            refusals.add_metric([str(code)], count)
        yield refusals
        closes = CounterMetricFamily(
            f"{PREFIX}_closes", "Connections the hub closed, by close code", labels=["code"]
        )
        for code, count in sorted(m.closes.items()):
            closes.add_metric([str(code)], count)
        yield closes
        upgrades = CounterMetricFamily(
            f"{PREFIX}_upgrade_refusals",
            "Connections refused before the upgrade, by HTTP status and error code",
            labels=["status", "code"],
        )
        for (status, code), count in sorted(m.refused_upgrades.items()):
            upgrades.add_metric([str(status), code], count)
        yield upgrades
        yield _counter(
            "retries", "Requests re-issued after their connection died", m.events["retry"]
        )
        deadlines = CounterMetricFamily(
            f"{PREFIX}_deadline_expiries",
            "Deadlines that ran out: request (AGENT_TIMEOUT), pong, hold (retry window)",
            labels=["deadline"],
        )
        for event, label in DEADLINE_EVENTS.items():
            deadlines.add_metric([label], m.events[event])
        yield deadlines
        yield _counter(
            "slow_consumers",
            "Peers closed as slow consumers (1008 SLOW_CONSUMER)",
            m.slow_consumers,
        )
        events = CounterMetricFamily(
            f"{PREFIX}_events", "Journal events of the hub's core, by name", labels=["event"]
        )
        for event, count in sorted(m.events.items()):
            events.add_metric([event], count)
        yield events


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"{PREFIX}_{name}", documentation, value=value)
