"""A failing generated run is shrunk and exported; `tetherbed run` replays the
exported file with the same verdict."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tetherbed.simulator.cli import main as run_main
from tetherbed.simulator.explore.explorer import Explorer
from tetherbed.simulator.explore.export import exported_document, write_scenario
from tetherbed.simulator.explore.plan import Item, Plan
from tetherbed.simulator.explore.shrink import Attempt, shrink
from tetherbed.simulator.scenario import load, parse

EXPLORE = Path(__file__).parents[3] / "scenarios" / "explore"


def _with_defect(path: Path, defect: str):  # type: ignore[no-untyped-def]
    document = yaml.safe_load(path.read_text())
    document["topology"].setdefault("hub", {}).setdefault("options", {})["defects"] = [defect]
    return parse(document, path, "sim")


def test_shrinking_keeps_only_what_the_failure_needs() -> None:
    """ddmin over items with a stand-in run: the failure needs items 3 and 7."""
    base = {"name": "x", "description": "", "timeout": 60.0, "checkers": [], "topology": {}}
    items = tuple(Item(float(i), "operation", ((0.0, {"note": f"op {i}"}),)) for i in range(12))
    plan = Plan(base, 1, items, settle=8.0)

    def run(candidate: Plan) -> Attempt:
        notes = {step["note"] for item in candidate.items for _, step in item.steps}
        failing = {"op 3", "op 7"} <= notes
        return Attempt("fail" if failing else "pass", frozenset({"c"} if failing else ()))

    shrunk = shrink(plan, run, frozenset({"c"}))
    assert [item.at for item in shrunk.plan.items] == [3.0, 7.0]
    assert shrunk.plan.settle < 2.0
    assert shrunk.runs < 60


@pytest.mark.parametrize("seed", [4])
def test_explore_shrink_export_and_run_agree(
    tmp_path: Path, seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = _with_defect(EXPLORE / "takeover_race.yaml", "evict_after_drain")
    explorer = Explorer(scenario, "sim")
    result, _, plan = explorer.run_seed(seed)
    assert result.verdict == "fail" and "single_owner" in result.failed_names
    shrunk = explorer.shrink(plan, result.failed_names, budget=60)
    before, after = plan.size(), shrunk.plan.size()
    assert after["operations"] < before["operations"]
    assert after["seconds"] < before["seconds"]
    assert "single_owner" in shrunk.failed
    exported = tmp_path / "found.yaml"
    write_scenario(exported, exported_document(shrunk.plan, found="test", original=before))
    text = exported.read_text()
    assert "generate" not in yaml.safe_load(text) and "nemesis" not in yaml.safe_load(text)
    # tetherbed run replays it with the same verdict...
    status = run_main([str(exported), "--report", str(tmp_path / "report")])
    out = capsys.readouterr().out
    assert status == 1 and "single_owner:" in out
    # ... and without the defect it passes.
    fixed = copy.deepcopy(yaml.safe_load(text))
    del fixed["topology"]["hub"]["options"]["defects"]
    (tmp_path / "fixed.yaml").write_text(yaml.safe_dump(fixed))
    assert run_main([str(tmp_path / "fixed.yaml"), "--report", str(tmp_path / "r2")]) == 0
    assert load(exported).seed == seed
