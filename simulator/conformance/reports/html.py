"""Static HTML: a page per run (every case with its rule, section, frames and verdict)
and one index that opens every run kept in the report folder.

No script, no external file: the pages open from a CI artifact as they are.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from tetherbed.simulator.conformance.comparison import comparison_lines
from tetherbed.simulator.conformance.results import CaseResult, RunResult

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;
text-align:left;vertical-align:top}code,pre,.frames td{font:12px/1.3 ui-monospace,monospace}
pre{white-space:pre-wrap;word-break:break-all;margin:0}
.pass{background:#e6f4e6}.fail{background:#fbdada}.warn{background:#fff3cd}
.info{background:#e1f0fa}.skip{background:#eee}.unknown{background:#f1e4f7}
.error{background:#f7c8c8}section{border-top:1px solid #aaa;margin-top:1em;padding-top:.4em}
.sent{color:#05508a}.received{color:#1b6b1b}.event{color:#6b4b00}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def write_run_page(result: RunResult, path: Path) -> None:
    path.write_text(run_page(result), encoding="utf-8")


def run_page(result: RunResult) -> str:
    rows = "".join(
        f'<tr class="{_e(r.outcome)}"><td><a href="#{_e(r.id)}">{_e(r.id)}</a></td>'
        f"<td>{_e(r.level)}</td><td>{_e(r.label)}</td><td>{_e(r.reason)}</td></tr>"
        for r in result.results
    )
    profile = "".join(
        f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in result.profile.items()
    )
    details = "".join(
        f"<tr><td>{_e(k)}</td><td><code>{_e(v)}</code></td></tr>" for k, v in result.details.items()
    )
    comparison = ""
    if result.comparison is not None:
        comparison = "<h2>Since the previous run</h2><pre>{}</pre>".format(
            _e("\n".join(comparison_lines(result.comparison)))
        )
    sections = "".join(_case_section(r) for r in result.results)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>conformance "
        f"{_e(result.suite)} {_e(result.started)}</title><style>{_STYLE}</style></head><body>"
        f"<p><a href='../index.html'>all runs</a></p>"
        f"<h1>Conformance: {_e(result.suite)}</h1><p>{_e(result.spec)}</p>"
        f"<p><b>{_e(result.summary_line())}</b> — {_e(result.target)}, started "
        f"{_e(result.started)}, {result.duration:.1f} s</p>"
        f"<h2>Target</h2><table>{details}</table>"
        f"<h2>Profile</h2><table><tr><th>ambiguity</th><th>reading</th></tr>{profile}</table>"
        f"{comparison}"
        f"<h2>Cases</h2><table><tr><th>case</th><th>level</th><th>verdict</th><th>reason</th>"
        f"</tr>{rows}</table>{sections}</body></html>\n"
    )


def _case_section(result: CaseResult) -> str:
    frames = "".join(
        f'<tr class="{_e(e.direction)}"><td>{e.t:.3f}</td><td>{_e(e.channel)}</td>'
        f"<td>{_e(e.direction)}</td><td>{_e(e.kind)}</td><td><pre>{_e(e.text)}</pre></td></tr>"
        for e in result.evidence
    )
    dropped = (
        f"<p>{result.evidence_dropped} more entries not kept</p>" if result.evidence_dropped else ""
    )
    readings = ", ".join(f"{k}={v}" for k, v in result.readings.items())
    observations = "".join(f"<li>{_e(o)}</li>" for o in result.observations)
    opened = " open" if result.departed or result.outcome in ("error", "unknown") else ""
    return (
        f'<section id="{_e(result.id)}"><h3 class="{_e(result.outcome)}">{_e(result.id)} — '
        f"{_e(result.label)}</h3>"
        f"<p><b>{_e(result.level)}</b> · {_e(result.section)}</p><p>{_e(result.rule)}</p>"
        + (f"<p>Verdict: {_e(result.reason)}</p>" if result.reason else "")
        + (f"<p>Readings: {_e(readings)}</p>" if readings else "")
        + (f"<ul>{observations}</ul>" if observations else "")
        + f"<details{opened}><summary>{len(result.evidence)} frames and events</summary>"
        f"<table class='frames'><tr><th>t (s)</th><th>channel</th><th>dir</th><th>kind</th>"
        f"<th>frame</th></tr>{frames}</table>{dropped}</details></section>"
    )


def write_index(directory: Path) -> None:
    """index.html listing every run folder under `directory`, newest first."""
    rows = []
    for found in sorted(directory.glob("*/conformance.json"), reverse=True):
        try:
            data = json.loads(found.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        name = found.parent.name
        worst = "fail" if data.get("unexpected_failures") else "pass"
        rows.append(
            f'<tr class="{worst}"><td><a href="{_e(name)}/index.html">{_e(name)}</a></td>'
            f"<td>{_e(data.get('suite'))}</td><td>{_e(data.get('target'))}</td>"
            f"<td>{_e(data.get('summary_line'))}</td>"
            f"<td><a href='{_e(name)}/junit.xml'>junit</a> "
            f"<a href='{_e(name)}/conformance.json'>json</a></td></tr>"
        )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>conformance runs</title>"
        f"<style>{_STYLE}</style></head><body><h1>Conformance runs</h1><table><tr><th>run</th>"
        f"<th>suite</th><th>target</th><th>summary</th><th>files</th></tr>{''.join(rows)}"
        f"</table></body></html>\n"
    )
    (directory / "index.html").write_text(page, encoding="utf-8")
