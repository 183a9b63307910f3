"""JUnit XML, so CI systems show scenario runs as test cases.

One <testsuite> per backend (a backend run: every scenario that ran on it),
one <testcase> per scenario run (with its seed in the name when there is
one). A failing checker becomes a <failure> whose message lists the failing
checkers' summaries and whose text quotes their evidence; a runner error or
a crashed checker becomes an <error>; a scenario that does not apply to the
target (a third-party part did not negotiate an extension it needs) is
<skipped> with the reason. A checker that had no evidence
(unknown) is a `unknown.<checker>` property of its test case and a line of
its <system-out>; with `--strict` it is a <failure> as well. The replay
command goes to <system-out>, where CI shows it next to the failure.

Built with xml.etree so that escaping is always right; characters XML 1.0
forbids (most C0 controls, which a command's output may hold) are replaced
first, since etree would write them unescaped and break strict parsers.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from itertools import groupby
from pathlib import Path

from tetherbed.simulator.checkers.verdict import Verdict
from tetherbed.simulator.reports.results import RunResult, sort_key

#: Evidence records quoted per failing checker; the rest are counted.
EVIDENCE_LINES = 20
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def clean(text: str) -> str:
    """Text that XML 1.0 can carry: forbidden characters become U+FFFD."""
    return _INVALID_XML.sub("\ufffd", text)


def junit_xml(runs: Sequence[RunResult], name: str = "tetherbed") -> str:
    ordered = sorted(runs, key=lambda r: (r.backend, *sort_key(r)))
    root = ET.Element("testsuites", name=name)
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    for backend, group in groupby(ordered, key=lambda r: r.backend):
        suite_runs = list(group)
        suite = _suite(root, name, backend, suite_runs)
        totals["tests"] += len(suite_runs)
        totals["failures"] += int(suite.get("failures", "0"))
        totals["errors"] += int(suite.get("errors", "0"))
        totals["time"] += sum(max(r.seconds, 0.0) for r in suite_runs)
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", str(totals["errors"]))
    root.set("time", f"{totals['time']:.3f}")
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def write_junit(path: Path | str, runs: Sequence[RunResult], name: str = "tetherbed") -> None:
    Path(path).write_text(junit_xml(runs, name), encoding="utf-8")


def _suite(root: ET.Element, name: str, backend: str, runs: list[RunResult]) -> ET.Element:
    failures = sum(1 for r in runs if r.verdict == "fail")
    errors = sum(1 for r in runs if r.verdict == "error")
    skipped = sum(1 for r in runs if r.verdict == "not_applicable")
    suite = ET.SubElement(
        root,
        "testsuite",
        name=clean(f"{name}.{backend}"),
        tests=str(len(runs)),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        time=f"{sum(max(r.seconds, 0.0) for r in runs):.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="backend", value=clean(backend))
    for run in runs:
        _case(suite, name, run)
    return suite


def _case(suite: ET.Element, name: str, run: RunResult) -> None:
    title = run.scenario if run.seed is None else f"{run.scenario}[seed={run.seed}]"
    case = ET.SubElement(
        suite,
        "testcase",
        name=clean(title),
        classname=clean(f"{name}.{run.backend}"),
        file=clean(run.file),
        time=f"{max(run.seconds, 0.0):.3f}",
    )
    if run.verdict == "error":
        text = run.error_text()
        kind = "CheckerCrash" if not run.error and run.crashed_checkers else "error"
        error = ET.SubElement(case, "error", message=clean(_first_line(text)), type=kind)
        error.text = clean(text)
    elif run.verdict == "fail":
        failed = run.failed_checkers
        causes = ([run.failure] if run.failure else []) + [f"{v.name}: {v.summary}" for v in failed]
        message = "; ".join(causes) or "failed"
        kind = "StepFailure" if run.failure else "CheckerFailure"
        failure = ET.SubElement(case, "failure", message=clean(_first_line(message)), type=kind)
        details = ([run.failure] if run.failure else []) + [_describe(v) for v in failed]
        failure.text = clean("\n\n".join(details) or message)
    elif run.verdict == "not_applicable":
        why = run.inapplicable or "not applicable to this target"
        ET.SubElement(case, "skipped", message=clean(_first_line(f"not applicable: {why}")))
    unknown = run.unknown_checkers
    if unknown:
        properties = ET.SubElement(case, "properties")
        for verdict in unknown:
            ET.SubElement(
                properties, "property", name=f"unknown.{verdict.name}", value=clean(verdict.summary)
            )
    lines = [f"unknown: {v.name}: {v.summary}" for v in unknown]
    if run.not_applicable:
        lines.append(f"not applicable to this target: {run.not_applicable} reference-only step(s)")
    if run.replay:
        lines.append(f"replay: {run.replay}")
    if run.history_path:
        lines.append(f"history: {run.history_path}")
    if lines:
        ET.SubElement(case, "system-out").text = clean("\n".join(lines))


def _describe(verdict: Verdict) -> str:
    lines = [f"{verdict.name}: {verdict.summary}"]
    for entry in verdict.evidence[:EVIDENCE_LINES]:
        value = json.dumps(entry.get("value"), sort_keys=True, ensure_ascii=False)
        lines.append(
            f"  #{entry.get('index')} t={entry.get('time')} {entry.get('process')} "
            f"{entry.get('type')} {entry.get('f')} {value} — {entry.get('role', '')}"
        )
    hidden = len(verdict.evidence) - EVIDENCE_LINES
    if hidden > 0:
        lines.append(f"  … {hidden} more evidence record(s) in results.json")
    return "\n".join(lines)


def _first_line(text: str, limit: int = 500) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line if len(line) <= limit else line[: limit - 1] + "…"
