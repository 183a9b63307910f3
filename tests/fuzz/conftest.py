"""The fuzz tests run under a Hypothesis profile: `ci` (bounded, the default)
or `long` (`make fuzz`), chosen by TETHERBED_FUZZ_PROFILE
(simulator/fuzz/profiles.py)."""

from __future__ import annotations

import pytest
from hypothesis import settings

from tetherbed.simulator.fuzz.profiles import load_profile

PROFILE = load_profile()


def pytest_report_header(config: pytest.Config) -> str:
    return (
        f"tetherbed fuzz profile: {PROFILE} (max_examples={settings.default.max_examples}, "
        f"stateful_step_count={settings.default.stateful_step_count})"
    )
