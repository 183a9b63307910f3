"""Profiles: which reading of each spec ambiguity a run holds the target to.

Where a spec contradicts itself or leaves a choice open (docs/spec-notes.md
records each), a case that touches it reads `context.reading(NAME)` and
judges by the reading selected. Every ambiguity has a default — the lenient
reading that accepts every defensible behaviour, unless the spec is clear
enough for one — and `--profile NAME=READING` selects another. The readings in
force are listed in every report, so a result always says what it was judged
against.

An ambiguity is declared where the cases that need it live, with
`declare(...)`; the registry collects them like cases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ambiguity:
    name: str
    #: Which suites read it ("agent", "hub", ...).
    suites: tuple[str, ...]
    #: What the spec says, in a sentence or two, with the section.
    question: str
    #: reading → what a target must do under it.
    readings: Mapping[str, str]
    default: str
    #: Where docs/spec-notes.md discusses it.
    notes: str

    def __post_init__(self) -> None:
        if self.default not in self.readings:
            raise ValueError(f"ambiguity {self.name}: default {self.default!r} is not a reading")


class ProfileError(ValueError):
    """A `--profile` that names no ambiguity or no reading of it."""


_AMBIGUITIES: dict[str, Ambiguity] = {}


def declare(ambiguity: Ambiguity) -> Ambiguity:
    known = _AMBIGUITIES.get(ambiguity.name)
    if known is not None and known != ambiguity:
        raise ValueError(f"ambiguity {ambiguity.name} declared twice, differently")
    _AMBIGUITIES[ambiguity.name] = ambiguity
    return ambiguity


def ambiguities(suite: str | None = None) -> list[Ambiguity]:
    found = [a for a in _AMBIGUITIES.values() if suite is None or suite in a.suites]
    return sorted(found, key=lambda a: a.name)


@dataclass(frozen=True, slots=True)
class Profile:
    """The reading chosen for every ambiguity a suite touches."""

    readings: Mapping[str, str]

    def reading(self, name: str) -> str:
        try:
            return self.readings[name]
        except KeyError:
            raise ProfileError(f"no ambiguity {name!r} was declared") from None

    def chosen(self) -> list[tuple[Ambiguity, str]]:
        return [(_AMBIGUITIES[n], r) for n, r in sorted(self.readings.items())]

    def to_dict(self) -> dict[str, str]:
        return dict(sorted(self.readings.items()))


def parse_profile(selections: Iterable[str], suite: str) -> Profile:
    """`NAME=READING` options over the suite's defaults; refuses unknown names."""
    readings = {a.name: a.default for a in ambiguities(suite)}
    for text in selections:
        name, sep, reading = text.partition("=")
        name, reading = name.strip(), reading.strip()
        ambiguity = _AMBIGUITIES.get(name)
        if not sep or ambiguity is None or suite not in ambiguity.suites:
            known = ", ".join(a.name for a in ambiguities(suite)) or "none"
            raise ProfileError(
                f"--profile {text!r}: expected NAME=READING with NAME one of: {known}"
            )
        if reading not in ambiguity.readings:
            raise ProfileError(
                f"--profile {name}: no reading {reading!r}; "
                f"readings: {', '.join(ambiguity.readings)}"
            )
        readings[name] = reading
    return Profile(readings)
