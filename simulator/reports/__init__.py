"""Reports of runs: results.json, JUnit XML, the console table, the HTML timeline.

Every report is a function of its inputs only and sorts what it prints, so
identical runs give byte-identical reports (diffable in CI, cacheable).
"""

from __future__ import annotations

from tetherbed.simulator.reports.junit import junit_xml, write_junit
from tetherbed.simulator.reports.results import (
    RunResult,
    overall_verdict,
    read_results,
    write_results,
)
from tetherbed.simulator.reports.table import print_table, render_table
from tetherbed.simulator.reports.timeline.render import render_timeline, write_timeline

__all__ = [
    "RunResult",
    "junit_xml",
    "overall_verdict",
    "print_table",
    "read_results",
    "render_table",
    "render_timeline",
    "write_junit",
    "write_results",
    "write_timeline",
]
