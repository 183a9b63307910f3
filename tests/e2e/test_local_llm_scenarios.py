"""The local LLM scenarios (scenarios/local_llm/) on sim and on real processes:
streaming through the hub, a busy backend, an unknown model, a failing backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "scenarios" / "local_llm"


def _run(backend: str, report: Path) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tetherbed",
            "run",
            str(FOLDER),
            "--backend",
            backend,
            "--strict",
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return json.loads((report / "results.json").read_text())


def _check(document: dict) -> None:
    runs = document["runs"]
    assert len(runs) == len(list(FOLDER.glob("*.yaml"))) == 4
    for run in runs:
        assert run["verdict"] == "pass"
        llm = next(v for v in run["verdicts"] if v["name"] == "llm_streams")
        assert llm["ok"] and "kept the chunk rules" in llm["summary"]


def test_on_sim(tmp_path: Path) -> None:
    _check(_run("sim", tmp_path))


@pytest.mark.e2e
@pytest.mark.xdist_group("process-scenarios")
def test_on_process(tmp_path: Path) -> None:
    _check(_run("process", tmp_path))
