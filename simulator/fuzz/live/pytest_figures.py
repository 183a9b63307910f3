"""A pytest plugin that prints how many examples each live fuzz target ran.

A test records its run with `record_property("tetherbed_fuzz", result.to_json())`;
the property travels with the test's report (also from pytest-xdist workers), and
the terminal summary lists every target's examples, time and failures, so that the
bounded profile inside `make test` shows what it did without `-s`.
"""

from __future__ import annotations

from typing import Any

import pytest

PROPERTY = "tetherbed_fuzz"

_runs: list[dict[str, Any]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == PROPERTY and isinstance(value, dict):
            _runs.append({**value, "test": report.nodeid})


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _runs:
        return
    terminalreporter.section("tetherbed live fuzzing")
    for run in sorted(_runs, key=lambda r: r["test"]):
        failures = len(run.get("failures", []))
        terminalreporter.write_line(
            f"fuzz {run['target']}: {run['examples']} examples in {run['seconds']:.1f} s, "
            f"{failures} failure{'s' if failures != 1 else ''} (seed {run['seed']}) "
            f"[{run['test'].rsplit('::', 1)[-1]}]"
        )
