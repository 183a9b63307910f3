"""Run a state machine until an invariant breaks, and keep the shrunk run.

For proving that the machine finds a planted bug: `hunt` returns the
violation (with the invariant's name) and the minimal run Hypothesis shrank
it to, as the readable steps it prints, instead of failing the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import settings as Settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from tetherbed.simulator.fuzz.stateful.wire_ledger import InvariantViolated


@dataclass(frozen=True, slots=True)
class Finding:
    violation: InvariantViolated
    #: The shrunk failing run, one step per line, as Hypothesis reports it.
    steps: str

    @property
    def invariant(self) -> str:
        return self.violation.invariant

    def report(self) -> str:
        return f"{self.violation}\n{self.steps}"


def hunt(machine: type[RuleBasedStateMachine], settings: Settings) -> Finding | None:
    """Run `machine` under `settings`; the shrunk invariant violation, or None.

    Hypothesis stops at the first distinct failure it shrinks (not a group of
    them). Anything else that goes wrong (a crash in the hub, a loop) propagates.
    """
    try:
        run_state_machine_as_test(machine, settings=Settings(settings, report_multiple_bugs=False))
    except InvariantViolated as violation:
        notes = getattr(violation, "__notes__", [])
        return Finding(violation, "\n".join(_steps(notes)))
    return None


def _steps(notes: list[str]) -> list[str]:
    """The run's steps, without the invariant checks repeated after each."""
    lines: list[str] = []
    for note in notes:
        for line in note.splitlines():
            stripped = line.strip()
            if stripped.startswith("state.") and stripped.endswith("()") and "(" in stripped:
                name = stripped[len("state.") : -2]
                if name.isidentifier() and name in _INVARIANT_NAMES:
                    continue
            lines.append(line)
    return lines


_INVARIANT_NAMES = frozenset(
    {"at_most_one_owner", "no_request_outlives_its_deadline", "capacity_not_leaked"}
)
