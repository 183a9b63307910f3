"""Running cases: in parallel, each in its own context, each bounded in time.

Independent cases run at once (`jobs` at a time), each on its own peers — its
own agent process and scripted platform, its own sessions on the hub, its own
adapter process — so one case's target state never leaks into another's.
Cases that hold a shared resource (`locks`, e.g. the one X display) take it
in turn; cases marked `last` run alone after all others (they stop the
target). The cases that may wait longest start first. A case's verdict comes
only from its check: a departure at its level, not applicable, no evidence,
or the test bed's own error.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Sequence

from tetherbed.simulator.conformance.case import Case, Departure, NoEvidence, NotApplicable
from tetherbed.simulator.conformance.environment import Environment
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.levels import DEPARTURE, Outcome
from tetherbed.simulator.conformance.profiles import Profile
from tetherbed.simulator.conformance.results import CaseResult

OnResult = Callable[[CaseResult], None]


async def run_cases(
    environment: Environment,
    cases: Sequence[Case],
    profile: Profile,
    *,
    jobs: int,
    on_result: OnResult | None = None,
) -> list[CaseResult]:
    """Every case's result, in the order of `cases`."""
    slots = asyncio.Semaphore(max(jobs, 1))
    locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
    results: dict[str, CaseResult] = {}

    async def one(case: Case) -> None:
        reason = environment.applicable(case)
        if reason is not None:
            result = _result(
                case,
                profile,
                outcome=Outcome.SKIP,
                reason=reason,
                duration=0.0,
                evidence=Evidence(),
                observations=[],
            )
        else:
            async with slots, contextlib.AsyncExitStack() as held:
                for name in sorted(case.locks):
                    await held.enter_async_context(locks[name])
                result = await run_one(environment, case, profile)
        results[case.id] = result
        if on_result is not None:
            on_result(result)

    # The longest first (a case's timeout says how long it may wait on the
    # spec's own timers): the run then ends soon after its longest case.
    first = sorted((c for c in cases if not c.last), key=lambda c: -c.timeout)
    await asyncio.gather(*(one(c) for c in first))
    for case in (c for c in cases if c.last):
        await one(case)
    return [results[c.id] for c in cases]


async def run_one(environment: Environment, case: Case, profile: Profile) -> CaseResult:
    evidence = Evidence()
    observations: list[str] = []
    started = time.monotonic()
    outcome, reason = Outcome.PASS, ""
    budget: asyncio.Timeout | None = None
    try:
        async with asyncio.timeout(case.timeout) as budget:
            async with environment.context(case, evidence, profile) as context:
                observations = context.observations
                await case.check(context)
    except Departure as exc:
        outcome, reason = DEPARTURE[case.level], str(exc)
    except NotApplicable as exc:
        outcome, reason = Outcome.SKIP, str(exc)
    except NoEvidence as exc:
        outcome, reason = Outcome.UNKNOWN, f"no evidence: {exc}"
    except TimeoutError as exc:
        outcome = Outcome.ERROR
        if budget is not None and budget.expired():
            reason = f"the case did not finish within {case.timeout:g} s (test bed error)"
        else:
            reason = f"test bed error: a wait timed out without a verdict: {exc}"
            evidence.note("test bed", traceback.format_exc(limit=8))
    except Exception as exc:
        outcome = Outcome.ERROR
        reason = f"test bed error: {type(exc).__name__}: {exc}"
        evidence.note("test bed", traceback.format_exc(limit=8))
    return _result(
        case,
        profile,
        outcome=outcome,
        reason=reason,
        duration=time.monotonic() - started,
        evidence=evidence,
        observations=observations,
    )


def _result(
    case: Case,
    profile: Profile,
    *,
    outcome: Outcome,
    reason: str,
    duration: float,
    evidence: Evidence,
    observations: list[str],
) -> CaseResult:
    return CaseResult(
        id=case.id,
        suite=case.suite,
        family=case.family,
        level=case.level,
        section=case.section,
        rule=case.rule,
        outcome=outcome,
        reason=" ".join(reason.split())[:500],
        duration=duration,
        evidence=list(evidence.entries),
        evidence_dropped=evidence.dropped,
        observations=list(observations),
        readings={name: profile.reading(name) for name in case.reads},
    )
