"""Every shipped scenario on the process backend, against every kind of target.

- Tetherbed's own hub and agent (the reference, with their journals);
- Tetherbed's agent through `--agent-command`: no journal, judged from the
  wire like any third party;
- the independent minimal agent (tests/third_party/minimal_agent.py);
- the stand-in hub with its own client and admin API, through its adapters,
  serving the minimal agent: nothing under test is Tetherbed's.

Each variant runs its scenarios as a user would (`tetherbed run`, one per
scenario, five at a time: they mostly wait in real time) and the variants run
one after the other in one xdist group, so the suite's load stays bounded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.third_party.targets import MINIMAL_AGENT, TETHERBED_AGENT, standin_mapping

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("process-scenarios")]

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
AT_ONCE = 5


def _reference_only(path: Path) -> bool:
    """A scenario only the reference variant runs: dsh-computers SSE agents run
    Tetherbed's dsh agent whatever the (local-executor) agent target, and a
    control-mode agent runs Tetherbed's agent (`tetherbed run` skips both for a
    third-party target and says why)."""
    topology = yaml.safe_load(path.read_text())["topology"]
    agents = (topology.get("agents") or {}).values()
    return any(a.get("transport") == "sse" or "control" in a for a in agents)


def _target_file(tmp_path: Path, variant: str) -> list[str]:
    if variant == "reference":
        return []
    if variant == "tetherbed-agent-command":
        return ["--agent-command", TETHERBED_AGENT]
    if variant == "minimal-agent":
        return ["--agent-command", MINIMAL_AGENT]
    path = tmp_path / "standin.yaml"
    path.write_text(yaml.safe_dump(standin_mapping(agent=MINIMAL_AGENT)), encoding="utf-8")
    return ["--target", str(path)]


def _run(scenario: Path, report: Path, options: list[str]) -> tuple[str, int, dict, str]:
    command = [sys.executable, "-m", "tetherbed", "run", str(scenario), "--backend", "process"]
    done = subprocess.run(
        [*command, "--report", str(report), *options],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    results = report / "results.json"
    document = json.loads(results.read_text()) if results.exists() else {}
    return scenario.stem, done.returncode, document, done.stdout + done.stderr


@pytest.mark.parametrize(
    "variant", ["reference", "tetherbed-agent-command", "minimal-agent", "standin-hub"]
)
def test_every_shipped_scenario_passes(tmp_path: Path, variant: str) -> None:
    options = _target_file(tmp_path, variant)
    scenarios = [s for s in SCENARIOS if variant == "reference" or not _reference_only(s)]
    with ThreadPoolExecutor(AT_ONCE) as pool:
        runs = list(pool.map(lambda s: _run(s, tmp_path / s.stem, options), scenarios))
    failed = {name: output[-3000:] for name, code, _, output in runs if code != 0}
    assert not failed, json.dumps(failed, indent=1)
    assert len(runs) == len(scenarios) >= 10
    skipped = 0
    for _, _, document, output in runs:
        (run,) = document["runs"]
        assert run["verdict"] == "pass"
        # Real time: the scenario says it is running before its verdict comes.
        lines = output.splitlines()
        name = run["scenario"]
        started = next(
            i for i, line in enumerate(lines) if line.split() == ["run", *name.split(), "..."]
        )
        finished = next(i for i, line in enumerate(lines) if line.lstrip().startswith("pass"))
        assert started < finished, output
        statuses = {v["name"]: v["status"] for v in run["verdicts"]}
        # Each scenario names the checkers it exercises: every one had evidence.
        assert set(statuses.values()) == {"pass"}, statuses
        skipped += run["not_applicable"]
    if variant == "reference":
        assert skipped == 0
    else:
        assert skipped > 0  # exit codes and journal events did not apply
