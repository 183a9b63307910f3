"""Unknown verdicts, crashed checkers and reference-only steps, everywhere they show.

A checker without evidence says so in the terminal, the JUnit XML and the
timeline; `--strict` turns it into a failure; a checker that crashes makes the
run an error, never a pass; a reference-only step is not applicable to a
third-party part and is counted.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tetherbed.simulator.checkers import CHECKERS, Verdict
from tetherbed.simulator.history import History
from tetherbed.simulator.reports.junit import junit_xml
from tetherbed.simulator.reports.results import RunResult, overall_verdict
from tetherbed.simulator.reports.table import render_table
from tetherbed.simulator.reports.timeline.render import render_timeline
from tetherbed.simulator.runner import run_scenario
from tetherbed.simulator.scenario import parse

UNKNOWN = Verdict("backoff_bounds", "unknown", "no evidence: no reconnect on the wire", [])
PASSED = Verdict("single_owner", "pass", "fine", [])
CRASHED = Verdict.crashed("file_contents", KeyError("x"))


def result(verdicts: list[Verdict], *, strict: bool = False, skipped: int = 0) -> RunResult:
    verdict = overall_verdict(verdicts, None, strict=strict)
    return RunResult(
        "s", "s.yaml", "process", 1, verdict, 1.0, verdicts, None, "replay", None, skipped, strict
    )


def test_unknown_passes_unless_strict_and_a_crash_is_an_error() -> None:
    assert overall_verdict([PASSED, UNKNOWN]) == "pass"
    assert overall_verdict([PASSED, UNKNOWN], strict=True) == "fail"
    assert overall_verdict([PASSED, UNKNOWN, CRASHED]) == "error"
    assert result([UNKNOWN], strict=True).failed_checkers == [UNKNOWN]
    assert result([UNKNOWN]).failed_checkers == []
    assert Verdict.from_dict(UNKNOWN.to_dict()) == UNKNOWN
    assert Verdict.from_dict({"name": "x", "ok": True, "summary": ""}).status == "pass"
    with pytest.raises(ValueError, match="one of"):
        Verdict("x", "maybe", "")  # type: ignore[arg-type]


def test_the_terminal_table_lists_unknowns_and_skipped_steps() -> None:
    text = render_table([result([PASSED, UNKNOWN], skipped=3)])
    assert "Unknown (no evidence either way; not a pass under --strict):" in text
    assert "backoff_bounds: no evidence: no reconnect on the wire" in text
    assert "Not applicable to this target: 3 reference-only step(s) in 1 run(s)" in text
    crashed = render_table([result([CRASHED])])
    assert "checker file_contents crashed: KeyError: 'x'" in crashed


def test_junit_carries_unknowns_as_properties_and_a_crash_as_an_error() -> None:
    root = ET.fromstring(junit_xml([result([PASSED, UNKNOWN], skipped=2)]))
    case = root.find(".//testcase")
    assert case is not None and case.find("failure") is None
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["unknown.backoff_bounds"] == UNKNOWN.summary
    out = case.findtext("system-out") or ""
    assert "unknown: backoff_bounds" in out and "2 reference-only step(s)" in out
    strict = ET.fromstring(junit_xml([result([UNKNOWN], strict=True)]))
    assert strict.find(".//failure") is not None
    crashed = ET.fromstring(junit_xml([result([CRASHED])])).find(".//error")
    assert crashed is not None and crashed.get("type") == "CheckerCrash"


def test_the_timeline_marks_an_unknown_verdict() -> None:
    html = render_timeline(History(), [PASSED, UNKNOWN], "t")
    assert '<td class="unknown">? unknown</td>' in html


SCENARIO = {
    "name": "reference-only steps",
    "checkers": ["no_reconnect_after_fatal"],
    "topology": {"agents": {"future": {"session": "s", "options": {"protocol_version": "2.0"}}}},
    "steps": [
        {"start": "hub"},
        {"start": "future"},
        {"expect": {"event": "close", "process": "wire:future", "value": {"code": 4426}}},
        {"expect": {"agent": "future", "exit_code": 26, "reference_only": True}},
    ],
}


def test_a_reference_only_step_runs_for_the_reference(tmp_path: Path) -> None:
    outcome = run_scenario(parse(SCENARIO), "sim", 1, tmp_path)
    assert outcome.ok and outcome.not_applicable == []


def test_a_crashing_checker_makes_the_run_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(history: History, **options: object) -> Verdict:
        raise KeyError("x")

    monkeypatch.setitem(CHECKERS, "no_reconnect_after_fatal", broken)
    outcome = run_scenario(parse(SCENARIO), "sim", 1, tmp_path)
    assert outcome.verdict == "error" and not outcome.ok
    assert outcome.verdicts[0].error is not None


def test_strict_fails_a_run_whose_checker_had_no_evidence(tmp_path: Path) -> None:
    scenario = parse({**SCENARIO, "checkers": ["no_reconnect_after_fatal", "backoff_bounds"]})
    assert run_scenario(scenario, "sim", 1, tmp_path / "a").verdict == "pass"
    strict = run_scenario(scenario, "sim", 1, tmp_path / "b", strict=True)
    assert strict.verdict == "fail" and [v.name for v in strict.unknown] == ["backoff_bounds"]
