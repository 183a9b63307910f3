"""`tetherbed explore`: bad input is exit 2 before anything runs; a run prints
per-seed verdicts, the distinct interleavings and each failure's replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetherbed.simulator.explore.cli import main, seed_range

ROOT = Path(__file__).parents[3]
RACE = ROOT / "scenarios" / "explore" / "takeover_race.yaml"


def test_seed_ranges() -> None:
    assert seed_range("3") == range(1, 4)
    assert seed_range("5..7") == range(5, 8)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        ([str(ROOT / "scenarios" / "partition_race.yaml")], "no `generate:`"),
        ([str(RACE), "--agent-command", "some-agent {hub_url}"], "sim backend runs only"),
        (["no-such-file.yaml"], "No such file"),
        ([str(RACE), "--schedule"], "on the sim backend --seed alone picks"),
        ([str(RACE), "--backend", "process", "--replay", "x.jsonl"], "use tetherbed run"),
    ],
)
def test_bad_input_is_exit_2(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert words in capsys.readouterr().err


def test_loss_on_sim_is_refused_at_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lossy = tmp_path / "lossy.yaml"
    lossy.write_text(RACE.read_text() + "  loss: {rate: 0.1, percent: 5}\n", encoding="utf-8")
    assert main([str(lossy)]) == 2
    assert "loss: not supported on the sim backend" in capsys.readouterr().err


def test_a_run_reports_seeds_interleavings_and_replays(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(
        [str(RACE), "--seeds", "4..5", "--hub-defect", "evict_after_drain", "--no-shrink"]
    )
    out = capsys.readouterr().out
    assert status == 1
    assert "seed 4     fail" in out and "single_owner:" in out
    assert "2 seed(s):" in out and "distinct interleaving(s)" in out
    assert (
        "replay: tetherbed explore " + str(RACE) + " --seeds 4..4 --backend sim "
        "--hub-defect evict_after_drain" in out
    )
