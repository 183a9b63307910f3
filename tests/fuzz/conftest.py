"""The fuzz tests run under a Hypothesis profile: `ci` (bounded, the default)
or `long` (`make fuzz`), chosen by TETHERBED_FUZZ_PROFILE
(simulator/fuzz/profiles.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from tetherbed.simulator.fuzz.profiles import load_profile

PROFILE = load_profile()
#: A long run's bound on one property (`make fuzz`).
LONG_TIMEOUT_SECONDS = 3600


def pytest_report_header(config: pytest.Config) -> str:
    return (
        f"tetherbed fuzz profile: {PROFILE} (max_examples={settings.default.max_examples}, "
        f"stateful_step_count={settings.default.stateful_step_count})"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under a long profile a property runs for minutes: past the suite's
    per-test timeout (pyproject.toml), which is for hangs, not for fuzzing."""
    if PROFILE == "ci":
        return
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.timeout(LONG_TIMEOUT_SECONDS))
