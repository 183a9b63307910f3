"""The hub's core, real agent protocols and clients, as a Hypothesis state machine.

The invariants (simulator/fuzz/stateful/hub_machine.py) hold for the reference
hub under the loaded profile; each planted hub defect breaks the invariant
meant to catch it, under a fixed derandomized search, and the shrunk run is
printed (`pytest -s` shows it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from hypothesis import settings

from tests.conftest import FUZZ_FIGURES
from tetherbed.simulator.fuzz.stateful import (
    CAPACITY,
    DEADLINE,
    EXACTLY_ONE_ANSWER,
    ONE_OWNER,
    HubMachine,
    hunt,
)

RecordProperty = Callable[[str, object], None]


class ReferenceHub(HubMachine):
    """The reference hub, no defect: every invariant must hold."""


def test_the_reference_hub_keeps_every_invariant(record_property: RecordProperty) -> None:
    started = time.monotonic()
    finding = hunt(ReferenceHub, settings.default)
    elapsed = time.monotonic() - started
    figures = (
        f"hub state machine: {settings.default.max_examples} runs of up to "
        f"{settings.default.stateful_step_count} steps in {elapsed:.1f} s"
    )
    print(figures)
    record_property(FUZZ_FIGURES, figures)
    assert finding is None, finding.report()


class SmallTopology(HubMachine):
    """One session, one machine's control connection: a smaller space, so the
    search reaches the defect and the shrinker a minimal run in seconds."""

    SESSIONS = ("s1",)
    MACHINES = ("m1", "m2")


#: Planted hub defect -> the invariants that may catch it (the first one the
#: shrunk run breaks is reported).
PLANTED = {
    # The slot leak: an issued request waits for its answer forever.
    "no_request_deadline": {DEADLINE, EXACTLY_ONE_ANSWER},
    # A same-machine takeover leaves the old connection serving.
    "takeover_unlabelled": {ONE_OWNER},
    # An older switch (the conformance suite's): queued requests are pumped
    # past the agent's free slots.
    "ignore_capacity": {CAPACITY},
}


@pytest.mark.parametrize("defect", sorted(PLANTED))
def test_the_machine_finds_the_planted_hub_defect(
    defect: str, record_property: RecordProperty
) -> None:
    machine = type(f"Planted_{defect}", (SmallTopology,), {"HUB_DEFECTS": frozenset({defect})})
    search = settings(settings.default, max_examples=300, derandomize=True, database=None)
    finding = hunt(machine, search)
    assert finding is not None, f"{defect}: no invariant broke in 300 runs"
    print(f"\n{defect} -> {finding.invariant}, shrunk to:\n{finding.report()}")
    assert finding.invariant in PLANTED[defect]
    steps = sum(
        1
        for line in finding.steps.splitlines()
        if line.startswith("state.") and line != "state.teardown()"
    )
    record_property(
        FUZZ_FIGURES, f"planted hub {defect}: found as {finding.invariant}, shrunk to {steps} steps"
    )
