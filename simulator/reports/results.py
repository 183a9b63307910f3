"""results.json: every run's outcome, machine-readable, and how to replay it.

One file per invocation of the runner. Runs are sorted by (scenario, backend,
seed, file) and keys are sorted, so the same runs always give the same bytes
whatever order parallel workers finished in; no wall-clock timestamps are
written for the same reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tetherbed.simulator.checkers.verdict import Verdict

RunVerdict = Literal["pass", "fail", "error", "not_applicable"]
FORMAT = "tetherbed-results/1"


@dataclass(slots=True)
class RunResult:
    """One scenario run on one backend with one seed."""

    scenario: str
    file: str
    backend: str
    seed: int | None
    verdict: RunVerdict
    seconds: float
    verdicts: list[Verdict] = field(default_factory=list)
    #: Why the run could not be judged (the runner's error); None when it ran.
    error: str | None = None
    #: The exact shell command that replays this run.
    replay: str = ""
    history_path: str | None = None
    #: Reference-only steps not applicable to the target (third-party parts).
    not_applicable: int = 0
    #: Whether unknown verdicts counted as failures (`--strict`).
    strict: bool = False
    #: The expect or assert step that did not hold (the run failed there).
    failure: str | None = None
    #: Why the scenario does not apply to the target (verdict not_applicable).
    inapplicable: str | None = None

    @property
    def failed_checkers(self) -> list[Verdict]:
        """Checkers that judged the history and found it broken (with `strict`,
        also those that could not decide)."""
        return sorted(
            (v for v in self.verdicts if v.failed or (self.strict and v.unknown)),
            key=lambda v: v.name,
        )

    @property
    def crashed_checkers(self) -> list[Verdict]:
        return sorted((v for v in self.verdicts if v.error is not None), key=lambda v: v.name)

    @property
    def unknown_checkers(self) -> list[Verdict]:
        return sorted((v for v in self.verdicts if v.unknown), key=lambda v: v.name)

    def error_text(self) -> str:
        """Why the run could not be judged: the runner's error, or the checkers that crashed."""
        if self.error:
            return self.error
        crashed = [f"checker {v.name} crashed: {v.error}" for v in self.crashed_checkers]
        return "; ".join(crashed) or "runner error"

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "file": self.file,
            "backend": self.backend,
            "seed": self.seed,
            "verdict": self.verdict,
            "seconds": round(float(self.seconds), 3),
            "verdicts": [v.to_dict() for v in sorted(self.verdicts, key=lambda v: v.name)],
            "error": self.error,
            "failure": self.failure,
            "replay": self.replay,
            "history_path": self.history_path,
            "not_applicable": self.not_applicable,
            "strict": self.strict,
            "inapplicable": self.inapplicable,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        return cls(
            scenario=str(data["scenario"]),
            file=str(data.get("file", "")),
            backend=str(data.get("backend", "")),
            seed=data.get("seed"),
            verdict=data.get("verdict", "error"),
            seconds=float(data.get("seconds", 0.0)),
            verdicts=[Verdict.from_dict(v) for v in data.get("verdicts") or []],
            error=data.get("error"),
            failure=data.get("failure"),
            replay=str(data.get("replay", "")),
            history_path=data.get("history_path"),
            not_applicable=int(data.get("not_applicable", 0)),
            strict=bool(data.get("strict", False)),
            inapplicable=data.get("inapplicable"),
        )


def overall_verdict(
    verdicts: Iterable[Verdict],
    error: str | None = None,
    *,
    failure: str | None = None,
    strict: bool = False,
    inapplicable: str | None = None,
) -> RunVerdict:
    """error when the run could not be judged (the runner or a checker broke),
    fail when an expect/assert step did not hold or a checker found the history
    broken, not_applicable when the scenario turned out not to apply to the
    target (`inapplicable` says why: neither a pass nor a failure, and checkers
    without evidence do not fail it under `strict`), fail under `strict` when a
    checker could not decide (unknown), else pass."""
    verdicts = list(verdicts)
    if error is not None or any(v.error is not None for v in verdicts):
        return "error"
    if failure is not None or any(v.failed for v in verdicts):
        return "fail"
    if inapplicable is not None:
        return "not_applicable"
    if strict and any(v.unknown for v in verdicts):
        return "fail"
    return "pass"


def sort_key(run: RunResult) -> tuple[str, str, int, str, str]:
    """Stable order for every report: scenario, backend, seed, file."""
    seed = run.seed if isinstance(run.seed, int) else -1
    return (run.scenario, run.backend, seed, str(run.seed), run.file)


def counts(runs: Sequence[RunResult]) -> dict[str, int]:
    found = {"runs": len(runs), "pass": 0, "fail": 0, "error": 0}
    for run in runs:
        if run.verdict in found:
            found[run.verdict] += 1
    inapplicable = sum(1 for run in runs if run.verdict == "not_applicable")
    if inapplicable:  # only then: the summary of runs that all applied stays as it was
        found["not_applicable"] = inapplicable
    return found


def results_document(runs: Sequence[RunResult]) -> dict[str, Any]:
    ordered = sorted(runs, key=sort_key)
    return {
        "format": FORMAT,
        "summary": counts(ordered),
        "runs": [run.to_dict() for run in ordered],
    }


def write_results(path: Path | str, runs: Sequence[RunResult]) -> None:
    text = json.dumps(
        results_document(runs), indent=2, sort_keys=True, ensure_ascii=False, default=str
    )
    Path(path).write_text(text + "\n", encoding="utf-8")


def read_results(path: Path | str) -> list[RunResult]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [RunResult.from_dict(run) for run in data.get("runs", [])]
