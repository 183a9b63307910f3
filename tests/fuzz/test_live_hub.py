"""Live fuzzing of the hub: Tetherbed's own holds, a planted crash is found, shrunk, replayed.

`crash_on_unknown_field` makes the hub's frame parser take the process down on a
field it does not know; the fuzzer must find it within the bounded examples, shrink
it, and the written case must replay against the same defect and pass on a sound hub.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.live_runs import assert_defect_found_and_replayed, assert_holds_every_property
from tetherbed.simulator.fuzz.live.case import FuzzCase
from tetherbed.simulator.fuzz.live.hub import HubFuzzTarget, HubStep
from tetherbed.simulator.fuzz.live.profile import PROFILES
from tetherbed.simulator.fuzz.live.runner import FuzzResult
from tetherbed.simulator.targets import Target

SEED = 7


def _target(*flags: str) -> HubFuzzTarget:
    target = HubFuzzTarget(Target.reference(), profile=PROFILES["ci"], reference_args=flags)
    target.start()
    return target


def test_the_reference_hub_holds_every_property(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    assert_holds_every_property(
        _target(), seed=SEED, tmp_path=tmp_path, record_property=record_property
    )


def test_a_hub_that_crashes_on_an_unknown_field_is_found_and_shrunk(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    def check_case(case: FuzzCase, result: FuzzResult) -> None:
        assert "exited with status 70" in " ".join(case.problems)
        assert result.first_failure_steps is not None
        assert len(case.steps) <= result.first_failure_steps
        steps = [HubStep.from_json(raw) for raw in case.steps]
        assert any(s.via == "hello" and "unknown" in (s.mutation or "") for s in steps)

    assert_defect_found_and_replayed(
        _target,
        "crash_on_unknown_field",
        check_case,
        seed=SEED,
        tmp_path=tmp_path,
        record_property=record_property,
    )
