"""dsh_one_stream: one live stream per computer; a newer one replaces the older (§3.2).

Why: two agents that share a token (a copied config, a cloned machine) must
not both hold a stream and both get commands; the hub keeps the newest and
ends the other ("two agents sharing one token keep replacing each other").
A hub that keeps both, or keeps sending to the replaced one, runs a command
on a machine nobody chose.

From the wire: when a stream of a computer says `hello` (on any agent's
link), every older stream of that computer must end within `slack` seconds,
and no `exec`, `cancel` or `fs` event may reach an older stream after the
newer one's hello plus `slack`. An older stream whose link was partitioned or
faulted meanwhile cannot show its end: undecided. No computer with two
streams is no evidence (unknown).
"""

from __future__ import annotations

from tetherbed.simulator.checkers.dsh.evidence import Stream, read
from tetherbed.simulator.checkers.evidence.records import seconds
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History
from tetherbed.wire.dsh import constants as C

NAME = "dsh_one_stream"
#: Events that carry work: one on a replaced stream went to the wrong machine.
WORK = frozenset({C.Event.EXEC, C.Event.CANCEL, C.Event.FS})


def check(history: History, *, slack: float = 1.0) -> Verdict:
    findings = Findings(NAME)
    evidence = read(history)
    by_computer: dict[str, list[Stream]] = {}
    for stream in evidence.streams:
        if stream.computer is not None and stream.hello_at is not None:
            by_computer.setdefault(stream.computer, []).append(stream)
    replacements = 0
    for computer, streams in by_computer.items():
        streams.sort(key=lambda s: s.hello_at or 0.0)
        for index, newer in enumerate(streams):
            since = newer.hello_at or 0.0
            for older in streams[:index]:
                if older.ended_at < since - slack:
                    continue  # over before the newer one came
                replacements += 1
                late = [
                    r
                    for r in older.events
                    if r.time > since + slack and r.value.get("event") in WORK
                ]
                for event in late:
                    findings.add(
                        f"{event.value.get('event')} reached {older.agent}'s replaced stream "
                        f"{older.conn} at {seconds(event.time)}, after {computer}'s newer stream "
                        f"{newer.conn} ({newer.agent}) said hello at {seconds(since)}",
                        (newer.hello, "the newer stream's hello"),
                        (event, "work sent to the replaced stream"),
                    )
                if older.ended_at <= since + slack:
                    continue
                if evidence.disturbed_during(older.agent, since, since + slack):
                    findings.undecided(
                        f"{older.agent}'s link was disturbed when {computer}'s stream was "
                        "replaced: its end could not be seen",
                        (newer.hello, "the newer stream's hello"),
                    )
                    continue
                ended = seconds(older.ended_at) if older.end is not None else "never"
                findings.add(
                    f"{computer} held two streams: {older.conn} ({older.agent}) stayed open "
                    f"(ended {ended}) after {newer.conn} ({newer.agent}) said hello at "
                    f"{seconds(since)}",
                    (older.hello, "the older stream's hello"),
                    (newer.hello, "the newer stream's hello"),
                    (older.end, "the older stream's end"),
                )
    if not replacements:
        return findings.verdict("", no_evidence="no computer opened a second stream")
    return findings.verdict(f"{replacements} replaced stream(s), each ended in time")
