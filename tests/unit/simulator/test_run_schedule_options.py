"""`tetherbed run`'s scheduling options are refused (exit 2) before anything runs
when they cannot apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetherbed.simulator.cli import main

SCENARIO = str(
    Path(__file__).resolve().parents[2] / "third_party/scenarios/requests_back_to_back.yaml"
)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--schedule"], "on the sim backend --seed alone picks the interleaving"),
        (["--backend", "process", "--schedule", "fast"], "want TIME[,COUNT]"),
        (["--backend", "process", "--schedule", "--replay", "x.jsonl"], "give one of them"),
        (["--backend", "process", "--times", "3"], "--times goes with --replay"),
    ],
)
def test_refused_before_anything_runs(argv, said, capsys, tmp_path):
    assert main([SCENARIO, "--report", str(tmp_path), *argv]) == 2
    assert said in capsys.readouterr().err


def test_a_file_that_is_no_decision_log_is_refused(capsys, tmp_path):
    bogus = tmp_path / "bogus.jsonl"
    bogus.write_text('{"n": 0}\n')
    assert main([SCENARIO, "--backend", "process", "--replay", str(bogus)]) == 2
    assert "not a decision" in capsys.readouterr().err
