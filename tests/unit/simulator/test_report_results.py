"""results.json: complete, sorted, round-trips, identical for identical runs."""

from __future__ import annotations

import json
from pathlib import Path

from tetherbed.simulator.checkers import Verdict
from tetherbed.simulator.reports.results import (
    RunResult,
    overall_verdict,
    read_results,
    write_results,
)

EVIDENCE = {
    "index": 3,
    "time": 1.5,
    "process": "hub",
    "type": "event",
    "f": "ack",
    "value": {"conn": "c1"},
    "session": "s1",
    "machine": None,
    "req": None,
    "why": "two owners",
    "violation": 0,
    "role": "first owner",
}


def runs() -> list[RunResult]:
    return [
        RunResult(
            "takeover",
            "scenarios/takeover.yaml",
            "sim",
            7,
            "fail",
            1.23456,
            [
                Verdict("single_owner", False, "1 violation: two owners", [EVIDENCE]),
                Verdict("exactly_one_answer", True, "3 request(s)", []),
            ],
            None,
            "tetherbed run scenarios/takeover.yaml --backend sim --seed 7",
            "out/takeover/history.jsonl",
        ),
        RunResult(
            "basic",
            "scenarios/basic.yaml",
            "process",
            1,
            "error",
            0.5,
            [],
            "Traceback: hub did not start",
            "tetherbed run scenarios/basic.yaml",
            None,
        ),
        RunResult("basic", "scenarios/basic.yaml", "sim", 1, "pass", 0.25, [], None, "r", None),
    ]


def test_results_json_holds_every_field_sorted(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    write_results(path, runs())
    data = json.loads(path.read_text())
    assert data["format"] == "tetherbed-results/1"
    assert data["summary"] == {"runs": 3, "pass": 1, "fail": 1, "error": 1}
    assert [(r["scenario"], r["backend"]) for r in data["runs"]] == [
        ("basic", "process"),
        ("basic", "sim"),
        ("takeover", "sim"),
    ]
    failed = data["runs"][2]
    assert failed["seconds"] == 1.235
    assert [v["name"] for v in failed["verdicts"]] == ["exactly_one_answer", "single_owner"]
    assert failed["verdicts"][1]["evidence"][0]["why"] == "two owners"
    assert failed["replay"].startswith("tetherbed run")
    assert failed["history_path"] == "out/takeover/history.jsonl"
    assert data["runs"][0]["error"].startswith("Traceback")


def test_identical_runs_give_identical_bytes_whatever_the_order(tmp_path: Path) -> None:
    write_results(tmp_path / "a.json", runs())
    write_results(tmp_path / "b.json", list(reversed(runs())))
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_results_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    write_results(path, runs())
    back = read_results(path)
    assert {(r.scenario, r.backend, r.verdict) for r in back} == {
        (r.scenario, r.backend, r.verdict) for r in runs()
    }
    takeover = next(r for r in back if r.scenario == "takeover")
    assert takeover.failed_checkers[0].evidence[0]["index"] == 3


def test_overall_verdict() -> None:
    ok, bad = Verdict("a", True, "", []), Verdict("b", False, "", [])
    assert overall_verdict([ok]) == "pass"
    assert overall_verdict([ok, bad]) == "fail"
    assert overall_verdict([ok], error="boom") == "error"


def test_a_step_that_did_not_hold_is_a_failure_not_an_error() -> None:
    """An expect/assert step that does not hold is the system under test's
    failure; only what could not be judged is an error."""
    ok = Verdict("single_owner", True, "fine", [])
    assert overall_verdict([ok], failure="step 3 (expect ...): not reached") == "fail"
    assert overall_verdict([ok], error="boom", failure="step 3") == "error"
