"""JUnit XML: parseable by CI, one suite per backend, failures with evidence."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from tetherbed.simulator.checkers import Verdict
from tetherbed.simulator.reports.junit import junit_xml, write_junit
from tetherbed.simulator.reports.results import RunResult


def evidence(index: int) -> dict[str, object]:
    return {
        "index": index,
        "time": 2.0,
        "process": "agent:a",
        "type": "event",
        "f": "exec",
        "value": {"digest": "d1", "out": "<&>\x01"},
        "why": "ran twice",
        "violation": 0,
        "role": f"execution {index}",
    }


def runs() -> list[RunResult]:
    double = Verdict(
        "no_double_execution", False, "1 violation: ran twice <&>", [evidence(n) for n in range(30)]
    )
    return [
        RunResult(
            "retry",
            "s/retry.yaml",
            "sim",
            3,
            "fail",
            2.5,
            [double, Verdict("single_owner", True, "fine", [])],
            None,
            "tetherbed run s/retry.yaml --backend sim --seed 3",
            "h.jsonl",
        ),
        RunResult("retry", "s/retry.yaml", "process", 3, "pass", 9.0, [], None, "r", None),
        RunResult(
            "boot",
            "s/boot.yaml",
            "process",
            None,
            "error",
            0.1,
            [],
            "hub exited with 1\nTraceback...\x00",
            "tetherbed run s/boot.yaml",
            None,
        ),
    ]


def test_junit_parses_and_counts() -> None:
    root = ET.fromstring(junit_xml(runs()))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["tetherbed.process", "tetherbed.sim"]
    process = suites[0]
    assert (process.get("tests"), process.get("errors"), process.get("failures")) == ("2", "1", "0")
    assert [c.get("name") for c in process.findall("testcase")] == ["boot", "retry[seed=3]"]
    assert process.find("properties/property").get("value") == "process"


def test_failures_carry_summaries_evidence_and_replay() -> None:
    root = ET.fromstring(junit_xml(runs()))
    case = root.find("testsuite[@name='tetherbed.sim']/testcase")
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "CheckerFailure"
    assert failure.get("message") == "no_double_execution: 1 violation: ran twice <&>"
    assert "#0 t=2.0 agent:a event exec" in failure.text
    assert "… 10 more evidence record(s)" in failure.text
    assert "\\u0001" in failure.text  # JSON escapes it in values
    assert "single_owner" not in failure.text
    out = case.find("system-out").text
    assert "replay: tetherbed run s/retry.yaml --backend sim --seed 3" in out
    assert "history: h.jsonl" in out
    assert case.get("time") == "2.500" and case.get("classname") == "tetherbed.sim"


def test_runner_errors_are_errors() -> None:
    root = ET.fromstring(junit_xml(runs()))
    case = root.find("testsuite[@name='tetherbed.process']/testcase[@name='boot']")
    error = case.find("error")
    assert error.get("message") == "hub exited with 1"
    assert error.text.startswith("hub exited with 1\nTraceback")
    assert error.text.endswith("\ufffd")  # NUL cannot be in XML: replaced
    assert case.find("failure") is None


def test_write_junit_is_deterministic(tmp_path: Path) -> None:
    write_junit(tmp_path / "a.xml", runs())
    write_junit(tmp_path / "b.xml", list(reversed(runs())))
    text = (tmp_path / "a.xml").read_text()
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    assert text == (tmp_path / "b.xml").read_text()
    ET.parse(tmp_path / "a.xml")


def test_no_runs_is_still_valid() -> None:
    root = ET.fromstring(junit_xml([]))
    assert root.get("tests") == "0" and root.findall("testsuite") == []
