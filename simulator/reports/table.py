"""The console table a person reads when the runner finishes.

`scenario | backend | verdict | seconds | seed`, aligned, one row per run in
the same stable order as results.json; then, for every failed or errored run,
what broke and the exact command that replays it — the next thing one wants
to type. Colour only when asked (a TTY without NO_COLOR), so logs stay clean.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TextIO

from tetherbed.simulator.reports.results import RunResult, counts, sort_key

HEADERS = ("scenario", "backend", "verdict", "seconds", "seed")
_COLOURS = {
    "pass": "\x1b[32m",
    "fail": "\x1b[31m",
    "error": "\x1b[35m",
    "not_applicable": "\x1b[33m",
}
_BOLD, _RESET = "\x1b[1m", "\x1b[0m"


def render_table(runs: Sequence[RunResult], *, colour: bool = False) -> str:
    ordered = sorted(runs, key=sort_key)
    rows = [
        (
            run.scenario,
            run.backend,
            run.verdict,
            f"{run.seconds:.2f}",
            "-" if run.seed is None else str(run.seed),
        )
        for run in ordered
    ]
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(HEADERS)]
    right = {3, 4}  # numbers align right

    def line(cells: Sequence[str], paint: str = "") -> str:
        parts = []
        for i, cell in enumerate(cells):
            padded = cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            if i == 2 and paint:
                padded = f"{paint}{padded}{_RESET}"
            parts.append(padded)
        return " | ".join(parts).rstrip()

    header = line(HEADERS)
    out = [f"{_BOLD}{header}{_RESET}" if colour else header]
    out.append("-+-".join("-" * w for w in widths))
    for row in rows:
        out.append(line(row, _COLOURS.get(row[2], "") if colour else ""))
    total = counts(ordered)
    out.append("")
    inapplicable = total.get("not_applicable", 0)
    out.append(
        f"{total['runs']} run(s): {total['pass']} pass, {total['fail']} fail, "
        f"{total['error']} error" + (f", {inapplicable} not applicable" if inapplicable else "")
    )
    undecided = [run for run in ordered if run.unknown_checkers]
    if undecided:
        out.append("")
        out.append("Unknown (no evidence either way; not a pass under --strict):")
        for run in undecided:
            for verdict in run.unknown_checkers:
                out.append(f"  {run.scenario} [{run.backend}] {verdict.name}: {verdict.summary}")
    skipped = sum(run.not_applicable for run in ordered)
    if skipped:
        out.append("")
        out.append(
            f"Not applicable to this target: {skipped} reference-only step(s) "
            f"in {sum(1 for r in ordered if r.not_applicable)} run(s)"
        )
    outside = [run for run in ordered if run.verdict == "not_applicable"]
    if outside:
        out.append("")
        out.append("Not applicable to this target (neither a pass nor a failure):")
        for run in outside:
            out.append(f"  {run.scenario} [{run.backend}]: {_first(run.inapplicable)}")
    broken = [run for run in ordered if run.verdict not in ("pass", "not_applicable")]
    if broken:
        out.append("")
        out.append("To replay:")
        for run in broken:
            seed = "" if run.seed is None else f", seed {run.seed}"
            out.append(f"  {run.scenario} [{run.backend}{seed}] {run.verdict}: {_cause(run)}")
            if run.replay:
                out.append(f"    {run.replay}")
    return "\n".join(out) + "\n"


def print_table(runs: Sequence[RunResult], stream: TextIO | None = None) -> None:
    target = stream or sys.stdout
    target.write(render_table(runs, colour=wants_colour(target)))


def wants_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _first(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else "not applicable"


def _cause(run: RunResult) -> str:
    if run.verdict == "error":
        text = run.error_text().strip().splitlines()
        return text[0] if text else "runner error"
    names = [v.name for v in run.failed_checkers]
    if run.failure:
        step = run.failure.strip().splitlines()[0]
        return "; ".join([step, *names])
    return ", ".join(names) if names else "failed"
