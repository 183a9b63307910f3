"""no_crossed_answers: an answer reaches the client that asked, about its data.

Why: the hub multiplexes many clients and sessions over a few agent
connections and rewrites request ids on the way; an id collision or a routing
slip hands one user's file or command output to another user — a data leak,
and the worst failure a relay can have.

Three checks:

1. every completion's req matches an invoke of the SAME client process;
   matching another client's invoke is a crossing (evidence names both);
2. an ok answer has a type that answers the invoked kind (FILE_READ →
   FILE_CONTENTS, EXECUTE_COMMAND → COMMAND_RESULT, ...): another kind's
   answer is someone else's;
3. a FILE_READ ok returns content this session's path could hold: the initial
   content (option `initial_files`: {path: content} for every session, or
   {session: {path: content}}; None content or an unlisted path = did not
   exist; option absent = unknown), or the content of any FILE_WRITE to the
   same session and path invoked before the read completed, whatever its
   outcome. Partial reads (offset, length, truncated) must be a slice of
   such a content. A move into the path or a shell command naming the file
   makes its content unknown. With unknown initial content only a positive
   match counts: content that some other path or session was given.
   Option `file_systems` ({session: disk name}) makes sessions served from
   one machine root share files, as they do.

Judged from the client legs (recorded by Tetherbed's own clients). No answer
at all: unknown.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tetherbed.simulator.checkers.evidence.files import (
    ABSENT,
    WILD,
    Effect,
    FileSystems,
    InitialFiles,
    commands_naming,
    disk_of,
    effects,
    initial_content,
    norm_path,
    preview,
    to_bytes,
)
from tetherbed.simulator.checkers.evidence.operations import Operation, operations
from tetherbed.simulator.checkers.evidence.records import (
    COMPLETIONS,
    ordered,
    text,
)
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record
from tetherbed.wire import serial_io
from tetherbed.wire.catalog import RESPONSES

NAME = "no_crossed_answers"
#: The serial I/O extension's requests and their answers.
_SERIAL_ANSWERS = {kind: frozenset({answer}) for kind, answer in serial_io.ANSWERS.items()}


def check(
    history: History,
    *,
    initial_files: InitialFiles = None,
    file_systems: FileSystems = None,
) -> Verdict:
    findings = Findings(NAME)
    records = ordered(history)
    _check_routing(records, findings)
    ops = operations(history)
    _check_types(ops, findings)
    reads = _check_reads(_Reads(ops, initial_files, file_systems, findings))
    answers = sum(1 for r in records if r.type in COMPLETIONS)
    return findings.verdict(
        f"{answers} answer(s) all reached the client that asked; {reads} read(s) "
        "returned content their own path could hold",
        no_evidence=None if answers else "no answer reached any client",
    )


def _check_routing(records: list[Record], findings: Findings) -> None:
    invokes: dict[Any, list[Record]] = defaultdict(list)
    mine: set[tuple[str, Any]] = set()
    for record in records:
        if record.type == "invoke" and isinstance(record.req, str | int):
            invokes[record.req].append(record)
            mine.add((record.process, record.req))
        elif record.type in COMPLETIONS:
            if (record.process, record.req) in mine:
                continue
            others = [r for r in invokes.get(record.req, []) if r.process != record.process]
            if others:
                owner = others[-1]
                findings.add(
                    f"{record.process} received the answer to {owner.process}'s req "
                    f"{record.req} ({owner.f}, session {owner.session})",
                    (owner, "the request it answers"),
                    (record, "answer delivered to the wrong client"),
                )
            else:
                findings.add(
                    f"{record.process} received an answer for req {record.req} "
                    "that no client invoked",
                    (record, "answer to nothing"),
                )


def _check_types(ops: list[Operation], findings: Findings) -> None:
    for op in ops:
        if op.outcome != "ok" or op.completion is None:
            continue
        allowed = RESPONSES.get(op.kind) or _SERIAL_ANSWERS.get(op.kind)
        answered = text(op.answer.get("type"))
        if allowed is None or answered is None or answered in allowed:
            continue
        findings.add(
            f"{op.process} req {op.invoke.req}: {op.kind} was answered with {answered}, "
            "another request's answer",
            (op.invoke, "the request"),
            (op.completion, f"a {answered} answer"),
        )


def _check_reads(reads: _Reads) -> int:
    checked = 0
    for op in reads.ops:
        if op.kind != "FILE_READ" or op.outcome != "ok" or op.completion is None:
            continue
        path = norm_path(op.payload.get("path"))
        got = to_bytes(op.answer.get("content"), op.answer.get("encoding"))
        if path is None or got is None:
            continue
        checked += 1
        reads.check(op, path, got)
    return checked


class _Reads:
    """What every read is judged against: all file effects, by session and path."""

    def __init__(
        self,
        ops: list[Operation],
        initial: InitialFiles,
        systems: FileSystems,
        findings: Findings,
    ) -> None:
        self.ops = ops
        self.initial = initial
        self.systems = systems
        self.findings = findings
        self.changes = effects(ops, systems)
        self.by_key: dict[tuple[str | None, str], list[Effect]] = defaultdict(list)
        for change in self.changes:
            self.by_key[(change.disk, change.path)].append(change)

    def check(self, op: Operation, path: str, got: bytes) -> None:
        session = op.invoke.session
        disk = disk_of(session, self.systems)
        done = op.end
        partial = _partial(op)
        before = [c for c in self.by_key.get((disk, path), []) if c.op.start < done]
        start = initial_content(self.initial, session, path)
        candidates = [c.value for c in before] + [start]
        if any(_holds(value, got, partial) for value in candidates):
            return
        if WILD in (c.value for c in before) or any(
            o.start < done for o in commands_naming(self.ops, disk, path, self.systems)
        ):
            return
        foreign = [
            c
            for c in self.changes
            if (c.disk, c.path) != (disk, path)
            and c.op.start < done
            and isinstance(c.value, bytes)
            and _holds(c.value, got, partial)
        ]
        if start is WILD and (not foreign or partial or not got):
            return  # unknown initial content: only a clear positive match proves a crossing
        where = f"{op.process} read {path} (session {session}) and got {preview(got)}"
        if foreign:
            other = foreign[-1]
            why = (
                f"{where}: the content of {other.path} in session {other.session}, "
                f"written by {other.op.process} req {other.op.invoke.req}"
            )
            evidence = [(other.op.invoke, "the write whose content leaked")]
        else:
            known = ", ".join(preview(v) for v in candidates if v is not ABSENT) or "none"
            why = f"{where}, which no write to that path nor its initial content gave it ({known})"
            evidence = [(c.op.invoke, "a write to that path") for c in before[-3:]]
        self.findings.add(
            why, (op.invoke, "the read"), (op.completion, "the content returned"), *evidence
        )


def _partial(op: Operation) -> bool:
    payload, answer = op.payload, op.answer
    offset = payload.get("offset")
    return bool(
        (isinstance(offset, int) and offset > 0)
        or payload.get("length") is not None
        or answer.get("truncated") is True
    )


def _holds(value: object, got: bytes, partial: bool) -> bool:
    if not isinstance(value, bytes):
        return False
    return got in value if partial else got == value
