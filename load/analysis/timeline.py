"""The run second by second (users/timeline.py wrote it), cut into its stages.

Figures for any stretch of the run — requests, failures, rate, percentiles —
are computed from the merged per-second histograms, so a step of `--step`
gets exactly its own requests' p99, not a sliding window's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TIMELINE = "timeline.jsonl"
STAGES = "stages.json"


@dataclass(frozen=True, slots=True)
class Second:
    t: int
    type: str
    name: str
    count: int
    failures: int
    ms_sum: float
    histogram: tuple[tuple[float, int], ...]


@dataclass(frozen=True, slots=True)
class Window:
    """One stage of the run: [start, end) in wall-clock seconds."""

    name: str
    users: int
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Figures:
    requests: int
    failures: int
    seconds: float
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float

    @property
    def rps(self) -> float:
        """Answers per second, failures included."""
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def ok_rps(self) -> float:
        return (self.requests - self.failures) / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "requests": self.requests,
            "failures": self.failures,
            "seconds": round(self.seconds, 3),
            "rps": round(self.rps, 1),
            "mean_ms": _finite(self.mean_ms),
            "p50_ms": _finite(self.p50_ms),
            "p95_ms": _finite(self.p95_ms),
            "p99_ms": _finite(self.p99_ms),
            "max_ms": _finite(self.max_ms),
        }


def _finite(value: float) -> float | None:
    return round(value, 3) if math.isfinite(value) else None


def read_timeline(folder: Path) -> list[Second]:
    path = folder / TIMELINE
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        rows.append(
            Second(
                int(raw["t"]),
                str(raw["type"]),
                str(raw["name"]),
                int(raw["count"]),
                int(raw["failures"]),
                float(raw["ms_sum"]),
                tuple((float(ms), int(n)) for ms, n in raw["histogram"]),
            )
        )
    return rows


def read_stages(folder: Path) -> list[Window]:
    """The stages as the shape ran them; the last one ends when the run did."""
    path = folder / STAGES
    if not path.exists():
        return []
    document = json.loads(path.read_text(encoding="utf-8"))
    stages = document.get("stages") or []
    ended = document.get("ended")
    windows = []
    for index, stage in enumerate(stages):
        start = float(stage["start"])
        if index + 1 < len(stages):
            end = float(stages[index + 1]["start"])
        else:
            end = float(ended) if ended else start + float(stage["seconds"])
        windows.append(Window(str(stage["name"]), int(stage["users"]), start, end))
    return windows


def percentile(histogram: dict[float, int], q: float) -> float:
    total = sum(histogram.values())
    if not total:
        return math.nan
    rank = max(1, math.ceil(q * total))
    seen = 0
    for ms in sorted(histogram):
        seen += histogram[ms]
        if seen >= rank:
            return ms
    return max(histogram)


def select(
    rows: Iterable[Second],
    *,
    types: Iterable[str] | None = None,
    names: Iterable[str] | None = None,
) -> list[Second]:
    wanted_types = set(types) if types is not None else None
    wanted_names = set(names) if names is not None else None
    return [
        r
        for r in rows
        if (wanted_types is None or r.type in wanted_types)
        and (wanted_names is None or r.name in wanted_names)
    ]


def figures(
    rows: Iterable[Second], start: float | None = None, end: float | None = None
) -> Figures:
    """Figures of the whole seconds inside [start, end) (everything when not given)."""
    chosen = [
        r
        for r in rows
        if (start is None or r.t >= math.ceil(start)) and (end is None or r.t + 1 <= end)
    ]
    histogram: dict[float, int] = {}
    for row in chosen:
        for ms, n in row.histogram:
            histogram[ms] = histogram.get(ms, 0) + n
    requests = sum(r.count for r in chosen)
    if start is not None and end is not None:
        seconds = max(math.floor(end) - math.ceil(start), 0)
    elif chosen:
        seconds = max(r.t for r in chosen) - min(r.t for r in chosen) + 1
    else:
        seconds = 0
    return Figures(
        requests=requests,
        failures=sum(r.failures for r in chosen),
        seconds=float(seconds),
        mean_ms=sum(r.ms_sum for r in chosen) / requests if requests else math.nan,
        p50_ms=percentile(histogram, 0.50),
        p95_ms=percentile(histogram, 0.95),
        p99_ms=percentile(histogram, 0.99),
        max_ms=max(histogram) if histogram else math.nan,
    )


def names_of(rows: Iterable[Second], kind: str) -> dict[str, int]:
    """Request counts by name, for one request type."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.type == kind:
            counts[row.name] = counts.get(row.name, 0) + row.count
    return counts


def per_second(rows: Iterable[Second]) -> list[tuple[int, int, int, float, float]]:
    """(second, requests, failures, p50 ms, p99 ms) for every second with a request."""
    by_second: dict[int, list[Second]] = {}
    for row in rows:
        by_second.setdefault(row.t, []).append(row)
    series = []
    for second in sorted(by_second):
        found = figures(by_second[second])
        series.append((second, found.requests, found.failures, found.p50_ms, found.p99_ms))
    return series
