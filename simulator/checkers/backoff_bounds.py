"""backoff_bounds: agents reconnect on the spec's schedule, never in a hot loop.

Why: `min(2^attempt · 1 s, 60 s) + jitter(0-5 s)` keeps a fleet of agents
from hammering a hub that just restarted; too short and they stampede, too
long and sessions stay offline for nothing, and "reconnect immediately" is
the hot loop the spec calls out. The bounds come from `wire/backoff.py`,
never from the agent under test.

Judged from the wire, per node and process lifetime (a `started`, `exited`
or `killed` event begins a new one: a restarted agent connects at once). The
delay before each reconnect attempt is the time from the moment the node
learnt its previous connection was over (the first Close it received or
sent, the failed upgrade, or the end of the TCP connection) to the next
connection it opened. How an agent numbers its attempts is its own business,
so the checker allows every number the spec's words allow:

- at least the failures since the last connection the hub accepted
  (HELLO_ACK) — an agent that starts counting again on every accepted one;
- at most the attempts since the last connection that stayed up
  `healthy_after` seconds (default 10) — one that starts again only then —
  plus one, since "attempt" may be counted from 0 or from 1.

The delay must lie inside `[min(2^n, 60), min(2^n, 60) + 5]` s for one of
those n, within `early_tolerance` (default 0.05 s) and `late_tolerance`
(default 1 s); lateness is excused while the node's process was frozen.
Options `base`, `cap` and `jitter` hold agents configured differently to
their own schedule. Reconnects after a fatal close are no_reconnect_after_fatal's
business and are not judged here.

Extra evidence: a `backoff {attempt: n, delay}` an agent journals (the
reference does) must lie inside the bounds for its own n; it can convict,
never acquit. No reconnect in the history: unknown.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tetherbed.simulator.checkers.evidence.connections import Connection, connections
from tetherbed.simulator.checkers.evidence.lifecycle import Period, pauses
from tetherbed.simulator.checkers.evidence.records import (
    fields,
    integer,
    is_agent,
    is_event,
    key,
    number,
    ordered,
    seconds,
    time_of,
)
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record
from tetherbed.wire.backoff import (
    BASE_SECONDS,
    CAP_SECONDS,
    HEALTHY_AFTER_SECONDS,
    JITTER_SECONDS,
    BackoffSchedule,
)

NAME = "backoff_bounds"
#: Seconds a connection must stay up before an agent may count from 0 again
#: (the spec does not say; the reading in docs/spec-notes.md).
HEALTHY_AFTER = HEALTHY_AFTER_SECONDS
_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class _Rules:
    schedule: BackoffSchedule
    early: float
    late: float
    healthy_after: float

    @property
    def base(self) -> float:
        return self.schedule.base

    def bounds(self, n: int) -> tuple[float, float]:
        return self.schedule.bounds(n)


@dataclass(frozen=True, slots=True)
class Reconnect:
    """One delay the wire shows: `previous` ended at `lost`, `attempt` began."""

    node: str
    previous: Connection
    lost: Record
    attempt: Connection
    n_low: int
    n_high: int

    @property
    def delay(self) -> float:
        return time_of(self.attempt.connect) - time_of(self.lost)


def check(
    history: History,
    *,
    early_tolerance: float = 0.05,
    late_tolerance: float = 1.0,
    base: float = BASE_SECONDS,
    cap: float = CAP_SECONDS,
    jitter: float = JITTER_SECONDS,
    healthy_after: float = HEALTHY_AFTER,
) -> Verdict:
    findings = Findings(NAME)
    rules = _Rules(
        BackoffSchedule(base=float(base), cap=float(cap), jitter=float(jitter)),
        max(float(early_tolerance), 0.0),
        max(float(late_tolerance), 0.0),
        float(healthy_after),
    )
    frozen = pauses(history)
    judged = 0
    for reconnect in reconnects(history, healthy_after=rules.healthy_after):
        judged += 1
        _judge(reconnect, rules, frozen.get(f"agent:{reconnect.node}", []), findings)
    chosen = _journal_backoffs(history, rules, findings)
    summary = (
        f"{judged} reconnect delay(s) within min(2^n·{base:g}, {cap:g}) + [0, {jitter:g}] s "
        "on the wire, no hot loop"
    )
    if chosen:
        summary += f"; {chosen} delay(s) the agents chose agree"
    if not judged:
        return findings.verdict(summary, no_evidence="no reconnect on the wire")
    return findings.verdict(summary)


def reconnects(history: History, *, healthy_after: float = HEALTHY_AFTER) -> list[Reconnect]:
    """Every reconnect delay the wire shows, with the attempt numbers it allows."""
    lifetimes = _lifetimes(history)
    found: list[Reconnect] = []
    for node, attempts in sorted(_attempts(history).items()):
        starts = lifetimes.get(node, [])
        previous: Connection | None = None
        n_low = n_high = 0  # the numbers the delay after `previous` may have
        for attempt in attempts:
            if previous is None or not _same_life(previous, attempt, starts):
                n_low = n_high = 0  # the first delay of a lifetime is attempt 0
                previous = attempt
                continue
            lost = previous.lost_at
            if lost is not None and key(lost) <= key(attempt.connect) and previous.fatal is None:
                found.append(Reconnect(node, previous, lost, attempt, n_low, n_high))
            n_low = 0 if attempt.served else n_low + 1
            n_high = 0 if _healthy(attempt, healthy_after) else n_high + 1
            previous = attempt
    return found


def _attempts(history: History) -> dict[str, list[Connection]]:
    nodes: dict[str, list[Connection]] = defaultdict(list)
    for connection in connections(history):
        if connection.is_attempt:
            nodes[connection.node].append(connection)
    return nodes


def _lifetimes(history: History) -> dict[str, list[Record]]:
    """Per node, the events that begin a new process lifetime."""
    found: dict[str, list[Record]] = defaultdict(list)
    for record in ordered(history):
        if is_agent(record.process) and is_event(record, "started", "exited", "killed"):
            found[record.process.split(":", 1)[1]].append(record)
    return found


def _same_life(previous: Connection, attempt: Connection, starts: list[Record]) -> bool:
    begin, finish = key(previous.connect), key(attempt.connect)
    return not any(begin < key(r) < finish for r in starts)


def _healthy(connection: Connection, healthy_after: float) -> bool:
    accepted, lost = connection.hello_ack, connection.lost_at
    if accepted is None:
        return False
    if lost is None:
        return True
    return time_of(lost) - time_of(accepted) >= healthy_after - _EPSILON


def _judge(reconnect: Reconnect, rules: _Rules, frozen: list[Period], findings: Findings) -> None:
    delay = reconnect.delay
    numbers = range(reconnect.n_low, reconnect.n_high + 2)
    windows = [rules.bounds(n) for n in numbers]
    paused = any(
        p.overlaps(time_of(reconnect.lost), time_of(reconnect.attempt.connect)) for p in frozen
    )
    for low, high in windows:
        if delay < low - rules.early - _EPSILON:
            continue
        if paused or delay <= high + rules.late + _EPSILON:
            return
    allowed = " or ".join(f"[{low:g}, {high:g}]" for low, high in _merged(windows))
    if delay < windows[0][0] - rules.early:
        what = "too early" if delay >= rules.base * 0.5 else "a hot loop"
    else:
        what = "too late" if delay > windows[-1][1] + rules.late else "outside every window"
    why = (
        f"{reconnect.node}: reconnected {delay:.3f} s after {reconnect.previous.conn} ended "
        f"({what}); attempt n={reconnect.n_low}..{reconnect.n_high + 1} allows {allowed} s"
    )
    findings.add(
        why,
        (reconnect.lost, f"{reconnect.previous.conn} is over for the node"),
        (reconnect.attempt.connect, f"{reconnect.attempt.conn}: the next attempt"),
    )


def _merged(windows: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for low, high in sorted(set(windows)):
        if merged and low <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _journal_backoffs(history: History, rules: _Rules, findings: Findings) -> int:
    """Delays an agent says it chose, held to the bounds for its own n."""
    count = 0
    for record in ordered(history):
        if not (is_agent(record.process) and is_event(record, "backoff")):
            continue
        value = fields(record)
        n, delay = integer(value.get("attempt")), number(value.get("delay"))
        if n is None or n < 0 or delay is None:
            continue
        count += 1
        low, high = rules.bounds(n)
        if not low - _EPSILON <= delay <= high + _EPSILON:
            findings.add(
                f"{record.process} chose a {delay:g} s backoff at attempt {n} "
                f"(at {seconds(time_of(record))}), outside [{low:g}, {high:g}] s",
                (record, "the delay the agent chose"),
            )
    return count
