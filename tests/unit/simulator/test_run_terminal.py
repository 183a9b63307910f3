"""What `tetherbed run` says on the terminal, and how it classifies what went wrong.

A person reading the output must learn why without opening a report: the
failing checker's summary and its first piece of evidence, an error's message
(never a bare "Traceback"), where `--keep` kept the files. A checker that
crashes is the test bed's bug: the run is an error, never a pass and never a
failure of the system under test.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from tetherbed.simulator import checkers
from tetherbed.simulator.backends.sim import SimBackend
from tetherbed.simulator.cli import main as run
from tetherbed.simulator.history import History

ROOT = Path(__file__).resolve().parents[3]
FAILING = ROOT / "tests" / "fixtures" / "failing_lost_write.yaml"

SMALL = {
    "name": "small",
    "topology": {"agents": {"a": {"session": "s"}}, "clients": {"c": {"session": "s"}}},
    "checkers": ["single_owner", "exactly_one_answer"],
    "steps": [
        {"start": "hub"},
        {"start": "a"},
        {"expect": {"agent": "a", "state": "connected"}},
    ],
}


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path


def results(report: Path) -> dict:
    return json.loads((report / "results.json").read_text())["runs"][0]


def test_a_crashing_checker_makes_the_run_an_error(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(history: History) -> checkers.Verdict:
        raise RuntimeError("boom")

    monkeypatch.setitem(checkers.CHECKERS, "single_owner", broken)
    report = tmp_path / "r"
    assert run([str(small), "--report", str(report)]) == 1
    result = results(report)
    assert result["verdict"] == "error"
    crashed = next(v for v in result["verdicts"] if v["name"] == "single_owner")
    assert crashed["error"] == "RuntimeError: boom" and not crashed["ok"]
    other = next(v for v in result["verdicts"] if v["name"] == "exactly_one_answer")
    assert other["status"] in ("pass", "unknown") and "error" not in other
    out = capsys.readouterr().out
    assert "error" in out and "checker single_owner crashed: RuntimeError: boom" in out
    assert "fail" not in out.split("To replay:")[0].replace("0 fail", "")
    junit = (report / "junit.xml").read_text()
    assert 'errors="1"' in junit and 'failures="0"' in junit


def test_a_failing_checker_prints_its_summary_and_first_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([str(FAILING), "--report", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("fail"))
    detail = "\n".join(lines[at + 1 : at + 4])
    assert "file_contents: 1 violation" in detail
    assert "evidence: #" in detail and "precious.txt" in detail


def test_a_runner_error_prints_its_message_not_a_traceback(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def on_fire(self: SimBackend, node: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SimBackend, "start", on_fire)
    assert run([str(small), "--report", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "OSError: [Errno 28] No space left on device" in out
    assert "Traceback" not in out
    assert "Traceback" in results(tmp_path)["error"]  # the report keeps it for debugging


def test_keep_prints_the_folder_it_kept(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([str(small), "--keep", "--report", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if "kept" in line]
    kept = Path(line.split("kept", 1)[1].strip().split()[0])
    assert kept.is_dir() and (kept / "roots").is_dir()


def test_log_level_is_accepted_after_the_subcommand(
    small: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert run([str(small), "--log-level", "DEBUG", "--report", str(tmp_path)]) == 0
    assert logging.getLogger("tetherbed").getEffectiveLevel() == logging.DEBUG


def test_the_run_ends_by_saying_where_the_timelines_are(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([str(small), "--report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    timeline = tmp_path / "small-sim" / "timeline.html"
    assert timeline.is_file()
    assert f"timeline: {timeline}" in out and "open it in a browser" in out


def test_a_step_that_does_not_hold_fails_the_run_and_says_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed expect is the system under test's failure, not the bed's error."""
    scenario = {
        **SMALL,
        "steps": [*SMALL["steps"], {"expect": {"agent": "a", "exit_code": 3, "within": 5}}],
    }
    path = tmp_path / "expecting.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert run([str(path), "--report", str(tmp_path / "out")]) == 1
    result = results(tmp_path / "out")
    assert result["verdict"] == "fail" and result["error"] is None
    assert result["failure"].startswith("step 4 (expect")
    assert "step 4 (expect" in capsys.readouterr().out
