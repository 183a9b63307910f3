"""Stateful fuzzing: Hypothesis state machines over the sans-I/O cores, in virtual time."""

from tetherbed.simulator.fuzz.stateful.hub_machine import HubMachine, Peer
from tetherbed.simulator.fuzz.stateful.hunt import Finding, hunt
from tetherbed.simulator.fuzz.stateful.wire_ledger import (
    AT_MOST_ONCE,
    CAPACITY,
    DEADLINE,
    EXACTLY_ONE_ANSWER,
    ONE_OWNER,
    REVOKED,
    TYPED,
    InvariantViolated,
    WireLedger,
)

__all__ = [
    "AT_MOST_ONCE",
    "CAPACITY",
    "DEADLINE",
    "EXACTLY_ONE_ANSWER",
    "ONE_OWNER",
    "REVOKED",
    "TYPED",
    "Finding",
    "HubMachine",
    "InvariantViolated",
    "Peer",
    "WireLedger",
    "hunt",
]
