"""Every request of the run, second by second: counts, failures, latency histograms.

Locust's own CSV history smooths percentiles over a sliding window, which
blurs the steps of `--step` and the phases of a profile. Here every request
event lands in the bucket of its wall-clock second and its name, with a
histogram of its latency (two significant digits). Workers ship what they
gathered with each report to the master; the master (or a lone local runner)
writes `timeline.jsonl` when it quits. The analysis (load/analysis/) cuts
the seconds into stages from `stages.json`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

#: One bucket: [count, failures, sum of ms, {rounded ms: count}]
Bucket = list[Any]
KEY = "tetherbed_timeline"
FILE = "timeline.jsonl"


def rounded_ms(ms: float) -> float:
    """Latency kept to two significant digits (at least 0.01 ms)."""
    if ms < 0.01:
        return 0.01
    return float(f"{ms:.2g}")


class Timeline:
    def __init__(self) -> None:
        #: (second, request_type, name) → bucket
        self.buckets: dict[tuple[int, str, str], Bucket] = {}

    def add(self, second: int, kind: str, name: str, ms: float, failed: bool) -> None:
        key = (second, kind, name)
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = [0, 0, 0.0, {}]
        bucket[0] += 1
        bucket[1] += failed
        bucket[2] += ms
        histogram = bucket[3]
        slot = rounded_ms(ms)
        histogram[slot] = histogram.get(slot, 0) + 1

    def take(self) -> list[list[Any]]:
        """Everything gathered so far, as rows, and forget it (for a report)."""
        rows = [
            [second, kind, name, b[0], b[1], b[2], list(b[3].items())]
            for (second, kind, name), b in self.buckets.items()
        ]
        self.buckets = {}
        return rows

    def merge(self, rows: list[list[Any]]) -> None:
        for second, kind, name, count, failures, total, histogram in rows:
            key = (int(second), str(kind), str(name))
            bucket = self.buckets.get(key)
            if bucket is None:
                bucket = self.buckets[key] = [0, 0, 0.0, {}]
            bucket[0] += count
            bucket[1] += failures
            bucket[2] += total
            mine = bucket[3]
            for slot, n in histogram:
                mine[float(slot)] = mine.get(float(slot), 0) + n

    def write(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as out:
            for (second, kind, name), b in sorted(self.buckets.items()):
                row = {
                    "t": second,
                    "type": kind,
                    "name": name,
                    "count": b[0],
                    "failures": b[1],
                    "ms_sum": round(b[2], 3),
                    "histogram": sorted(b[3].items()),
                }
                out.write(json.dumps(row, separators=(",", ":")) + "\n")


def install(environment: Environment, out_dir: Path | None) -> Timeline:
    """Collect on this process; ship to the master, or write at quit (`out_dir`)."""
    timeline = Timeline()
    events = environment.events
    runner = environment.runner

    def on_request(
        request_type: str,
        name: str,
        response_time: float,
        exception: BaseException | None = None,
        **_: Any,
    ) -> None:
        timeline.add(int(time.time()), request_type, name, response_time, exception is not None)

    if not isinstance(runner, MasterRunner):
        events.request.add_listener(on_request)
    if isinstance(runner, WorkerRunner):

        def on_report(client_id: str, data: dict[str, Any]) -> None:
            data[KEY] = timeline.take()

        events.report_to_master.add_listener(on_report)
        return timeline
    if isinstance(runner, MasterRunner):

        def on_worker_report(client_id: str, data: dict[str, Any]) -> None:
            timeline.merge(data.get(KEY) or [])

        events.worker_report.add_listener(on_worker_report)

    def on_quit(**_: Any) -> None:
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            timeline.write(out_dir / FILE)

    events.quit.add_listener(on_quit)
    return timeline
