"""The scenarios `tetherbed explore` found, shrunk and exported (scenarios/found/):
each fails with its planted hub defect, for the checker that caught it, and
passes without it; and the fixed scenarios miss the race and the leaks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tetherbed.simulator.runner import run_scenario
from tetherbed.simulator.scenario import parse

ROOT = Path(__file__).parents[3]
FOUND = ROOT / "scenarios" / "found"
#: Exported file → the checker that fails with its defect.
CAUGHT_BY = {
    "evict_after_drain": "single_owner",
    "no_request_deadline": "exactly_one_answer",
    "revocation_unenforced": "revocation_holds",
    "takeover_unlabelled": "single_owner",
    "reissue_unlabelled": "no_double_execution",
}


def _document(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _run(document: dict[str, Any], tmp_path: Path):  # type: ignore[no-untyped-def]
    scenario = parse(document, None, "sim")
    return run_scenario(scenario, "sim", scenario.seed, tmp_path)


@pytest.mark.parametrize("defect", sorted(CAUGHT_BY))
def test_found_scenario_fails_with_its_defect_and_passes_without(
    defect: str, tmp_path: Path
) -> None:
    document = _document(FOUND / f"{defect}.yaml")
    assert "generate" not in document and "nemesis" not in document
    assert document["topology"]["hub"]["options"]["defects"] == [defect]
    broken = _run(document, tmp_path / "broken")
    assert broken.error is None, broken.error
    failed = {v.name for v in broken.verdicts if v.failed}
    assert broken.verdict == "fail" and CAUGHT_BY[defect] in failed, failed
    fixed = copy.deepcopy(document)
    del fixed["topology"]["hub"]["options"]["defects"]
    outcome = _run(fixed, tmp_path / "fixed")
    assert outcome.verdict == "pass", [(v.name, v.summary) for v in outcome.verdicts]


#: The shipped scenarios about races, takeovers, revocation and lost requests.
FIXED = (
    "partition_race",
    "same_machine_takeover_after_sleep",
    "in_flight_across_disconnect",
    "different_machine_split_brain",
    "version_mismatch",
    "user_revoke",
    "overload_and_recovery",
)


@pytest.mark.parametrize("name", FIXED)
def test_the_fixed_scenarios_miss_the_race_and_the_leaks(name: str, tmp_path: Path) -> None:
    """(a) and (b): the shipped scenarios pass with the takeover race, the slot
    leak and the unenforced revocation all planted; exploration finds them."""
    document = _document(ROOT / "scenarios" / f"{name}.yaml")
    hub = document["topology"].setdefault("hub", {}) or {}
    document["topology"]["hub"] = hub
    options = hub.setdefault("options", {}) or {}
    hub["options"] = options
    options["defects"] = ["evict_after_drain", "no_request_deadline", "revocation_unenforced"]
    outcome = _run(document, tmp_path)
    assert outcome.verdict == "pass", [(v.name, v.summary) for v in outcome.verdicts]
