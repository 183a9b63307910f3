"""Live fuzzing of the native adapter: Tetherbed's own passes, the planted defect is found.

`accept_over_deep` makes the adapter parse a request nested past the spec's depth of
32 instead of refusing it; the fuzzer must find it within the bounded examples,
shrink it to one line just past the limit, and the written case must replay.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tetherbed.simulator.conformance.native.environment import REFERENCE
from tetherbed.simulator.fuzz.live.case import FuzzCase
from tetherbed.simulator.fuzz.live.native import NativeFuzzTarget
from tetherbed.simulator.fuzz.live.profile import PROFILES
from tetherbed.simulator.fuzz.live.runner import fuzz, replay
from tetherbed.simulator.fuzz.strategies import crossdesk

#: The search stops at the first failure: this only bounds a run that finds none.
FIND_WITHIN = 200
SEED = 20261202


def _target(*extra: str) -> NativeFuzzTarget:
    target = NativeFuzzTarget([*REFERENCE, *extra], profile=PROFILES["ci"])
    target.start()
    return target


def test_the_reference_adapter_holds_every_property(
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


def test_an_adapter_that_parses_over_deep_requests_is_found_and_shrunk(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    profile = PROFILES["ci"]
    target = _target("--defect", "accept_over_deep")
    try:
        result = fuzz(target, examples=FIND_WITHIN, seed_value=SEED, profile=profile,
                      report=tmp_path, progress=print)  # fmt: skip
        record_property("tetherbed_fuzz", result.to_json())
        assert result.failures, "the fuzzer did not find the over-deep request"
        case = FuzzCase.read(result.case_paths[0])
        assert "NESTING_TOO_DEEP" in " ".join(case.problems)
        # Shrunk: one line, nested just past the limit.
        assert len(case.steps) == 1
        line = crossdesk.RequestLine.from_json(case.steps[0])
        assert line.data.count(b"[") <= 40
        # The case replays against the same defect, and not against a sound adapter.
        assert replay(target, case)
    finally:
        target.stop()
    sound = _target()
    try:
        assert replay(sound, case) == []
    finally:
        sound.stop()
