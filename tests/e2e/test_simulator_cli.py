"""`tetherbed run` as users run it: every shipped scenario, determinism, replay."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
FAILING = ROOT / "tests" / "fixtures" / "failing_lost_write.yaml"


def tetherbed(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tetherbed", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=1200,
        check=False,
    )


def test_every_shipped_scenario_passes_on_sim(tmp_path: Path) -> None:
    run = tetherbed("run", str(SCENARIOS), "--backend", "sim", "--report", str(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    runs = results["runs"] if isinstance(results, dict) else results
    assert len(runs) == len(list(SCENARIOS.glob("*.yaml"))) >= 10
    assert {r["verdict"] for r in runs} == {"pass"}
    for folder in tmp_path.iterdir():
        if folder.is_dir():
            assert (folder / "history.jsonl").stat().st_size > 0
            assert "<svg" in (folder / "timeline.html").read_text()
    junit = (tmp_path / "junit.xml").read_text()
    assert "<testsuite" in junit and 'failures="0"' in junit


def test_one_seed_gives_byte_identical_histories(tmp_path: Path) -> None:
    scenario = SCENARIOS / "reconnect_after_hub_restart.yaml"
    first, second = tmp_path / "first", tmp_path / "second"
    for report in (first, second):
        run = tetherbed("run", str(scenario), "--seed", "1234", "--report", str(report))
        assert run.returncode == 0, run.stdout + run.stderr
    (history_one,) = first.glob("*/history.jsonl")
    (history_two,) = second.glob("*/history.jsonl")
    assert history_one.read_bytes() == history_two.read_bytes()
    other = tmp_path / "other-seed"
    tetherbed("run", str(scenario), "--seed", "99", "--report", str(other))
    (history_three,) = other.glob("*/history.jsonl")
    assert history_three.read_bytes() != history_one.read_bytes()  # the seed matters


def test_a_failing_scenario_prints_a_replay_command_that_reproduces_it(tmp_path: Path) -> None:
    run = tetherbed("run", str(FAILING), "--seed", "7", "--report", str(tmp_path / "a"))
    assert run.returncode == 1, run.stdout + run.stderr
    match = re.search(r"^\s*(tetherbed run .+)$", run.stdout, re.MULTILINE)
    assert match, run.stdout
    replay = shlex.split(match.group(1))
    assert replay[:2] == ["tetherbed", "run"] and "--seed" in replay
    again = tetherbed(*replay[1:], "--report", str(tmp_path / "b"))
    assert again.returncode == 1, again.stdout
    (first,) = (tmp_path / "a").glob("*/history.jsonl")
    (second,) = (tmp_path / "b").glob("*/history.jsonl")
    assert first.read_bytes() == second.read_bytes()
    verdicts = json.loads((tmp_path / "b" / "results.json").read_text())
    text = json.dumps(verdicts)
    assert "file_contents" in text and '"fail"' in text


def test_invalid_scenarios_are_refused_with_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\n"
        "topology: {agents: {a: {session: s}}}\n"
        "steps:\n  - start: hub\n  - teleport: a\n"
    )
    run = tetherbed("run", str(bad), "--report", str(tmp_path / "r"))
    assert run.returncode == 2
    assert "step 2" in run.stderr and "teleport" in run.stderr
