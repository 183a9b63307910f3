"""no_reconnect_after_fatal: a fatally closed agent stays away until restarted.

Why: close codes 4426-4429 and SESSION_REVOKED mean "do not come back without
an operator" — a version mismatch that reconnecting cannot fix, a session
another shim took over, a revoked session whose token would just get 401, a
platform going down. An agent that reconnects anyway produces the hot
reconnect storms and takeover ping-pong the spec forbids.

Per agent process, in time order, any of these makes the agent "fatally
closed":

- `fatal_close` (any code);
- `revoked` (SESSION_REVOKED received);
- `lost` with a code in `fatal_codes` (default 4426-4429), for agents that do
  not report fatal_close themselves;
- `stop` with an exit code in `fatal_exit_codes` (default 26-29).

After that, an `attempt` from the same process is a violation, unless a
`started` event for that process (a deliberate restart by the runner, i.e.
operator action) came in between. One violation per fatal episode; the
evidence is the fatal record and the first attempt after it, the summary
counts the rest.
"""

from __future__ import annotations

from collections.abc import Iterable

from tetherbed.simulator.checkers.evidence.records import (
    FATAL_CLOSE_CODES,
    FATAL_EXIT_CODES,
    fields,
    integer,
    is_agent,
    is_event,
    ordered,
    seconds,
    time_of,
)
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record

NAME = "no_reconnect_after_fatal"


def check(
    history: History,
    *,
    fatal_codes: Iterable[int] = FATAL_CLOSE_CODES,
    fatal_exit_codes: Iterable[int] = FATAL_EXIT_CODES,
) -> Verdict:
    findings = Findings(NAME)
    codes = frozenset(fatal_codes)
    exits = frozenset(fatal_exit_codes)
    fatal: dict[str, Record] = {}
    offending: dict[str, list[Record]] = {}
    episodes = 0

    def close_episode(process: str) -> None:
        cause = fatal.pop(process, None)
        attempts = offending.pop(process, [])
        if cause is None or not attempts:
            return
        more = f" and {len(attempts) - 1} more attempt(s)" if len(attempts) > 1 else ""
        findings.add(
            f"{process} reconnected at {seconds(time_of(attempts[0]))} after "
            f"{_describe(cause)} at {seconds(time_of(cause))}{more}, without a restart",
            (cause, "fatal: must not reconnect"),
            (attempts[0], "reconnect attempt after the fatal close"),
        )

    for record in ordered(history):
        process = record.process
        if not is_agent(process) or not is_event(record):
            continue
        if record.f == "started":
            close_episode(process)
        elif record.f == "attempt":
            if process in fatal:
                offending.setdefault(process, []).append(record)
        elif process not in fatal and _is_fatal(record, codes, exits):
            fatal[process] = record
            episodes += 1
    for process in sorted(fatal):
        close_episode(process)
    return findings.verdict(f"{episodes} fatal close(s), none followed by a reconnect")


def _is_fatal(record: Record, codes: frozenset[int], exits: frozenset[int]) -> bool:
    value = fields(record)
    if record.f in ("fatal_close", "revoked"):
        return True
    if record.f == "lost":
        return integer(value.get("code")) in codes
    if record.f == "stop":
        return integer(value.get("exit_code")) in exits
    return False


def _describe(record: Record) -> str:
    value = fields(record)
    if record.f == "fatal_close":
        return f"fatal close {value.get('code')}"
    if record.f == "revoked":
        return f"SESSION_REVOKED ({value.get('reason')})"
    if record.f == "lost":
        return f"close code {value.get('code')}"
    return f"stop with exit code {value.get('exit_code')}"
