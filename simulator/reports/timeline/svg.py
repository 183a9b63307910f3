"""The timeline's drawing: lanes, shapes and labels as SVG, seconds → pixels.

Every time-positioned element carries its times (`data-t0`, `data-t1`), so the
page's script can re-lay it out when the reader zooms; the positions written
here are the initial layout, and the page is readable without the script.
Labels that would collide (same lane row) or not fit their bar are written
hidden, with the same rule the script applies after a zoom.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from html import escape

from tetherbed.simulator.reports.timeline.model import Lane, Shape, Timeline

ROW_H = 18
LANE_PAD = 8
AXIS_H = 30
PAD_X = 12
#: Room after the last instant for the labels of what happened at the very end.
RIGHT_PAD = 180
NAMES_W = 200
#: Initial plot width: wide enough for dense runs, capped so the file stays usable.
MIN_WIDTH, MAX_WIDTH, PX_PER_RECORD = 1200.0, 16000.0, 3.0
#: Estimated width of one label character at the label font size (px).
CHAR_W = 6.2
#: Minimum spacing between axis ticks (px).
TICK_SPACING = 90.0
#: Owner colours per session, in order.
PALETTE_SIZE = 8


@dataclass(frozen=True, slots=True)
class Geometry:
    start: float
    end: float
    scale: float  # px per second
    lane_top: dict[str, float]
    lane_height: dict[str, float]
    height: float

    @property
    def width(self) -> float:
        return 2 * PAD_X + RIGHT_PAD + (self.end - self.start) * self.scale

    def x(self, t: float) -> float:
        return PAD_X + (t - self.start) * self.scale

    def row_y(self, lane: str, row: int) -> float:
        return self.lane_top[lane] + LANE_PAD / 2 + max(row, 0) * ROW_H


def geometry(timeline: Timeline) -> Geometry:
    duration = max(timeline.end - timeline.start, 1e-6)
    width = min(MAX_WIDTH, max(MIN_WIDTH, PX_PER_RECORD * len(timeline.records)))
    tops: dict[str, float] = {}
    heights: dict[str, float] = {}
    y = float(AXIS_H)
    for lane in timeline.lanes:
        tops[lane.name] = y
        heights[lane.name] = lane.rows * ROW_H + LANE_PAD
        y += heights[lane.name]
    return Geometry(timeline.start, timeline.end, width / duration, tops, heights, y + 4)


def nice_step(seconds: float) -> float:
    """The smallest 1/2/5·10^k step at least `seconds` long."""
    if seconds <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(seconds))
    for factor in (1, 2, 5, 10):
        if factor * power >= seconds:
            return factor * power
    return 10 * power


def num(value: float) -> str:
    """A coordinate or time as text: short and identical across runs."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def attr(value: object) -> str:
    return escape(str(value), quote=True)


