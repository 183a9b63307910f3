"""A conformance case: one rule of a spec, a stable id, a level, and a check.

    @case(
        "LE-files-read-crlf",
        level=Level.MUST,
        section="File Operations › FILE_READ › CRLF / LF policy",
        rule="A text read returns the bytes as they are on disk: CRLF stays CRLF.",
    )
    async def read_crlf(ctx: AgentContext) -> None:
        ...
        ctx.require(content == "a\\r\\nb\\n", f"content came back as {content!r}")

A check raises `Departure` (through `require`/`depart`) when what came back
breaks the rule; the case's level turns that into fail, warn or info.
`NotApplicable` says the rule cannot apply to this target (it does not
advertise the capability), `NoEvidence` that nothing could be judged. Any
other exception is the test bed's own error, never the target's failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.profiles import Profile


class Departure(Exception):
    """What came back departs from the rule (why, in one line)."""


class NotApplicable(Exception):
    """The rule cannot apply to this target (a capability it does not advertise)."""


class NoEvidence(Exception):
    """Nothing could be judged either way: the verdict is unknown, never a pass."""


class Context:
    """What every case gets: its evidence, the profile, and ways to give a verdict.

    Each suite hands its cases a subclass with the peers it plays (a scripted
    platform, raw agents, a native caller)."""

    def __init__(self, case: Case, evidence: Evidence, profile: Profile) -> None:
        self.case = case
        self.evidence = evidence
        self.profile = profile
        #: Extra lines for the report: what was measured (times, sizes, codes).
        self.observations: list[str] = []

    def reading(self, ambiguity: str) -> str:
        if ambiguity not in self.case.reads:
            raise AssertionError(f"{self.case.id} reads {ambiguity!r} but does not declare it")
        return self.profile.reading(ambiguity)

    def observe(self, text: str) -> None:
        self.observations.append(text)
        self.evidence.note("case", text)

    def depart(self, why: str) -> NoReturn:
        raise Departure(why)

    def require(self, condition: Any, why: str) -> None:
        if not condition:
            raise Departure(why)

    def not_applicable(self, why: str) -> NoReturn:
        raise NotApplicable(why)

    def no_evidence(self, why: str) -> NoReturn:
        raise NoEvidence(why)


Check = Callable[[Any], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Case:
    #: Stable id keyed to the spec section: LE-files-read-crlf, CD-video-ack-cap.
    id: str
    suite: str
    level: Level
    #: The spec's section, as a path of its headings.
    section: str
    #: The rule in Tetherbed's own words.
    rule: str
    check: Check
    #: The module that registered it (its family).
    family: str
    #: What the target must offer for the case to apply (suite-defined words:
    #: "shell", "computer_use", "control", "video", ...).
    needs: frozenset[str] = frozenset()
    #: Shared resources a case holds alone while it runs ("display", ...).
    locks: frozenset[str] = frozenset()
    #: Ambiguities whose reading the case depends on (profiles.py).
    reads: tuple[str, ...] = ()
    #: Seconds before the test bed gives up on the case (an error, not a fail).
    timeout: float = 60.0
    #: Runs after every other case, alone (it stops the target, for instance).
    last: bool = False
    options: dict[str, Any] = field(default_factory=dict)
