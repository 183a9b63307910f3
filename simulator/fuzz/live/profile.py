"""How long live fuzzing runs: the bounded profile of `make test`, the long one of `make fuzz`.

`TETHERBED_FUZZ_PROFILE` picks it (`ci`, the default, or `long`); `--examples`
overrides the number of examples.
"""

from __future__ import annotations

from dataclasses import dataclass

from tetherbed.simulator.fuzz.profiles import PROFILE_VARIABLE, profile_name


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    #: Examples (generated sequences) per target.
    examples: int
    #: Seconds the shrinker may spend on live round trips after the first failure.
    shrink_seconds: float
    #: Steps per sequence, at most.
    max_steps: int


PROFILES = {
    "ci": Profile("ci", examples=40, shrink_seconds=20.0, max_steps=4),
    "long": Profile("long", examples=500, shrink_seconds=120.0, max_steps=8),
}


def current(name: str | None = None) -> Profile:
    """The profile named, else the one `TETHERBED_FUZZ_PROFILE` names (`ci` by default)."""
    chosen = name or profile_name()
    try:
        return PROFILES[chosen]
    except KeyError:
        raise ValueError(
            f"{PROFILE_VARIABLE}={chosen!r}: one of {', '.join(sorted(PROFILES))}"
        ) from None
