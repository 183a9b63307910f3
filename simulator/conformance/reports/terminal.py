"""The terminal table: one line per case (id, level, verdict, reason), then the summary.

LE-files-read-crlf          MUST    fail     content came back as 'a\\nb\\n'
...
64 pass, 1 fail, 2 warn, 3 info
"""

from __future__ import annotations

from tetherbed.simulator.conformance.comparison import comparison_lines
from tetherbed.simulator.conformance.levels import Outcome
from tetherbed.simulator.conformance.results import CaseResult, RunResult

_COLOURS = {
    Outcome.PASS: "32",
    Outcome.FAIL: "31;1",
    Outcome.WARN: "33",
    Outcome.INFO: "36",
    Outcome.SKIP: "2",
    Outcome.UNKNOWN: "35",
    Outcome.ERROR: "31",
}
REASON_WIDTH = 110


def case_line(result: CaseResult, *, width: int = 34, colour: bool = False) -> str:
    label = result.label
    shown = f"{label:9}"
    if colour:
        shown = f"\x1b[{_COLOURS[result.outcome]}m{shown}\x1b[0m"
    reason = result.reason or (result.observations[0] if result.observations else "")
    if len(reason) > REASON_WIDTH:
        reason = reason[: REASON_WIDTH - 1] + "…"
    return f"{result.id:{width}} {result.level!s:6} {shown} {reason}".rstrip()


def table_lines(result: RunResult, *, colour: bool = False) -> list[str]:
    width = max((len(r.id) for r in result.results), default=10) + 1
    lines = [f"conformance: {result.suite} — {result.target}"]
    lines.append("profile: " + ", ".join(f"{k}={v}" for k, v in result.profile.items()))
    lines.append(f"{'case':{width}} {'level':6} {'verdict':9} reason")
    lines += [case_line(r, width=width, colour=colour) for r in result.results]
    now_passing = result.now_passing()
    if now_passing:
        lines.append(
            "listed in --expect-fail but passing now: " + ", ".join(r.id for r in now_passing)
        )
    if result.comparison is not None:
        lines += comparison_lines(result.comparison)
    lines.append(f"{result.summary_line()} ({result.duration:.1f} s)")
    return lines
