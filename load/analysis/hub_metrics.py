"""The hub's own figures, from its `/metrics`, when the target is Tetherbed's hub.

Scraped before and after the run; the summary shows the differences (frames
and bytes relayed, takeovers, refusals, slow consumers, deadline expiries)
and the relay-latency percentiles of the run's frames, from the histogram's
buckets. They are the hub's word about itself: shown beside what the load
generator and the recorder measured, never instead of it.
"""

from __future__ import annotations

import math
import urllib.error
import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str, timeout: float = 5.0) -> Samples | None:
    """Every sample of the endpoint, or None when it cannot be read."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            text = answer.read().decode("utf-8")
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@dataclass(frozen=True, slots=True)
class HubDelta:
    before: Samples
    after: Samples

    def value(self, name: str, **labels: str) -> float:
        return self.after.get((name, tuple(sorted(labels.items()))), 0.0)

    def delta(self, name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return self.after.get(key, 0.0) - self.before.get(key, 0.0)

    def by_label(self, name: str, label: str) -> dict[str, float]:
        """Increase of every sample of `name`, by the value of its label `label`."""
        found: dict[str, float] = {}
        for (sample, labels), value in self.after.items():
            if sample != name:
                continue
            tag = dict(labels).get(label)
            if tag is None:
                continue
            change = value - self.before.get((sample, labels), 0.0)
            if change:
                found[tag] = change
        return found

    def latency_ms(self, q: float, histogram: str = "relay_latency") -> float:
        """A percentile of the run's relay latency (or outbox wait), from the
        histogram's buckets (the upper bound of the bucket it falls in)."""
        name = f"tetherbed_hub_{histogram}_seconds_bucket"
        buckets = sorted(
            (math.inf if le == "+Inf" else float(le), self.delta(name, le=le))
            for le in {dict(labels).get("le") for (s, labels) in self.after if s == name}
            if le is not None
        )
        total = buckets[-1][1] if buckets else 0.0
        if total <= 0:
            return math.nan
        for bound, count in buckets:
            if count >= q * total:
                return bound * 1000.0
        return math.inf

    def lines(self) -> list[str]:
        """What the hub says about the run, for the summary."""
        sent = {
            p: self.delta("tetherbed_hub_frames_sent_total", peer=p) for p in ("agent", "client")
        }
        sent_bytes = sum(
            self.delta("tetherbed_hub_bytes_sent_total", peer=p) for p in ("agent", "client")
        )
        closes = self.by_label("tetherbed_hub_closes_total", "code")
        refusals = self.by_label("tetherbed_hub_refusals_total", "code")
        deadlines = self.by_label("tetherbed_hub_deadline_expiries_total", "deadline")
        rss = self.value("tetherbed_hub_process_resident_memory_bytes")
        latency = ""
        if math.isfinite(self.latency_ms(0.5)):
            latency = (
                f"; relay latency p50 {self.latency_ms(0.5):g} ms, "
                f"p99 {self.latency_ms(0.99):g} ms (bucket bounds)"
            )
        waited = self.delta("tetherbed_hub_outbox_wait_seconds_count")
        if waited:
            latency += (
                f"; {waited:,.0f} frame(s) waited for a slow peer, p99 "
                f"{self.latency_ms(0.99, 'outbox_wait'):g} ms"
            )
        lines = [
            f"frames sent: {sent['agent']:,.0f} to agents, {sent['client']:,.0f} to clients "
            f"({sent_bytes / 1e6:,.1f} MB){latency}",
            f"takeovers {self.delta('tetherbed_hub_takeovers_total'):,.0f}, "
            f"retries {self.delta('tetherbed_hub_retries_total'):,.0f}, "
            f"slow consumers {self.delta('tetherbed_hub_slow_consumers_total'):,.0f}, "
            f"deadline expiries {_counts(deadlines)}",
            f"refusals by code {_counts(refusals)}, closes by code {_counts(closes)}",
            f"resident memory {rss / 2**20:,.1f} MiB after the run",
        ]
        return lines


def _counts(values: dict[str, float]) -> str:
    if not values:
        return "none"
    return ", ".join(f"{k}: {v:,.0f}" for k, v in sorted(values.items()))
