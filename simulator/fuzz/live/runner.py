"""Hypothesis against a running process: generate, send, judge, shrink, write the case.

A `LiveTarget` knows how to start what it fuzzes, which sequences of messages to
draw (`steps()`), and how to send one sequence and judge what came back
(`check(steps)`: the problems found, none when every property held). `fuzz()` runs
Hypothesis over it with a fixed seed and a bounded number of examples; a failing
sequence is shrunk by Hypothesis like any other counterexample and written as a
replayable case (`case.py`).

Live shrinking costs real round trips, and a crash costs a restart, so shrinking
has a time budget: past it, an example not seen before counts as passing (it is not
run), the shrinker stops making progress, and the smallest failure found so far is
the one reported. Results are remembered by the sequence's bytes, so Hypothesis's
final replay of that failure does not need the target again; `--replay` re-runs it
live.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tetherbed.simulator.fuzz.live.case import FuzzCase
from tetherbed.simulator.fuzz.live.profile import Profile


class TargetGone(RuntimeError):
    """The target stopped and cannot be restarted (a hub at a URL): nothing more is judged."""


class LiveTarget(Protocol):
    #: hub, agent or native.
    kind: str
    #: One line: what is under test.
    description: str

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def steps(self) -> st.SearchStrategy[list[Any]]: ...

    def check(self, steps: Sequence[Any]) -> list[str]:
        """Send `steps` and judge; the problems found (empty: every property held).
        Raises TargetGone when the target is down for good."""
        ...

    def step_to_json(self, step: Any) -> dict[str, Any]: ...

    def step_from_json(self, raw: dict[str, Any]) -> Any: ...

    def scenario(self, steps: Sequence[Any]) -> str | None:
        """The failing sequence as a scenario (YAML), when the target can express one."""
        ...


class LiveFailure(AssertionError):
    """A property did not hold for one sequence."""


@dataclass(slots=True)
class FuzzResult:
    target: str
    description: str
    examples: int
    seconds: float
    seed: int
    failures: list[FuzzCase] = field(default_factory=list)
    case_paths: list[Path] = field(default_factory=list)
    gone: str | None = None
    #: Steps of the first failing sequence, before shrinking.
    first_failure_steps: int | None = None

    def summary(self) -> str:
        verdict = "no failure" if not self.failures else f"{len(self.failures)} failure"
        line = (
            f"fuzz {self.target}: {self.examples} examples in {self.seconds:.1f} s "
            f"(seed {self.seed}) against {self.description}: {verdict}"
        )
        if self.gone:
            line += f" (target gone: {self.gone})"
        return line

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "description": self.description,
            "examples": self.examples,
            "seconds": round(self.seconds, 3),
            "seed": self.seed,
            "failures": [c.to_json() for c in self.failures],
            "cases": [str(p) for p in self.case_paths],
            "gone": self.gone,
            "first_failure_steps": self.first_failure_steps,
        }


def _key(target: LiveTarget, steps: Sequence[Any]) -> str:
    return json.dumps([target.step_to_json(s) for s in steps], sort_keys=True)


def fuzz(
    target: LiveTarget,
    *,
    examples: int,
    seed_value: int,
    profile: Profile,
    report: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> FuzzResult:
    """Run `examples` generated sequences against `target` (already started)."""
    outcomes: dict[str, list[str]] = {}
    counters = {"run": 0}
    state: dict[str, Any] = {"first_failure": None, "shrink_deadline": None, "gone": None}
    clock = time.monotonic()

    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        print_blob=False,
        report_multiple_bugs=False,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )
    @seed(seed_value)
    @given(target.steps())
    def prop(steps: list[Any]) -> None:
        key = _key(target, steps)
        known = outcomes.get(key)
        if known is None:
            deadline = state["shrink_deadline"]
            if state["gone"] is not None or (deadline is not None and time.monotonic() > deadline):
                return  # past the budget (or no target left): not run, so not a failure
            counters["run"] += 1
            try:
                known = target.check(steps)
            except TargetGone as exc:
                state["gone"] = str(exc)
                return
            except Exception as exc:  # the harness could not judge: shown, and shrunk too
                known = [f"the fuzzer could not judge the answers: {type(exc).__name__}: {exc}"]
            outcomes[key] = known
            if progress is not None and counters["run"] % 25 == 0:
                progress(f"fuzz {target.kind}: {counters['run']} examples")
        if known:
            if state["first_failure"] is None:
                state["first_failure"] = key
                state["first_failure_steps"] = len(steps)
                state["shrink_deadline"] = time.monotonic() + profile.shrink_seconds
                if progress is not None:
                    progress(f"fuzz {target.kind}: a failure, shrinking: {known[0]}")
            state["last_failure"] = (steps, known)
            raise LiveFailure("; ".join(known))

    result = FuzzResult(target.kind, target.description, 0, 0.0, seed_value)
    try:
        prop()
    except LiveFailure:
        steps, problems = state["last_failure"]
        case = FuzzCase(
            target=target.kind,
            description=target.description,
            seed=seed_value,
            problems=list(problems),
            steps=[target.step_to_json(s) for s in steps],
        )
        result.failures.append(case)
        if report is not None:
            path = case.write(report, scenario=target.scenario(steps))
            result.case_paths.append(path)
    result.examples = counters["run"]
    result.seconds = time.monotonic() - clock
    result.gone = state["gone"]
    result.first_failure_steps = state.get("first_failure_steps")
    if report is not None:
        report.mkdir(parents=True, exist_ok=True)
        (report / f"fuzz-{target.kind}.json").write_text(
            json.dumps(result.to_json(), indent=1) + "\n", encoding="utf-8"
        )
    return result


def replay(target: LiveTarget, case: FuzzCase) -> list[str]:
    """Run a written case once against `target`; the problems found now."""
    if case.target != target.kind:
        raise ValueError(f"the case is for `fuzz {case.target}`, not `fuzz {target.kind}`")
    steps = [target.step_from_json(raw) for raw in case.steps]
    return target.check(steps)
