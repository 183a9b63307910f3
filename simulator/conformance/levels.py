"""Levels of a rule and outcomes of a case: what a departure costs.

A case checks one rule of a spec. The rule's level decides what a departure
from it means for the run: a MUST (or MUST NOT, or a rule the spec states as a
plain fact: a limit, a code, a format) fails it, a SHOULD warns, and a MAY or
something the spec does not require but a user wants to know is reported as
information. A case that could not apply to the target (it does not advertise
the capability) is `skip`; one that gathered no evidence either way is
`unknown`, never a pass; one where the test bed itself broke is `error`.
"""

from __future__ import annotations

from enum import StrEnum


class Level(StrEnum):
    MUST = "MUST"
    SHOULD = "SHOULD"
    #: "MAY", and behaviour the spec does not require but a user wants to know.
    INFO = "INFO"


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    INFO = "info"
    SKIP = "skip"
    UNKNOWN = "unknown"
    ERROR = "error"


#: What a departure from a rule of each level is reported as.
DEPARTURE: dict[Level, Outcome] = {
    Level.MUST: Outcome.FAIL,
    Level.SHOULD: Outcome.WARN,
    Level.INFO: Outcome.INFO,
}

#: The order outcomes are counted and listed in (the summary line's order).
ORDER: tuple[Outcome, ...] = (
    Outcome.PASS,
    Outcome.FAIL,
    Outcome.WARN,
    Outcome.INFO,
    Outcome.SKIP,
    Outcome.UNKNOWN,
    Outcome.ERROR,
)