def render_names(timeline: Timeline, geo: Geometry) -> str:
    parts = [
        f'<svg id="tb-names" width="{NAMES_W}" height="{num(geo.height)}" '
        'xmlns="http://www.w3.org/2000/svg">'
    ]
    for n, lane in enumerate(timeline.lanes):
        top = geo.lane_top[lane.name]
        band = "lane-a" if n % 2 == 0 else "lane-b"
        parts.append(
            f'<rect class="{band}" x="0" y="{num(top)}" width="{NAMES_W}" '
            f'height="{num(geo.lane_height[lane.name])}"/>'
        )
        parts.append(
            f'<text class="lane-name" x="6" y="{num(top + LANE_PAD / 2 + 13)}">'
            f"{escape(lane.name)}</text>"
        )
        for row, title in enumerate(lane.row_titles):
            if row == 0 or not title:
                continue
            parts.append(
                f'<text class="row-name" x="16" y="{num(geo.row_y(lane.name, row) + 13)}">'
                f"{escape(_clip(title, 30))}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)


def render_plot(timeline: Timeline, geo: Geometry) -> str:
    width = geo.width
    parts = [
        f'<svg id="tb-plot" width="{num(width)}" height="{num(geo.height)}" '
        f'data-start="{num(geo.start)}" data-end="{num(geo.end)}" '
        f'data-scale="{geo.scale!r}" data-pad="{PAD_X}" data-char="{CHAR_W}" '
        f'data-tick="{TICK_SPACING}" data-axis="{AXIS_H}" data-right="{RIGHT_PAD}" '
        'xmlns="http://www.w3.org/2000/svg">',
        _defs(),
    ]
    parts += _bands(timeline.lanes, geo, width)
    parts.append(_axis(geo))
    parts += _shades(timeline, geo)
    order = {"hatch": 0, "density": 1, "bar": 2, "thin": 3, "tick": 4, "arrow": 5, "mark": 6}
    shapes = sorted(
        timeline.shapes,
        key=lambda s: (order.get(s.kind, 9), s.lane, s.row, s.start, s.end, s.records),
    )
    flagged = set(timeline.flagged)
    for shape in shapes:
        parts.append(_shape(shape, geo, flagged))
    parts += _pins(timeline, geo)
    parts += _labels(shapes, geo, flagged)
    parts.append("</svg>")
    return "".join(parts)


def _defs() -> str:
    return (
        "<defs>"
        '<pattern id="tb-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="2" height="6" class="hatch-line"/></pattern>'
        '<pattern id="tb-missing" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(-45)"><rect width="3" height="6" class="missing-line"/>'
        "</pattern>"
        '<marker id="tb-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z"/></marker>'
        "</defs>"
    )


def _bands(lanes: list[Lane], geo: Geometry, width: float) -> list[str]:
    parts = []
    for n, lane in enumerate(lanes):
        band = "lane-a" if n % 2 == 0 else "lane-b"
        parts.append(
            f'<rect class="{band} band" x="0" y="{num(geo.lane_top[lane.name])}" '
            f'width="{num(width)}" height="{num(geo.lane_height[lane.name])}"/>'
        )
    return parts


def _axis(geo: Geometry) -> str:
    step = nice_step(TICK_SPACING / geo.scale)
    parts = ['<g id="tb-axis">']
    first = math.ceil(geo.start / step)
    last = math.floor(geo.end / step)
    for n in range(first, last + 1):
        t = n * step
        x = num(geo.x(t))
        parts.append(
            f'<line class="grid" x1="{x}" x2="{x}" y1="{AXIS_H - 6}" y2="{num(geo.height)}"/>'
            f'<text class="tick-label" x="{x}" y="{AXIS_H - 10}">{num(t)} s</text>'
        )
    parts.append("</g>")
    return "".join(parts)


def _records_attr(records: tuple[int, ...]) -> str:
    return " ".join(str(r) for r in sorted(set(records)))


def _common(shape: Shape, flagged: set[int]) -> tuple[str, str]:
    """The class list and the data attributes every drawn shape carries."""
    css = shape.css
    if shape.palette >= 0:
        css += f" p{shape.palette % PALETTE_SIZE}"
    if flagged.intersection(shape.records):
        css += " flagged"
    data = f'data-t0="{num(shape.start)}" data-t1="{num(shape.end)}"'
    if shape.records:
        data += f' data-r="{_records_attr(shape.records)}"'
    if shape.tip:
        data += f' data-tip="{attr(shape.tip)}"'
    return css, data


def _shape(shape: Shape, geo: Geometry, flagged: set[int]) -> str:
    css, data = _common(shape, flagged)
    x = geo.x(shape.start)
    top = geo.row_y(shape.lane, shape.row)
    if shape.kind == "hatch":
        y, h = geo.lane_top[shape.lane], geo.lane_height[shape.lane]
        return _rect(shape, geo, flagged, y=y, h=h, minw=1.0)
    if shape.kind == "density":
        h = max(2.0, (ROW_H - 4) * shape.weight)
        return _rect(shape, geo, flagged, y=top + ROW_H - 2 - h, h=h, minw=1.0)
    if shape.kind == "bar":
        return _rect(shape, geo, flagged, y=top + 2, h=ROW_H - 4, minw=2.0)
    if shape.kind == "thin":
        return _rect(shape, geo, flagged, y=top + ROW_H / 2 - 2, h=4, minw=1.0)
    if shape.kind == "tick":
        return _rect(shape, geo, flagged, y=top + 1, h=ROW_H - 2, minw=1.5)
    if shape.kind == "arrow":
        dy = (shape.to_row - shape.row) * ROW_H
        y0 = top + ROW_H / 2
        return (
            f'<g class="{css}" {data} data-y="{num(y0)}" transform="translate({num(x)},{num(y0)})">'
            f'<line x1="0" y1="0" x2="0" y2="{num(dy)}" marker-end="url(#tb-arrow)"/></g>'
        )
    y = top + ROW_H / 2
    return (
        f'<g class="mark {css}" {data} data-y="{num(y)}" '
        f'transform="translate({num(x)},{num(y)})">'
        f'<circle r="7" class="hit"/><text class="glyph" y="4">{escape(shape.glyph or "•")}</text>'
        "</g>"
    )


def _rect(
    shape: Shape, geo: Geometry, flagged: set[int], *, y: float, h: float, minw: float
) -> str:
    css, data = _common(shape, flagged)
    x = geo.x(shape.start)
    w = max(minw, (shape.end - shape.start) * geo.scale)
    return (
        f'<rect class="{css}" {data} data-minw="{num(minw)}" x="{num(x)}" y="{num(y)}" '
        f'width="{num(w)}" height="{num(h)}"/>'
    )


def _shades(timeline: Timeline, geo: Geometry) -> list[str]:
    parts = []
    names = [lane.name for lane in timeline.lanes]
    for shade in sorted(timeline.shades, key=lambda s: (s.start, s.end, s.records)):
        lanes = [lane for lane in names if not shade.lanes or lane in shade.lanes]
        data = (
            f'data-t0="{num(shade.start)}" data-t1="{num(shade.end)}" '
            f'data-r="{_records_attr(shade.records)}" data-tip="{attr("fault " + shade.label)}"'
        )
        for lane in lanes:
            w = max(1.0, (shade.end - shade.start) * geo.scale)
            parts.append(
                f'<rect class="shade" {data} data-minw="1" x="{num(geo.x(shade.start))}" '
                f'y="{num(geo.lane_top[lane])}" width="{num(w)}" '
                f'height="{num(geo.lane_height[lane])}"/>'
            )
    return parts


def _pins(timeline: Timeline, geo: Geometry) -> list[str]:
    """A red pin per blamed record, so no evidence can hide inside a density strip."""
    row_of: dict[int, int] = {}
    for shape in timeline.shapes:
        for index in shape.records:
            row_of.setdefault(index, max(shape.row, 0))
    parts = []
    labels: dict[str, list[_Label]] = defaultdict(list)
    for index in sorted(timeline.flagged):
        record = timeline.records.get(index)
        if record is None or record.process not in geo.lane_top:
            continue
        checkers = ", ".join(timeline.flagged[index])
        t = float(record.time) if isinstance(record.time, int | float) else 0.0
        y = geo.row_y(record.process, row_of.get(index, 0))
        parts.append(
            f'<g class="pin" data-t0="{num(t)}" data-t1="{num(t)}" data-r="{index}" '
            f'data-tip="{attr("blamed by " + checkers)}" data-y="{num(y)}" '
            f'transform="translate({num(geo.x(t))},{num(y)})">'
            f'<line x1="0" x2="0" y1="-1" y2="{ROW_H + 1}"/>'
            f'<path d="M-4,-5L4,-5L0,1z"/></g>'
        )
        labels[f"{record.process}/pin"].append(_Label(t, t, checkers, y - 2, "pt", "lbl pin-lbl"))
    for k in sorted(labels):
        parts += _label_row(k, labels[k], geo)
    return parts


@dataclass(frozen=True, slots=True)
class _Label:
    start: float
    end: float
    text: str
    y: float
    kind: str  # "pt": after a point; "bar": inside a bar
    css: str
    #: Always shown; moved right past the kept label before it if they would overlap.
    keep: bool = False
    #: The history index it comes from: labels at one time keep the history's order.
    order: int = 0


def _labels(shapes: list[Shape], geo: Geometry, flagged: set[int]) -> list[str]:
    """Labels, hidden where they would not fit: same rule as the page's script."""
    rows: dict[str, list[_Label]] = defaultdict(list)
    for shape in shapes:
        if not shape.label or shape.kind not in ("bar", "thin", "mark"):
            continue
        css = "lbl" + (" bad" if flagged.intersection(shape.records) else "")
        kind = "pt" if shape.kind == "mark" else "bar"
        y = geo.row_y(shape.lane, shape.row) + 13
        text = _clip(shape.label, 48)
        order = min(shape.records, default=0)
        label = _Label(shape.start, shape.end, text, y, kind, css, keep=shape.keep, order=order)
        rows[f"{shape.lane}/{shape.row}"].append(label)
    parts = []
    for k in sorted(rows):
        parts += _label_row(k, rows[k], geo)
    return parts


def _label_row(k: str, labels: list[_Label], geo: Geometry) -> list[str]:
    """Kept labels first, left to right, each moved right past the one before if
    need be; then the others, greedy, each shown when it fits and clears both the
    label before it and every kept one. The page's script applies the same rule."""
    ordered = sorted(labels, key=lambda lb: (lb.start, lb.end, lb.order, lb.text))
    placed: dict[int, tuple[float, bool]] = {}
    taken: list[tuple[float, float]] = []
    last_end = -math.inf
    for i, label in enumerate(ordered):
        if label.keep:
            x = max(geo.x(label.start) + (9 if label.kind == "pt" else 3), last_end + 4)
            last_end = x + len(label.text) * CHAR_W
            placed[i] = (x, True)
            taken.append((x, last_end))
    last_end = -math.inf
    for i, label in enumerate(ordered):
        if label.keep:
            continue
        width = len(label.text) * CHAR_W
        x = geo.x(label.start) + (9 if label.kind == "pt" else 3)
        visible = x >= last_end + 4 and all(x + width + 4 <= a or x >= b + 4 for a, b in taken)
        if label.kind == "bar":
            visible = visible and (label.end - label.start) * geo.scale >= width + 6
        if visible:
            last_end = x + width
        placed[i] = (x, visible)
    parts = []
    for i, label in enumerate(ordered):
        x, visible = placed[i]
        css = label.css + ("" if visible else " hid")
        keep = ' data-keep="1"' if label.keep else ""
        parts.append(
            f'<text class="{css}" data-k="{attr(k)}" data-kind="{label.kind}"{keep} '
            f'data-o="{label.order}" '
            f'data-t0="{num(label.start)}" data-t1="{num(label.end)}" data-y="{num(label.y)}" '
            f'transform="translate({num(x)},{num(label.y)})">{escape(label.text)}</text>'
        )
    return parts


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
