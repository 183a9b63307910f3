"""The two live-fuzzing checks every target gets: a sound one holds every property,
and a planted defect is found, shrunk and replayed (and a sound target passes the case)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tetherbed.simulator.fuzz.live.case import FuzzCase
from tetherbed.simulator.fuzz.live.profile import PROFILES
from tetherbed.simulator.fuzz.live.runner import FuzzResult, LiveTarget, fuzz, replay

#: The search stops at the first failure: this only bounds a run that finds none.
FIND_WITHIN = 200


def assert_holds_every_property(
    target: LiveTarget,
    *,
    seed: int,
    tmp_path: Path,
    record_property: pytest.RecordProperty,
) -> None:
    """Fuzz a started target for the ci profile's examples (and stop it): no failure."""
    profile = PROFILES["ci"]
    try:
        result = fuzz(target, examples=profile.examples, seed_value=seed, profile=profile,
                      report=tmp_path, progress=print)  # fmt: skip
    finally:
        target.stop()
    record_property("tetherbed_fuzz", result.to_json())
    assert result.examples >= profile.examples // 2
    assert not result.failures, result.failures[0].problems


def assert_defect_found_and_replayed(
    start: Callable[..., LiveTarget],
    defect: str,
    check_case: Callable[[FuzzCase, FuzzResult], None],
    *,
    seed: int,
    tmp_path: Path,
    record_property: pytest.RecordProperty,
) -> None:
    """`start("--defect", defect)` fails within FIND_WITHIN examples; the written case
    passes `check_case`, fails again on that target and passes on `start()`."""
    profile = PROFILES["ci"]
    target = start("--defect", defect)
    try:
        result = fuzz(target, examples=FIND_WITHIN, seed_value=seed, profile=profile,
                      report=tmp_path, progress=print)  # fmt: skip
        record_property("tetherbed_fuzz", result.to_json())
        assert result.failures, f"the fuzzer did not find {defect}"
        case = FuzzCase.read(result.case_paths[0])
        check_case(case, result)
        assert replay(target, case), f"the case did not fail again on {defect}"
    finally:
        target.stop()
    sound = start()
    try:
        assert replay(sound, case) == []
    finally:
        sound.stop()
