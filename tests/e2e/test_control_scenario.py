"""The control-mode scenario (scenarios/control_idle_stop_and_restore.yaml) on sim
and on real processes, judged from the wire; refused at load on docker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "control_idle_stop_and_restore.yaml"


def tetherbed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tetherbed", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )


def run(backend: str, report: Path) -> dict:
    done = tetherbed("run", str(SCENARIO), "--backend", backend, "--report", str(report))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    [outcome] = json.loads((report / "results.json").read_text())["runs"]
    assert outcome["verdict"] == "pass"
    return {v["name"]: v for v in outcome["verdicts"]}


def check(verdicts: dict) -> None:
    children = verdicts["control_children"]
    assert children["ok"], children
    # Activated, restored twice (by the platform, then by the hub), each
    # child between them; three stops without a detach in force until the last.
    assert "3 child connection(s) over 1 session(s)" in children["summary"]


def test_on_sim(tmp_path: Path) -> None:
    check(run("sim", tmp_path))


@pytest.mark.e2e
@pytest.mark.xdist_group("process-scenarios")
def test_on_process(tmp_path: Path) -> None:
    check(run("process", tmp_path))


def test_refused_at_load_on_docker(tmp_path: Path) -> None:
    document = yaml.safe_load(SCENARIO.read_text())
    del document["backends"]  # the shipped file skips docker; this one asks for it
    path = tmp_path / "control.yaml"
    path.write_text(yaml.safe_dump(document))
    done = tetherbed("run", str(path), "--backend", "docker", "--report", str(tmp_path / "r"))
    assert done.returncode == 2
    assert "control: not supported on the docker backend (only on process and sim)" in (
        done.stdout + done.stderr
    )
