"""timeline.html: one self-contained page that shows a run at a glance.

A lane per process (hub, agents, clients, faults, runner) on one time axis:
agent connections and backoff delays, who owned each session when, takeovers,
client requests coloured by outcome, faults shaded over the lanes they hit,
pauses and kills — and every record a failing checker blamed, pinned in red
with the checker's name. Hover shows the records; the header lists the
checkers and their evidence, and clicking evidence finds it on the axis.

No network and no libraries: inline CSS, SVG and a small script, so the file
can be attached to a CI run or mailed. Same history and verdicts, same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path

from tetherbed.simulator.checkers.evidence.records import record_dict
from tetherbed.simulator.checkers.verdict import Verdict
from tetherbed.simulator.history import History
from tetherbed.simulator.reports.timeline.assets import CSS, JS
from tetherbed.simulator.reports.timeline.model import Timeline, build_timeline
from tetherbed.simulator.reports.timeline.svg import geometry, render_names, render_plot

#: Evidence rows listed per failing checker in the header.
EVIDENCE_ROWS = 200

_LEGEND = (
    ("conn handshake", "bar", "connecting"),
    ("conn up", "bar", "agent connected"),
    ("conn failed", "bar", "attempt that never connected"),
    ("backoff", "thin", "backoff delay"),
    ("exec", "tick", "agent executes a request"),
    ("owner p0", "bar", "session owner (colour per session)"),
    ("takeover", "glyph:⇄", "takeover"),
    ("takeover silent", "glyph:⇄", "silent takeover (last-write-wins)"),
    ("op ok", "bar", "request ok"),
    ("op fail", "bar", "request failed (did not happen)"),
    ("op info", "bar", "outcome unknown"),
    ("op missing", "bar", "no answer by the end"),
    ("shade", "bar", "fault active"),
    ("fault-at", "glyph:✦", "instant fault (reset, injected close)"),
    ("hub-down", "bar", "hub down (killed or exited)"),
    ("paused", "bar", "process paused"),
    ("flagged op ok", "bar", "blamed by a checker"),
)


def render_timeline(
    history: History,
    verdicts: Sequence[Verdict],
    title: str,
    *,
    scenario: str | None = None,
    backend: str | None = None,
    seed: int | None = None,
    verdict: str | None = None,
) -> str:
    """The page as a string (write_timeline writes it)."""
    timeline = build_timeline(history, list(verdicts))
    geo = geometry(timeline)
    checks = sorted(verdicts, key=lambda v: v.name)
    outcome = verdict or ("pass" if all(v.ok for v in checks) else "fail")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        "<header>",
        f'<h1>{escape(title)} <span class="badge {escape(outcome)}">{escape(outcome)}</span></h1>',
        _meta(timeline, scenario, backend, seed),
        _checkers(checks),
        _evidence(checks),
        "</header>",
        '<div class="controls"><button data-zoom="0.5" title="zoom out">−</button>'
        '<button data-zoom="2" title="zoom in">+</button>'
        '<button data-zoom="fit">fit</button><button data-zoom="reset">reset</button> '
        "hover a shape for its records · click an evidence row to find it · "
        "ctrl + wheel zooms</div>",
        '<div id="tb-scroll">',
        render_names(timeline, geo),
        render_plot(timeline, geo),
        "</div>",
        _legend(),
        '<div id="tb-tip" hidden></div>',
        f'<script type="application/json" id="tb-records">{_records_json(timeline)}</script>',
        f"<script>{JS}</script>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_timeline(
    path: Path | str,
    history: History,
    verdicts: Sequence[Verdict],
    title: str,
    *,
    scenario: str | None = None,
    backend: str | None = None,
    seed: int | None = None,
    verdict: str | None = None,
) -> None:
    page = render_timeline(
        history,
        verdicts,
        title,
        scenario=scenario,
        backend=backend,
        seed=seed,
        verdict=verdict,
    )
    Path(path).write_text(page, encoding="utf-8")


def _meta(timeline: Timeline, scenario: str | None, backend: str | None, seed: int | None) -> str:
    items = []
    for label, value in (("scenario", scenario), ("backend", backend), ("seed", seed)):
        if value is not None:
            items.append(f"{label} <b>{escape(str(value))}</b>")
    items.append(f"{len(timeline.records)} records")
    items.append(f"{timeline.start:g}–{timeline.end:.3f} s")
    items.append(f"{len(timeline.lanes)} lanes")
    return f'<p class="meta">{" · ".join(items)}</p>'


def _checkers(checks: list[Verdict]) -> str:
    if not checks:
        return '<p class="meta">no checkers ran</p>'
    rows = []
    marks = {
        "pass": ("✔ pass", "ok"),
        "fail": ("✘ FAIL", "bad"),
        "unknown": ("? unknown", "unknown"),
        "error": ("✘ ERROR", "bad"),
    }
    for check in checks:
        mark, css = marks.get(check.status, ("✘ FAIL", "bad"))
        rows.append(
            f'<tr><td class="{css}">{mark}</td><td><b>{escape(check.name)}</b></td>'
            f"<td>{escape(check.summary)}</td></tr>"
        )
    return f'<table class="checkers">{"".join(rows)}</table>'


def _evidence(checks: list[Verdict]) -> str:
    """Failing checkers' evidence, one block per violation, each record clickable."""
    failing = [c for c in checks if not c.ok and c.evidence]
    if not failing:
        return ""
    total = sum(len(c.evidence) for c in failing)
    parts = [
        f'<details open><summary>Evidence: {total} record(s)</summary><div class="evidence-box">'
    ]
    for check in failing:
        parts.append(f'<h3>{escape(check.name)}</h3><table class="evidence">')
        parts.append("<tr><th>#</th><th>time</th><th>process</th><th>record</th><th>role</th></tr>")
        current: object = None
        for entry in check.evidence[:EVIDENCE_ROWS]:
            if entry.get("violation") != current:
                current = entry.get("violation")
                parts.append(
                    f'<tr class="why"><td colspan="5">{escape(str(entry.get("why", "")))}</td></tr>'
                )
            index = entry.get("index")
            record = f"{entry.get('type')} {entry.get('f')} " + json.dumps(
                entry.get("value"), sort_keys=True, ensure_ascii=False
            )
            goto = f' data-goto="{index}"' if isinstance(index, int) else ""
            parts.append(
                f"<tr{goto}><td>{escape(str(index))}</td><td>{escape(str(entry.get('time')))}"
                f"</td><td>{escape(str(entry.get('process')))}</td>"
                f"<td><code>{escape(_clip(record, 160))}</code></td>"
                f"<td>{escape(str(entry.get('role', '')))}</td></tr>"
            )
        hidden = len(check.evidence) - EVIDENCE_ROWS
        if hidden > 0:
            parts.append(f'<tr><td colspan="5">… {hidden} more in results.json</td></tr>')
        parts.append("</table>")
    parts.append("</div></details>")
    return "".join(parts)


