"""The result of a run: one `CaseResult` per case, and what the run was judged against.

`RunResult.to_dict()` is `conformance.json`; `from_dict` reads one back for
`--compare`. The summary counts outcomes in a fixed order, the line every
report prints: `N pass, N fail, N warn, N info`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tetherbed.simulator.conformance.evidence import Entry
from tetherbed.simulator.conformance.levels import ORDER, Level, Outcome

FORMAT = "tetherbed-conformance/1"


@dataclass(slots=True)
class CaseResult:
    id: str
    suite: str
    family: str
    level: Level
    section: str
    rule: str
    outcome: Outcome
    #: One line: why it failed, warned, was skipped... (empty for a pass).
    reason: str = ""
    duration: float = 0.0
    evidence: list[Entry] = field(default_factory=list)
    evidence_dropped: int = 0
    observations: list[str] = field(default_factory=list)
    #: The readings the case was judged by (ambiguity → reading).
    readings: dict[str, str] = field(default_factory=dict)
    #: Listed in --expect-fail.
    expected_failure: bool = False

    @property
    def departed(self) -> bool:
        return self.outcome in (Outcome.FAIL, Outcome.WARN, Outcome.INFO)

    @property
    def label(self) -> str:
        """The verdict as the table shows it."""
        if self.expected_failure and self.outcome is Outcome.FAIL:
            return "fail (expected)"
        if self.expected_failure and self.outcome is Outcome.PASS:
            return "pass (was expected to fail)"
        return str(self.outcome)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "suite": self.suite,
            "family": self.family,
            "level": str(self.level),
            "section": self.section,
            "rule": self.rule,
            "outcome": str(self.outcome),
            "reason": self.reason,
            "duration": round(self.duration, 3),
            "expected_failure": self.expected_failure,
            "readings": dict(self.readings),
            "observations": list(self.observations),
            "evidence": [e.to_dict() for e in self.evidence],
            "evidence_dropped": self.evidence_dropped,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        return cls(
            id=str(data["id"]),
            suite=str(data.get("suite", "")),
            family=str(data.get("family", "")),
            level=Level(data.get("level", "MUST")),
            section=str(data.get("section", "")),
            rule=str(data.get("rule", "")),
            outcome=Outcome(data.get("outcome", "unknown")),
            reason=str(data.get("reason", "")),
            duration=float(data.get("duration", 0.0)),
            evidence=[Entry.from_dict(e) for e in data.get("evidence") or []],
            evidence_dropped=int(data.get("evidence_dropped", 0)),
            observations=[str(o) for o in data.get("observations") or []],
            readings={str(k): str(v) for k, v in (data.get("readings") or {}).items()},
            expected_failure=bool(data.get("expected_failure", False)),
        )


@dataclass(slots=True)
class RunResult:
    suite: str
    spec: str
    target: str
    details: dict[str, Any]
    profile: dict[str, str]
    started: str
    duration: float
    results: list[CaseResult]
    tetherbed_version: str = ""
    #: Filled by --compare: what changed since the previous run.
    comparison: dict[str, Any] | None = None
    #: Listed in --expect-fail but not a case of this suite.
    unmatched_expectations: list[str] = field(default_factory=list)

    def counts(self) -> Counter[Outcome]:
        return Counter(r.outcome for r in self.results)

    def summary_line(self) -> str:
        counts = self.counts()
        parts = [f"{counts[o]} {o}" for o in ORDER[:4]]
        parts += [f"{counts[o]} {o}" for o in ORDER[4:] if counts[o]]
        expected = sum(1 for r in self.results if r.expected_failure and r.outcome is Outcome.FAIL)
        if expected:
            parts.append(f"{expected} of the failures expected")
        return ", ".join(parts)

    def unexpected_failures(self) -> list[CaseResult]:
        return [r for r in self.results if r.outcome is Outcome.FAIL and not r.expected_failure]

    def now_passing(self) -> list[CaseResult]:
        """Listed in --expect-fail, yet passing: the list can lose them."""
        return [r for r in self.results if r.expected_failure and r.outcome is Outcome.PASS]

    def errors(self) -> list[CaseResult]:
        return [r for r in self.results if r.outcome is Outcome.ERROR]

    def to_dict(self) -> dict[str, Any]:
        counts = self.counts()
        return {
            "format": FORMAT,
            "tetherbed_version": self.tetherbed_version,
            "suite": self.suite,
            "spec": self.spec,
            "target": self.target,
            "details": self.details,
            "profile": dict(self.profile),
            "started": self.started,
            "duration": round(self.duration, 3),
            "summary": {str(o): counts[o] for o in ORDER},
            "summary_line": self.summary_line(),
            "unexpected_failures": [r.id for r in self.unexpected_failures()],
            "now_passing": [r.id for r in self.now_passing()],
            "unmatched_expectations": list(self.unmatched_expectations),
            "comparison": self.comparison,
            "cases": [r.to_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file (format {data.get('format')!r})")
        return cls(
            suite=str(data.get("suite", "")),
            spec=str(data.get("spec", "")),
            target=str(data.get("target", "")),
            details=dict(data.get("details") or {}),
            profile={str(k): str(v) for k, v in (data.get("profile") or {}).items()},
            started=str(data.get("started", "")),
            duration=float(data.get("duration", 0.0)),
            results=[CaseResult.from_dict(c) for c in data.get("cases") or []],
            tetherbed_version=str(data.get("tetherbed_version", "")),
            comparison=data.get("comparison"),
            unmatched_expectations=list(data.get("unmatched_expectations") or []),
        )
