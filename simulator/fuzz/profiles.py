"""Hypothesis settings profiles for Tetherbed's fuzzers.

- `ci` (the default): bounded, derandomized and without a database, so
  `make test` takes seconds per property and fails the same way on every
  machine;
- `long`: many examples and longer state-machine runs, for `make fuzz`.

`TETHERBED_FUZZ_PROFILE=long` selects the long one (any registered name
works); `load_profile()` registers both and loads the chosen one, and the
fuzz tests' conftest calls it. Figures per profile: docs/fuzzing.md.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

#: The environment variable that names the profile.
PROFILE_VARIABLE = "TETHERBED_FUZZ_PROFILE"
CI = "ci"
LONG = "long"

_SLOW_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
#: Everything but `explain`, which re-runs a shrunk failure many times over
#: to say which lines it always reaches: minutes on a state machine.
_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)


def _profile(*, max_examples: int, stateful_step_count: int, derandomize: bool) -> settings:
    """A profile's settings: its budget and randomness, and what every profile shares
    (no deadline, no database, the failing blob printed, no `explain`, slow checks off)."""
    return settings(
        max_examples=max_examples,
        stateful_step_count=stateful_step_count,
        deadline=None,
        derandomize=derandomize,
        database=None,
        print_blob=True,
        phases=_PHASES,
        suppress_health_check=_SLOW_CHECKS,
    )


CI_SETTINGS = _profile(max_examples=60, stateful_step_count=30, derandomize=True)
LONG_SETTINGS = _profile(max_examples=1000, stateful_step_count=60, derandomize=False)


def register_profiles() -> None:
    settings.register_profile(CI, CI_SETTINGS)
    settings.register_profile(LONG, LONG_SETTINGS)


def profile_name() -> str:
    """The profile the environment names (`ci` when unset or empty): the one source of
    it for the Hypothesis profiles here and the live fuzzers' (`live/profile.py`)."""
    return os.environ.get(PROFILE_VARIABLE, CI) or CI


def load_profile() -> str:
    """Register the profiles and load the one the environment names; its name."""
    register_profiles()
    name = profile_name()
    settings.load_profile(name)
    return name


def scaled(examples: int) -> int:
    """`examples` under the ci profile, scaled to the loaded profile's budget.

    A property whose single example is expensive (a real file system, a
    child process) declares what the ci run can afford; the long profile
    multiplies it in the same ratio as its default.
    """
    ratio = settings.default.max_examples / CI_SETTINGS.max_examples
    return max(1, round(examples * ratio))