def _legend() -> str:
    items = []
    for css, kind, text in _LEGEND:
        if kind.startswith("glyph:"):
            swatch = (
                f'<svg width="18" height="14"><g class="mark {css}" transform="translate(9,7)">'
                f'<text class="glyph" y="4">{escape(kind[6:])}</text></g></svg>'
            )
        else:
            height, top = {"thin": (4, 5), "tick": (14, 0)}.get(kind, (10, 2))
            width = 2 if kind == "tick" else 28
            swatch = (
                f'<svg width="28" height="14"><rect class="{css}" x="0" y="{top}" '
                f'width="{width}" height="{height}"/></svg>'
            )
        items.append(f"<span>{swatch}{escape(text)}</span>")
    pin = (
        '<svg width="14" height="18"><g class="pin" transform="translate(7,6)">'
        '<line x1="0" x2="0" y1="-1" y2="12"/><path d="M-4,-5L4,-5L0,1z"/></g></svg>'
    )
    items.append(f"<span>{pin}evidence pin (checker name beside it)</span>")
    return f'<section class="legend">{"".join(items)}</section>'


def _records_json(timeline: Timeline) -> str:
    """The records a tooltip can show: those of drawn shapes, shades and pins."""
    shown: set[int] = set(timeline.flagged)
    for shape in timeline.shapes:
        shown.update(shape.records)
    for shade in timeline.shades:
        shown.update(shade.records)
    table = {
        str(index): record_dict(timeline.records[index])
        for index in sorted(shown)
        if index in timeline.records
    }
    text = json.dumps(table, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    # Inside <script>, "</script>" or "<!--" in a value would end the block early.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
