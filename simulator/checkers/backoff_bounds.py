"""backoff_bounds: agents reconnect on the spec's schedule, never in a hot loop.

Why: `min(2^n · 1 s, 60 s) + jitter(0-5 s)` keeps a fleet of agents from
hammering a hub that just restarted; too short and they stampede, too long
and sessions stay offline for nothing, and "reconnect immediately" is the hot
loop the spec calls out.

Per agent process, in time order:

1. every `backoff {attempt: n, delay}` must lie within
   `agent.backoff.Backoff.bounds(n)` = [min(2^n, 60), min(2^n, 60) + 5] s
   (options `base`, `cap`, `jitter` for agents configured differently);
2. the schedule must follow the agent's state: the first backoff of a process
   lifetime has n = 0; after a connection that stayed up `healthy_after`
   seconds (default 10) n is 0 again; otherwise n is the previous n + 1.
   Near the health threshold (within `early_tolerance`) either is accepted.
   Option `check_sequence=False` turns this off;
3. the next `attempt` comes no earlier than `delay - early_tolerance`
   (default 0.05 s) after the backoff and, unless the process was paused in
   between, no later than `delay + late_tolerance` (default 1.0 s);
4. a reconnect `attempt` (one after an earlier attempt in the same process
   lifetime) without a `backoff` in between is a hot loop.

A `started`, `exited` or `killed` event begins a new process lifetime: a
restarted agent connects at once and its schedule starts from 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from tetherbed.agent.backoff import (
    BASE_SECONDS,
    CAP_SECONDS,
    HEALTHY_AFTER_SECONDS,
    JITTER_SECONDS,
    Backoff,
)
from tetherbed.simulator.checkers.evidence.lifecycle import Period, pauses
from tetherbed.simulator.checkers.evidence.records import (
    fields,
    integer,
    is_agent,
    is_event,
    number,
    ordered,
    seconds,
    time_of,
)
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record

NAME = "backoff_bounds"
_EPSILON = 1e-9


@dataclass(slots=True)
class _Lifetime:
    """What one agent process did since it last (re)started."""

    last_attempt: Record | None = None
    pending: Record | None = None  # a backoff not yet followed by an attempt
    previous_n: int | None = None
    connected: Record | None = None  # since last_attempt
    lost: Record | None = None  # since last_attempt


@dataclass(frozen=True, slots=True)
class _Rules:
    schedule: Backoff
    early: float
    late: float
    healthy_after: float
    check_sequence: bool


def check(
    history: History,
    *,
    early_tolerance: float = 0.05,
    late_tolerance: float = 1.0,
    base: float = BASE_SECONDS,
    cap: float = CAP_SECONDS,
    jitter: float = JITTER_SECONDS,
    healthy_after: float = HEALTHY_AFTER_SECONDS,
    check_sequence: bool = True,
) -> Verdict:
    findings = Findings(NAME)
    rules = _Rules(
        Backoff(base=base, cap=cap, jitter=jitter),
        max(float(early_tolerance), 0.0),
        max(float(late_tolerance), 0.0),
        float(healthy_after),
        check_sequence,
    )
    frozen = pauses(history)
    lives: dict[str, _Lifetime] = {}
    delays = 0
    for record in ordered(history):
        process = record.process
        if not is_agent(process) or not is_event(record):
            continue
        life = lives.setdefault(process, _Lifetime())
        if record.f in ("started", "exited", "killed"):
            lives[process] = _Lifetime()
        elif record.f == "backoff":
            delays += 1
            _on_backoff(record, life, rules, findings)
        elif record.f == "attempt":
            _on_attempt(record, life, rules, frozen.get(process, []), findings)
        elif record.f == "connected":
            life.connected = record
        elif record.f == "lost":
            life.lost = record
    return findings.verdict(
        f"{delays} backoff delay(s) within min(2^n·{base:g}, {cap:g}) + [0, {jitter:g}] s, "
        "each honoured, no hot loop"
    )


def _on_backoff(record: Record, life: _Lifetime, rules: _Rules, findings: Findings) -> None:
    value = fields(record)
    n = integer(value.get("attempt"))
    delay = number(value.get("delay"))
    if n is None or n < 0 or delay is None:
        findings.add(
            f"{record.process}: malformed backoff {value!r}", (record, "malformed backoff")
        )
        life.pending = None
        return
    low, high = rules.schedule.bounds(n)
    if not low - _EPSILON <= delay <= high + _EPSILON:
        findings.add(
            f"{record.process}: backoff delay {delay:g} s at attempt {n} is outside "
            f"[{low:g}, {high:g}] s",
            (record, "delay out of bounds"),
        )
    if rules.check_sequence:
        expected = _expected(life, rules)
        if n not in expected:
            wanted = " or ".join(str(e) for e in sorted(expected))
            findings.add(
                f"{record.process}: backoff attempt n={n} at {seconds(time_of(record))}, "
                f"expected n={wanted} ({_reason(life, rules)})",
                (life.connected, "the connection before"),
                (record, "backoff with the wrong attempt number"),
            )
    life.previous_n = n
    life.pending = record


def _expected(life: _Lifetime, rules: _Rules) -> set[int]:
    if life.previous_n is None:
        return {0}
    grown = life.previous_n + 1
    uptime = _uptime(life)
    if uptime is None or uptime < rules.healthy_after - rules.early:
        return {grown}
    if uptime >= rules.healthy_after + rules.early:
        return {0}
    return {0, grown}


def _uptime(life: _Lifetime) -> float | None:
    if life.connected is None or life.lost is None:
        return None
    return time_of(life.lost) - time_of(life.connected)


def _reason(life: _Lifetime, rules: _Rules) -> str:
    if life.previous_n is None:
        return "first backoff since the process started"
    uptime = _uptime(life)
    if uptime is None:
        return f"previous n={life.previous_n} and no connection since"
    healthy = "healthy" if uptime >= rules.healthy_after else "not healthy"
    return f"previous n={life.previous_n}, last connection up {uptime:.3f} s: {healthy}"


def _on_attempt(
    record: Record,
    life: _Lifetime,
    rules: _Rules,
    frozen: list[Period],
    findings: Findings,
) -> None:
    backoff = life.pending
    if backoff is not None:
        delay = number(fields(backoff).get("delay")) or 0.0
        elapsed = time_of(record) - time_of(backoff)
        if elapsed < delay - rules.early - _EPSILON:
            findings.add(
                f"{record.process}: reconnected {elapsed:.3f} s after choosing a "
                f"{delay:.3f} s backoff (too early)",
                (backoff, "backoff chosen"),
                (record, "attempt before the delay was over"),
            )
        elif elapsed > delay + rules.late + _EPSILON and not any(
            p.overlaps(time_of(backoff), time_of(record)) for p in frozen
        ):
            findings.add(
                f"{record.process}: reconnected {elapsed:.3f} s after choosing a "
                f"{delay:.3f} s backoff (late by {elapsed - delay:.3f} s, not paused)",
                (backoff, "backoff chosen"),
                (record, "attempt long after the delay"),
            )
    elif life.last_attempt is not None:
        after = life.lost or life.last_attempt
        findings.add(
            f"{record.process}: attempt at {seconds(time_of(record))} follows the "
            f"{after.f} at {seconds(time_of(after))} without any backoff (hot loop)",
            (after, "connection ended"),
            (record, "reconnect without backoff"),
        )
    life.pending = None
    life.last_attempt = record
    life.connected = None
    life.lost = None
