"""`--compare PREVIOUS.json`: what changed since the last run of the same suite.

Each case's outcome now against then: newly failing (or warning), fixed,
changed in some other way (pass → skip, fail → error), added and removed
cases. CI shows it as a block under the table and keeps it in
conformance.json.
"""

from __future__ import annotations

from typing import Any

from tetherbed.simulator.conformance.levels import Outcome
from tetherbed.simulator.conformance.results import RunResult

_BAD = {Outcome.FAIL, Outcome.WARN, Outcome.ERROR}


def compare(current: RunResult, previous: RunResult) -> dict[str, Any]:
    now = {r.id: r.outcome for r in current.results}
    then = {r.id: r.outcome for r in previous.results}
    regressed, fixed, changed = [], [], []
    for case_id in sorted(now.keys() & then.keys()):
        before, after = then[case_id], now[case_id]
        if before == after:
            continue
        entry = {"id": case_id, "before": str(before), "after": str(after)}
        if after in _BAD and before not in _BAD:
            regressed.append(entry)
        elif before in _BAD and after not in _BAD:
            fixed.append(entry)
        else:
            changed.append(entry)
    return {
        "previous_started": previous.started,
        "previous_summary": previous.summary_line(),
        "regressed": regressed,
        "fixed": fixed,
        "changed": changed,
        "added": sorted(now.keys() - then.keys()),
        "removed": sorted(then.keys() - now.keys()),
    }


def comparison_lines(comparison: dict[str, Any]) -> list[str]:
    """The comparison for the terminal, a line per change."""
    lines = [f"compared with the run of {comparison['previous_started']}:"]
    for key, word in (("regressed", "worse"), ("fixed", "better"), ("changed", "changed")):
        for entry in comparison[key]:
            lines.append(f"  {word:8} {entry['id']}: {entry['before']} → {entry['after']}")
    for key, word in (("added", "new"), ("removed", "gone")):
        for case_id in comparison[key]:
            lines.append(f"  {word:8} {case_id}")
    if len(lines) == 1:
        lines.append("  no case changed its outcome")
    return lines
