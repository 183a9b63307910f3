"""Who owns a session when a second agent claims it: a pure decision."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

from tetherbed.hub.config import OwnershipPolicy


class Verdict(Enum):
    #: No owner yet: the newcomer owns the session.
    CLAIM = auto()
    #: The newcomer takes over; the old owner is revoked and closed with 4427.
    TAKEOVER = auto()
    #: The newcomer is closed with 4427; the owner is untouched.
    REJECT = auto()
    #: Silent last-write-wins (the broken v0 behaviour): the newcomer replaces
    #: the owner, and the old connection is neither told nor closed.
    REPLACE_SILENTLY = auto()


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    #: Send SESSION_REVOKED{another_shim_connected} to the old owner first.
    revoke_old: bool = False


def decide(policy: OwnershipPolicy, owner_machine: str | None, new_machine: str) -> Decision:
    if owner_machine is None:
        return Decision(Verdict.CLAIM)
    if policy is OwnershipPolicy.LAST_WRITE_WINS:
        return Decision(Verdict.REPLACE_SILENTLY)
    if policy is OwnershipPolicy.EVICT_OLD:
        return Decision(Verdict.TAKEOVER, revoke_old=owner_machine == new_machine)
    if owner_machine == new_machine:
        return Decision(Verdict.TAKEOVER, revoke_old=True)
    return Decision(Verdict.REJECT)
