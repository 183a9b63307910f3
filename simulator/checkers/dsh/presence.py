"""dsh_presence: a computer is online exactly while it holds an open stream (§2).

Why: presence is the one thing the settings page and the model's
`computer_list` trust. A hub that counts heartbeats instead, or forgets to
drop a closed stream, shows a dead machine as online (and dispatches commands
into the void); one that drops live streams shows a working machine offline.

Every `/state` a dsh client read is judged against the streams on the wire
(what the agents' recorders saw). For a computer the hub listed:

- `online: true` needs a stream of that computer that the hub could still
  consider open during the read: asked for (its GET sent) before the read's
  answer, and not seen to end more than `slack` seconds before the read was
  sent — or, when the stream ended while its link was partitioned, faulted or
  the agent paused, not before that disturbance was over plus `slack` (the
  hub cannot see an end that cannot reach it; §2 bounds that case by the
  ping, which the recorder cannot observe). Otherwise: a violation.
- `online: false` is a violation when a stream of that computer had said
  `hello` before the read was sent, was still open `slack` seconds after the
  answer, and its link was undisturbed all that time.

A stream's computer is its `hello`'s `computerId`. No read, or no stream, is
no evidence (unknown).
"""

from __future__ import annotations

from tetherbed.simulator.checkers.dsh.evidence import INFINITY, Stream, Wire, read
from tetherbed.simulator.checkers.evidence.records import seconds
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History

NAME = "dsh_presence"


def check(history: History, *, slack: float = 1.0) -> Verdict:
    findings = Findings(NAME)
    evidence = read(history)
    by_computer: dict[str, list[Stream]] = {}
    for stream in evidence.streams:
        if stream.computer is not None:
            by_computer.setdefault(stream.computer, []).append(stream)
    reads = [c for c in evidence.calls_of("state") if c.completion is not None]
    judged = 0
    for call in reads:
        if call.completion is None or call.completion.type != "ok":
            continue
        sent, answered = call.invoke.time, call.completion.time
        rows = call.value.get("computers")
        for row in rows if isinstance(rows, list) else []:
            computer = row.get("id") if isinstance(row, dict) else None
            if not isinstance(computer, str):
                continue
            streams = by_computer.get(computer, [])
            judged += 1
            if row.get("online") is True:
                if not any(_could_be_open(evidence, s, sent, answered, slack) for s in streams):
                    last = max(streams, key=lambda s: s.ended_at, default=None)
                    findings.add(
                        f"{call.invoke.process} read {computer} online at {seconds(sent)}, "
                        + (
                            f"but its last stream ended at {seconds(last.ended_at)}"
                            if last is not None and last.end is not None
                            else "but it held no stream"
                        ),
                        (call.invoke, "the read"),
                        (call.completion, "online: true"),
                        (last.end if last is not None else None, "the stream's end"),
                    )
            elif row.get("online") is False:
                held = next(
                    (s for s in streams if _certainly_open(evidence, s, sent, answered, slack)),
                    None,
                )
                if held is not None:
                    findings.add(
                        f"{call.invoke.process} read {computer} offline at {seconds(sent)}, "
                        f"while {held.agent} held its stream {held.conn} (hello at "
                        f"{seconds(held.hello_at or 0)}, open until "
                        f"{seconds(held.ended_at) if held.end else 'the end'})",
                        (call.invoke, "the read"),
                        (call.completion, "online: false"),
                        (held.hello, "the stream's hello"),
                    )
    if not judged:
        return findings.verdict("", no_evidence="no /state read listed a computer")
    return findings.verdict(f"{judged} presence reading(s) matched the streams on the wire")


def _could_be_open(wire: Wire, stream: Stream, sent: float, answered: float, slack: float) -> bool:
    if stream.asked_at > answered:
        return False
    if stream.end is None:
        return True
    noticed = wire.disturbed_until(stream.agent, stream.ended_at) + slack
    return noticed >= sent


def _certainly_open(wire: Wire, stream: Stream, sent: float, answered: float, slack: float) -> bool:
    hello = stream.hello_at
    if hello is None or hello >= sent:
        return False
    if stream.ended_at != INFINITY and stream.ended_at <= answered + slack:
        return False
    until = min(stream.ended_at, answered + slack)
    return not wire.disturbed_during(stream.agent, hello, until)
