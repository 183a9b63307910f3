"""A plot of throughput and latency over time, as one self-contained SVG.

Two panels on one time axis: answers per second (failures in red) above,
p50 and p99 latency (log scale) below, and a line where each stage began.
No plotting library: the file opens in any browser and diffs as text.
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from tetherbed.load.analysis.timeline import Second, Window, per_second

WIDTH, PANEL, GAP, LEFT, RIGHT, TOP = 960, 220, 50, 70, 20, 44


def write_plot(
    path: Path, rows: list[Second], windows: list[Window], *, title: str, p99_bound_ms: float | None
) -> None:
    path.write_text(render(rows, windows, title=title, p99_bound_ms=p99_bound_ms), encoding="utf-8")


def render(
    rows: list[Second], windows: list[Window], *, title: str, p99_bound_ms: float | None = None
) -> str:
    series = per_second(rows)
    height = TOP + 2 * PANEL + GAP + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{LEFT}" y="18" font-size="14">{escape(title)}</text>',
    ]
    if not series:
        out.append(f'<text x="{LEFT}" y="{TOP + 40}">no requests were recorded</text></svg>')
        return "\n".join(out)
    t0 = min(*(s[0] for s in series), *(w.start for w in windows))
    t1 = max(*(s[0] + 1 for s in series), *(w.end for w in windows))
    span = max(t1 - t0, 1.0)
    inner = WIDTH - LEFT - RIGHT

    def x(t: float) -> float:
        return LEFT + (t - t0) / span * inner

    # --- throughput -------------------------------------------------------------------
    top = TOP
    peak = max(*(s[1] for s in series), 1)
    ceiling = _nice(peak)

    def y_rate(v: float) -> float:
        return top + PANEL - v / ceiling * PANEL

    out += _frame(top, "answers / s")
    for tick in _ticks(ceiling):
        out.append(_hline(y_rate(tick), f"{tick:g}"))
    out.append(_polyline([(x(s[0] + 0.5), y_rate(s[1])) for s in series], "#1f77b4"))
    failed = [(x(s[0] + 0.5), y_rate(s[2])) for s in series]
    if any(s[2] for s in series):
        out.append(_polyline(failed, "#d62728"))
    # --- latency ----------------------------------------------------------------------
    top2 = TOP + PANEL + GAP
    values = [v for s in series for v in (s[3], s[4]) if math.isfinite(v) and v > 0]
    low = 10 ** math.floor(math.log10(min(values))) if values else 0.1
    high = 10 ** math.ceil(math.log10(max(values))) if values else 100.0
    high = max(high, low * 10)

    def y_ms(v: float) -> float:
        v = min(max(v, low), high)
        return (
            top2
            + PANEL
            - (math.log10(v) - math.log10(low)) / (math.log10(high) - math.log10(low)) * PANEL
        )

    out += _frame(top2, "latency, ms (log)")
    decade = low
    while decade <= high:
        out.append(_hline(y_ms(decade), f"{decade:g}"))
        decade *= 10
    for index, color in ((3, "#2ca02c"), (4, "#ff7f0e")):
        points = [(x(s[0] + 0.5), y_ms(s[index])) for s in series if math.isfinite(s[index])]
        out.append(_polyline(points, color))
    if p99_bound_ms is not None and low <= p99_bound_ms <= high:
        y = y_ms(p99_bound_ms)
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#ff7f0e" stroke-dasharray="2,3"/>'
        )
    # --- stages and legend ------------------------------------------------------------
    for window in windows:
        sx = x(window.start)
        out.append(
            f'<line x1="{sx:.1f}" x2="{sx:.1f}" y1="{TOP}" y2="{top2 + PANEL}" '
            'stroke="#999" stroke-dasharray="4,3"/>'
        )
        out.append(
            f'<text x="{sx + 3:.1f}" y="{TOP + 12}" fill="#555">{escape(window.name)}</text>'
        )
    bottom = top2 + PANEL + 16
    out.append(f'<text x="{LEFT}" y="{bottom}">seconds since start: 0 … {span:.0f}</text>')
    legend = [("#1f77b4", "answers/s"), ("#d62728", "failures/s"), ("#2ca02c", "p50")]
    legend.append(
        ("#ff7f0e", "p99" + (f" (bound {p99_bound_ms:g} ms dashed)" if p99_bound_ms else ""))
    )
    lx = LEFT + 260
    for color, label in legend:
        out.append(f'<rect x="{lx}" y="{bottom - 9}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{lx + 14}" y="{bottom}">{escape(label)}</text>')
        lx += 40 + 7 * len(label)
    out.append("</svg>")
    return "\n".join(out)


def _frame(top: float, label: str) -> list[str]:
    return [
        f'<rect x="{LEFT}" y="{top}" width="{WIDTH - LEFT - RIGHT}" height="{PANEL}" '
        'fill="none" stroke="#333"/>',
        f'<text x="{LEFT}" y="{top - 4}">{escape(label)}</text>',
    ]


def _hline(y: float, label: str) -> str:
    return (
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
        f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>'
    )


def _polyline(points: list[tuple[float, float]], color: str) -> str:
    text = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
    return f'<polyline points="{text}" fill="none" stroke="{color}" stroke-width="1.5"/>'


def _nice(value: float) -> float:
    """The smallest 1, 2 or 5 × 10^n at or above `value`."""
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def _ticks(ceiling: float) -> list[float]:
    return [ceiling * i / 4 for i in range(5)]
