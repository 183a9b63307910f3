"""Live fuzzing of the native adapter: Tetherbed's own passes, the planted defect is found.

`accept_over_deep` makes the adapter parse a request nested past the spec's depth of
32 instead of refusing it; the fuzzer must find it within the bounded examples,
shrink it to one line just past the limit, and the written case must replay.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.live_runs import assert_defect_found_and_replayed, assert_holds_every_property
from tetherbed.simulator.conformance.native.environment import REFERENCE
from tetherbed.simulator.fuzz.live.case import FuzzCase
from tetherbed.simulator.fuzz.live.native import NativeFuzzTarget
from tetherbed.simulator.fuzz.live.profile import PROFILES
from tetherbed.simulator.fuzz.live.runner import FuzzResult
from tetherbed.simulator.fuzz.strategies import crossdesk

SEED = 20261202


def _target(*extra: str) -> NativeFuzzTarget:
    target = NativeFuzzTarget([*REFERENCE, *extra], profile=PROFILES["ci"])
    target.start()
    return target


def test_the_reference_adapter_holds_every_property(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    assert_holds_every_property(
        _target(), seed=SEED, tmp_path=tmp_path, record_property=record_property
    )


def test_an_adapter_that_parses_over_deep_requests_is_found_and_shrunk(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    def check_case(case: FuzzCase, result: FuzzResult) -> None:
        assert "NESTING_TOO_DEEP" in " ".join(case.problems)
        # Shrunk: one line, nested just past the limit.
        assert len(case.steps) == 1
        line = crossdesk.RequestLine.from_json(case.steps[0])
        assert line.data.count(b"[") <= 40

    assert_defect_found_and_replayed(
        _target,
        "accept_over_deep",
        check_case,
        seed=SEED,
        tmp_path=tmp_path,
        record_property=record_property,
    )
