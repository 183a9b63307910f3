"""A scenario that does not apply to the target is reported as such everywhere:
neither a pass nor a failure, with its reason, and never a non-zero exit alone."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from tetherbed.simulator.checkers import Verdict
from tetherbed.simulator.reports.junit import junit_xml
from tetherbed.simulator.reports.results import (
    RunResult,
    counts,
    overall_verdict,
    write_results,
)
from tetherbed.simulator.reports.table import render_table

WHY = "step 4 (serial_open ...): laptop's HELLO does not offer the serial I/O extension"
UNKNOWN = Verdict("serial_io", "unknown", "no evidence: no SERIAL_* request", [])


def test_the_verdict_ranks_between_a_failure_and_a_pass() -> None:
    assert overall_verdict([UNKNOWN], inapplicable=WHY, strict=True) == "not_applicable"
    assert overall_verdict([UNKNOWN], "boom", inapplicable=WHY) == "error"
    assert overall_verdict([], failure="step 3: no", inapplicable=WHY) == "fail"
    broken = Verdict("single_owner", "fail", "two owners", [])
    assert overall_verdict([broken], inapplicable=WHY) == "fail"
    assert overall_verdict([UNKNOWN], strict=True) == "fail"


def runs() -> list[RunResult]:
    return [
        RunResult(
            "serial", "s.yaml", "process", 1, "not_applicable", 3.0, [UNKNOWN], inapplicable=WHY
        ),
        RunResult("other", "o.yaml", "process", 1, "pass", 2.0, []),
    ]


def test_results_json_and_the_summary_carry_it(tmp_path: Path) -> None:
    write_results(tmp_path / "results.json", runs())
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["summary"] == {"runs": 2, "pass": 1, "fail": 0, "error": 0, "not_applicable": 1}
    serial = next(r for r in document["runs"] if r["scenario"] == "serial")
    assert (serial["verdict"], serial["inapplicable"]) == ("not_applicable", WHY)
    assert RunResult.from_dict(serial).inapplicable == WHY
    # Runs that all applied keep the summary they always had.
    assert counts(runs()[1:]) == {"runs": 1, "pass": 1, "fail": 0, "error": 0}


def test_the_table_says_why_and_offers_no_replay_for_it() -> None:
    text = render_table(runs())
    assert "2 run(s): 1 pass, 0 fail, 0 error, 1 not applicable" in text
    assert (
        f"Not applicable to this target (neither a pass nor a failure):\n  serial [process]: {WHY}"
        in text
    )
    assert "To replay" not in text


def test_junit_skips_it_with_the_reason() -> None:
    root = ET.fromstring(junit_xml(runs()))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("skipped") == "1" and suite.get("failures") == "0"
    case = next(c for c in suite.iter("testcase") if c.get("name", "").startswith("serial"))
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("message") == f"not applicable: {WHY}"
    assert case.find("failure") is None and case.find("error") is None
