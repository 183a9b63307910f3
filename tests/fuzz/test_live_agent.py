"""Live fuzzing of Tetherbed's agent: every frame answered once, the connection usable after."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetherbed.simulator.fuzz.live.agent import AgentFuzzTarget
from tetherbed.simulator.fuzz.live.profile import PROFILES
from tetherbed.simulator.fuzz.live.runner import fuzz
from tetherbed.simulator.targets import AgentTarget

#: Fewer than the other targets: each example waits on a real agent's file system.
EXAMPLES = 20


def test_the_reference_agent_holds_every_property(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    profile = PROFILES["ci"]
    target = AgentFuzzTarget(AgentTarget.reference(), profile=profile)
    target.start()
    try:
        result = fuzz(target, examples=EXAMPLES, seed_value=11, profile=profile, report=tmp_path)
    finally:
        target.stop()
    record_property("tetherbed_fuzz", result.to_json())
    assert result.examples >= EXAMPLES // 2
    assert not result.failures, result.failures[0].problems
