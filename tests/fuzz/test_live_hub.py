"""Live fuzzing of the hub: Tetherbed's own holds, a planted crash is found, shrunk, replayed.

`crash_on_unknown_field` makes the hub's frame parser take the process down on a
field it does not know; the fuzzer must find it within the bounded examples, shrink
it, and the written case must replay against the same defect and pass on a sound hub.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tetherbed.simulator.fuzz.live.case import FuzzCase
from tetherbed.simulator.fuzz.live.hub import HubFuzzTarget, HubStep
from tetherbed.simulator.fuzz.live.profile import PROFILES
from tetherbed.simulator.fuzz.live.runner import fuzz, replay
from tetherbed.simulator.targets import Target

#: The search stops at the first failure: this only bounds a run that finds none.
FIND_WITHIN = 200
SEED = 7


def _target(*flags: str) -> HubFuzzTarget:
    target = HubFuzzTarget(Target.reference(), profile=PROFILES["ci"], reference_args=flags)
    target.start()
    return target


def test_the_reference_hub_holds_every_property(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    profile = PROFILES["ci"]
    target = _target()
    try:
        result = fuzz(target, examples=profile.examples, seed_value=SEED, profile=profile,
                      report=tmp_path, progress=print)  # fmt: skip
    finally:
        target.stop()
    record_property("tetherbed_fuzz", result.to_json())
    assert result.examples >= profile.examples // 2
    assert not result.failures, result.failures[0].problems


def test_a_hub_that_crashes_on_an_unknown_field_is_found_and_shrunk(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    profile = PROFILES["ci"]
    target = _target("--defect", "crash_on_unknown_field")
    try:
        result = fuzz(target, examples=FIND_WITHIN, seed_value=SEED, profile=profile,
                      report=tmp_path, progress=print)  # fmt: skip
        record_property("tetherbed_fuzz", result.to_json())
        assert result.failures, "the fuzzer did not crash the hub"
        case = FuzzCase.read(result.case_paths[0])
        assert "exited with status 70" in " ".join(case.problems)
        assert result.first_failure_steps is not None
        assert len(case.steps) <= result.first_failure_steps
        steps = [HubStep.from_json(raw) for raw in case.steps]
        assert any(s.via == "hello" and "unknown" in (s.mutation or "") for s in steps)
        assert replay(target, case), "the case did not crash the hub again"
    finally:
        target.stop()
    sound = _target()
    try:
        assert replay(sound, case) == []
    finally:
        sound.stop()
