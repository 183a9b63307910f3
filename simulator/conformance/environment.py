"""What a suite provides to run its cases on one target.

A suite's `environment(args)` returns an `Environment`: it starts what the
whole run shares (the hub under test, an Xvfb display, a device registry),
says whether a case applies to this target, and builds each case's
`Context` — the peers the case plays, recording into the case's evidence —
and tears it down after the case, whatever happened, by PID.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from tetherbed.simulator.conformance.case import Case, Context
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.profiles import Profile


class TargetUnavailable(RuntimeError):
    """The target could not be brought up: nothing was judged (exit status 2)."""


class Environment(Protocol):
    #: One line: what is under test.
    description: str
    #: What the report lists about the target (its command, URL, options).
    details: dict[str, Any]

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def applicable(self, case: Case) -> str | None:
        """None when the case applies; else why it does not (it is skipped)."""
        ...

    def context(
        self, case: Case, evidence: Evidence, profile: Profile
    ) -> AbstractAsyncContextManager[Context]: ...
