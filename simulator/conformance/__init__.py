"""The conformance suite: cases keyed to the specs, run against any agent, hub or adapter.

`tetherbed conform agent|hub|native` (cli.py) runs a suite's cases against a
target given through the target contract (simulator/targets). The framework
— the case registry, the runner, evidence of what crossed the wire,
profiles for the specs' ambiguities, the report writers — is here; each suite
is a package (`agent/`, `hub/`, `native/`) whose modules are the case
families. docs/conformance.md says how to run it and how to add a family.
"""

from tetherbed.simulator.conformance.case import (
    Case,
    Context,
    Departure,
    NoEvidence,
    NotApplicable,
)
from tetherbed.simulator.conformance.levels import Level, Outcome
from tetherbed.simulator.conformance.profiles import Ambiguity, declare
from tetherbed.simulator.conformance.registry import Suite, case, register_suite

__all__ = [
    "Ambiguity",
    "Case",
    "Context",
    "Departure",
    "Level",
    "NoEvidence",
    "NotApplicable",
    "Outcome",
    "Suite",
    "case",
    "declare",
    "register_suite",
]
