"""The hub's Prometheus metrics: counted by the driver, turned into metrics at scrape time.

The core stays sans-I/O and knows nothing of metrics. The driver counts what
it sees — frames it reads, frames and bytes it writes, the `Close` actions and
journal events (`Record`) it carries out, upgrades it refuses, slow consumers
it cuts off — in plain integers, and gauges (sessions, requests in flight or
queued) are read off the core's state. A prometheus-client `Collector` turns
all of it into metric families only when `/metrics` is scraped, so the relay
path pays a few integer additions per frame: no lock, no label lookup, no
object per connection.

Two histograms time the relay. `relay_latency` is the hub's own work on a
frame that goes straight out (the common case): from reading it to handing
it to the receiving peer's socket, timed on one frame in `LATENCY_SAMPLE`
(timing every frame would cost the relay path more than all the counting
together). `outbox_wait` is the backpressure: every frame that had to wait
in a backed-up peer's queue, from being queued to being written.
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
#: One frame in this many (a power of two) is timed for `relay_latency`.
LATENCY_SAMPLE = 16
#: Upper bounds of the latency buckets, in seconds (+Inf is implied).
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
    """Frames (and bytes, where counted) between the hub and one kind of peer."""

    __slots__ = ("bytes", "frames")

    def __init__(self) -> None:
        self.frames = 0
        self.bytes = 0


class HubMetrics:
    """Every count the driver keeps, and the registry `/metrics` renders."""

    def __init__(self, core: HubCore) -> None:
        self.core = core
        #: Frames read from agents / clients (by the peer they came from); their
        #: bytes are not counted (the relay path pays for every addition).
        self.received = {peer: FrameCount() for peer in PEERS}
        #: Frames handed to agents' / clients' outboxes (by the peer they go to).
        self.sent = {peer: FrameCount() for peer in PEERS}
        self.relay_latency = LatencyHistogram()
        self.outbox_wait = LatencyHistogram()
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

        received = CounterMetricFamily(
            f"{PREFIX}_frames_received",
            "WebSocket messages read from peers, by peer",
            labels=["peer"],
        )
        sent = CounterMetricFamily(
            f"{PREFIX}_frames_sent",
            "WebSocket messages handed to peers' outboxes (relayed, and the hub's own), by peer",
            labels=["peer"],
        )
        sent_bytes = CounterMetricFamily(
            f"{PREFIX}_bytes_sent",
            "Bytes of the messages handed to peers, by peer",
            labels=["peer"],
        )
        for peer in PEERS:
            received.add_metric([peer], m.received[peer].frames)
            sent.add_metric([peer], m.sent[peer].frames)
            sent_bytes.add_metric([peer], m.sent[peer].bytes)
        yield received
        yield sent
        yield sent_bytes
        yield _histogram(
            "relay_latency_seconds",
            f"Time from reading a frame to handing it straight to the receiving peer's socket "
            f"(one frame in {LATENCY_SAMPLE} is timed)",
            m.relay_latency,
        )
        yield _histogram(
            "outbox_wait_seconds",
            "Time a frame waited in a backed-up peer's queue before it was written (every one)",
            m.outbox_wait,
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


def _histogram(name: str, documentation: str, latency: LatencyHistogram) -> HistogramMetricFamily:
    buckets, running = [], 0
    for bound, count in zip((*LATENCY_BOUNDS, float("inf")), latency.counts, strict=True):
        running += count
        buckets.append(("+Inf" if bound == float("inf") else repr(bound), running))
    return HistogramMetricFamily(
        f"{PREFIX}_{name}", documentation, buckets=buckets, sum_value=latency.total
    )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"{PREFIX}_{name}", documentation, value=value)
