"""What a checker returns, and the collector that builds it.

A verdict is one of four: `pass` (the evidence shows the property held),
`fail` (it shows a violation), `unknown` (there is no evidence either way —
nothing of the kind happened, or what happened cannot be matched up; never a
pass) and `error` (the checker itself crashed). It names the records that
broke the property or left it undecided, so that a person (or the timeline)
can jump straight to them; the summary says in one line what went wrong.
Evidence is capped so that a badly broken 10k-record run still yields a
report one can open, while the summary keeps the full count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tetherbed.simulator.checkers.evidence.records import record_dict
from tetherbed.simulator.history import Record

#: Violations whose records are kept as evidence; the rest are only counted.
EVIDENCE_LIMIT = 50
#: Violations quoted in the one-line summary.
SUMMARY_LIMIT = 3

Status = Literal["pass", "fail", "unknown", "error"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "unknown", "error")


@dataclass(frozen=True, slots=True)
class Verdict:
    """One checker's judgement of one history.

    `evidence` holds one dict per offending record: the record as stored
    (index, time, process, type, f, value, session, machine, req) plus `why`
    (the violation, in words), `violation` (its number within this verdict,
    so records of one violation can be grouped) and `role` (what this record
    is in the violation).
    """

    name: str
    #: pass, fail, unknown or error; True and False are read as pass and fail.
    status: Status
    summary: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    #: Set when the checker itself crashed: the history was not judged, which
    #: is the test bed's problem, never a failure of the system under test.
    error: str | None = None

    @classmethod
    def crashed(cls, name: str, exc: BaseException) -> Verdict:
        error = f"{type(exc).__name__}: {exc}"
        return cls(name, "error", f"checker crashed: {error}", [], error)

    def __post_init__(self) -> None:
        status: Any = self.status
        if isinstance(status, bool):
            status = "pass" if status else ("error" if self.error is not None else "fail")
            object.__setattr__(self, "status", status)
        elif status not in STATUSES:
            raise ValueError(f"a verdict is one of {STATUSES}, not {status!r}")
        if status == "error" and self.error is None:
            object.__setattr__(self, "error", self.summary or "the checker crashed")

    @property
    def ok(self) -> bool:
        """The evidence shows the property held (unknown is not ok)."""
        return self.status == "pass"

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    @property
    def unknown(self) -> bool:
        return self.status == "unknown"

    def to_dict(self) -> dict[str, Any]:
        data = {
            "name": self.name,
            "status": self.status,
            "ok": self.ok,
            "summary": self.summary,
            "evidence": list(self.evidence),
        }
        if self.error is not None:
            data["error"] = self.error
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        status = data.get("status")
        error = data.get("error")
        return cls(
            name=str(data.get("name", "")),
            status=status if status in STATUSES else bool(data.get("ok", False)),
            summary=str(data.get("summary", "")),
            evidence=list(data.get("evidence") or []),
            error=None if error is None else str(error),
        )

    def evidence_indexes(self) -> list[int]:
        """The history indexes this verdict blames, sorted and unique."""
        found = {e["index"] for e in self.evidence if isinstance(e.get("index"), int)}
        return sorted(found)


#: A pure function of the history, `check(history, **options) -> Verdict`;
#: each checker declares its options as keyword-only parameters.
Checker = Callable[..., Verdict]


class Findings:
    """Collects violations for one checker and turns them into a Verdict."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self._evidence: list[dict[str, Any]] = []
        self._headlines: list[str] = []
        self._undecided: list[str] = []
        self._undecided_evidence: list[dict[str, Any]] = []

    def add(self, why: str, *records: tuple[Record | None, str]) -> None:
        """One violation: its explanation and the records, each with its role."""
        number = self.count
        self.count += 1
        if len(self._headlines) < SUMMARY_LIMIT:
            self._headlines.append(why)
        if number >= EVIDENCE_LIMIT:
            return
        seen: set[int] = set()
        for record, role in records:
            if record is None or id(record) in seen:
                continue
            seen.add(id(record))
            entry = record_dict(record)
            entry.update(why=why, violation=number, role=role)
            self._evidence.append(entry)

    def undecided(self, why: str, *records: tuple[Record | None, str]) -> None:
        """Something that cannot be judged either way: makes the verdict unknown
        unless a violation is also found."""
        self._undecided.append(why)
        if len(self._undecided_evidence) >= EVIDENCE_LIMIT:
            return
        for record, role in records:
            if record is not None:
                entry = record_dict(record)
                entry.update(why=why, violation=None, role=role)
                self._undecided_evidence.append(entry)

    def verdict(self, ok_summary: str, *, no_evidence: str | None = None) -> Verdict:
        """fail with violations; else unknown when `no_evidence` says why there
        was nothing to judge, or when something was undecided; else pass."""
        if not self.count:
            if no_evidence is not None:
                return Verdict(self.name, "unknown", f"no evidence: {no_evidence}", [])
            if self._undecided:
                count = len(self._undecided)
                summary = f"unknown: {count} undecided: " + "; ".join(
                    self._undecided[:SUMMARY_LIMIT]
                )
                if count > SUMMARY_LIMIT:
                    summary += f"; and {count - SUMMARY_LIMIT} more"
                return Verdict(self.name, "unknown", summary, self._undecided_evidence)
            return Verdict(self.name, "pass", ok_summary, [])
        noun = "violation" if self.count == 1 else "violations"
        summary = f"{self.count} {noun}: " + "; ".join(self._headlines)
        if self.count > SUMMARY_LIMIT:
            summary += f"; and {self.count - SUMMARY_LIMIT} more"
        if self.count > EVIDENCE_LIMIT:
            summary += f" (evidence lists the first {EVIDENCE_LIMIT})"
        return Verdict(self.name, "fail", summary, self._evidence)
