"""Reports, --expect-fail, --compare, profiles and the exit status."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tetherbed.simulator.conformance import registry
from tetherbed.simulator.conformance.cli import exit_status
from tetherbed.simulator.conformance.comparison import compare
from tetherbed.simulator.conformance.evidence import Entry, shorten_text
from tetherbed.simulator.conformance.expectations import ExpectationsError, read_expectations
from tetherbed.simulator.conformance.levels import Level, Outcome
from tetherbed.simulator.conformance.profiles import ProfileError, ambiguities, parse_profile
from tetherbed.simulator.conformance.reports import table_lines, write_reports
from tetherbed.simulator.conformance.reports.junit import junit_xml
from tetherbed.simulator.conformance.results import CaseResult, RunResult


def result(case_id: str, outcome: Outcome, level: Level = Level.MUST, **kw) -> CaseResult:  # type: ignore[no-untyped-def]
    return CaseResult(case_id, "agent", "files", level, "File Operations", "A rule.", outcome, **kw)


def run_of(*results: CaseResult, started: str = "2026-01-02T03:04:05+00:00") -> RunResult:
    return RunResult(
        suite="agent",
        spec="local-executor",
        target="an agent",
        details={"command": "my-shim"},
        profile={"relative-paths": "either"},
        started=started,
        duration=1.5,
        results=list(results),
    )


def test_the_summary_line_counts_in_order() -> None:
    run = run_of(
        result("LE-a", Outcome.PASS),
        result("LE-b", Outcome.FAIL, reason="it broke"),
        result("LE-c", Outcome.WARN, Level.SHOULD),
        result("LE-d", Outcome.INFO, Level.INFO),
        result("LE-e", Outcome.SKIP),
    )
    assert run.summary_line() == "1 pass, 1 fail, 1 warn, 1 info, 1 skip"
    lines = table_lines(run)
    assert lines[-1].startswith("1 pass, 1 fail, 1 warn, 1 info, 1 skip")
    assert any(line.startswith("LE-b") and "fail" in line and "it broke" in line for line in lines)


def test_exit_status_fails_only_on_a_must_outside_the_expected_list() -> None:
    assert exit_status(run_of(result("LE-a", Outcome.PASS), result("LE-c", Outcome.WARN))) == 0
    failing = run_of(result("LE-b", Outcome.FAIL))
    assert exit_status(failing) == 1
    failing.results[0].expected_failure = True
    assert exit_status(failing) == 0
    assert exit_status(run_of(result("LE-x", Outcome.ERROR))) == 1
    unknown = run_of(result("LE-u", Outcome.UNKNOWN))
    assert exit_status(unknown) == 0
    assert exit_status(unknown, strict=True) == 1


def test_expectations_file(tmp_path: Path) -> None:
    path = tmp_path / "known.txt"
    path.write_text("# our shim\nLE-a   # answers -15\n\nLE-b\n")
    assert read_expectations(path, {"LE-a", "LE-b", "LE-c"}) == {"LE-a", "LE-b"}
    path.write_text("LE-typo\n")
    with pytest.raises(ExpectationsError, match="no such case: LE-typo"):
        read_expectations(path, {"LE-a"})
    run = run_of(result("LE-a", Outcome.PASS, expected_failure=True))
    assert [r.id for r in run.now_passing()] == ["LE-a"]
    assert any("passing now: LE-a" in line for line in table_lines(run))


def test_compare_says_what_changed() -> None:
    before = run_of(
        result("LE-a", Outcome.PASS), result("LE-b", Outcome.FAIL), result("LE-gone", Outcome.PASS)
    )
    after = run_of(
        result("LE-a", Outcome.FAIL), result("LE-b", Outcome.PASS), result("LE-new", Outcome.PASS)
    )
    diff = compare(after, before)
    assert diff["regressed"] == [{"id": "LE-a", "before": "pass", "after": "fail"}]
    assert diff["fixed"] == [{"id": "LE-b", "before": "fail", "after": "pass"}]
    assert diff["added"] == ["LE-new"] and diff["removed"] == ["LE-gone"]


def test_reports_round_trip_and_index(tmp_path: Path) -> None:
    evidence = [Entry(0.5, "conn#1", "sent", "text", '{"type":"FILE_READ"}', 20)]
    first = run_of(result("LE-a", Outcome.FAIL, reason="crlf <lost>", evidence=evidence))
    folder = write_reports(first, tmp_path)
    data = json.loads((folder / "conformance.json").read_text())
    back = RunResult.from_dict(data)
    assert back.results[0].evidence[0].text == '{"type":"FILE_READ"}'
    assert back.summary_line() == first.summary_line()
    junit = ET.fromstring((folder / "junit.xml").read_bytes())
    suite = junit.find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    assert suite.find("testcase/failure") is not None
    page = (folder / "index.html").read_text()
    assert "crlf &lt;lost&gt;" in page and 'id="LE-a"' in page and "FILE_READ" in page
    second = run_of(result("LE-a", Outcome.PASS), started="2026-01-02T04:00:00+00:00")
    write_reports(second, tmp_path)
    index = (tmp_path / "index.html").read_text()
    assert index.count("/index.html") == 2


def test_an_expected_failure_is_skipped_in_junit() -> None:
    run = run_of(result("LE-a", Outcome.FAIL, expected_failure=True))
    suite = ET.fromstring(junit_xml(run)).find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    assert suite.find("testcase/skipped") is not None


def test_profiles_are_declared_and_checked() -> None:
    registry.discover()
    profile = parse_profile([], "hub")
    assert profile.reading("ownership-4427") == "reference"
    chosen = parse_profile(["ownership-4427=evict-old"], "hub")
    assert chosen.reading("ownership-4427") == "evict-old"
    with pytest.raises(ProfileError, match="readings"):
        parse_profile(["ownership-4427=sometimes"], "hub")
    with pytest.raises(ProfileError, match="NAME=READING"):
        parse_profile(["relative-paths=root"], "hub")  # an agent ambiguity


def test_long_strings_in_frames_are_shortened() -> None:
    frame = json.dumps({"type": "FILE_CONTENTS", "payload": {"content": "x" * 5000}})
    shown = shorten_text(frame)
    assert "(5000 chars)" in shown and len(shown) < 600


def test_every_suite_and_case_is_well_formed() -> None:
    suites = registry.suites()
    assert {"agent", "hub", "native"} <= set(suites)
    cases = registry.cases()
    assert len({c.id for c in cases}) == len(cases)
    for case in cases:
        assert case.id.startswith(suites[case.suite].prefix + "-"), case.id
        assert case.rule and case.section, case.id
        declared = {a.name for a in ambiguities(case.suite)}
        assert set(case.reads) <= declared, case.id
