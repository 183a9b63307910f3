"""file_contents: files after the run hold what acknowledged writes imply.

Why: an `ok` to FILE_WRITE is a promise that the bytes are on disk. An agent
that acknowledges before writing (or a hub that answers for the wrong
connection) loses data silently; only the final state shows it.

For each `final_file` event (session, path, exists, content, digest), the
operations on that session and path are FILE_WRITE (sets the content),
FILE_DELETE and the source side of FILE_MOVE (remove it), and — with unknown
effect — the destination side of FILE_MOVE and shell commands whose text names
the file. Failed operations (`fail`: it did not happen) are ignored.

An operation A is definitely overwritten when an `ok` write or delete B was
invoked after A completed. The final state may be the effect of any
operation not definitely overwritten: the last acknowledged ones (several if
they were concurrent), any whose outcome is unknown (`info`) and any still in
flight at the end, since those may land at any time; plus the initial content
(option `initial_files`, as for no_crossed_answers) when no acknowledged
operation replaced it. So:

- `exists: true` must carry one of those contents (compared as bytes, or by
  the digest — a prefix of the sha256 hex of the bytes — when given, since a
  binary file's text content may be lossy);
- `exists: false` needs a delete among them — a missing file after an
  acknowledged write that no delete can follow is a lost write;
- an unknown effect among the candidates, or no operation and unknown initial
  content, means the file cannot be judged; the summary counts those, and
  with no file judged at all the verdict is unknown.

Files are keyed by (session, path). Agents of one machine share a root, so
option `file_systems` ({session: disk name}) puts sessions that share files
on one key. Paths are compared normalised (`./a.txt` is `a.txt`) but
otherwise as written: `final_file.path` must be spelt as the clients spelt it.
"""

from __future__ import annotations

from collections import defaultdict

from tetherbed.simulator.checkers.evidence.files import (
    ABSENT,
    WILD,
    Effect,
    FileSystems,
    InitialFiles,
    commands_naming,
    digest_matches,
    disk_of,
    effects,
    initial_content,
    norm_path,
    preview,
    to_bytes,
)
from tetherbed.simulator.checkers.evidence.operations import operations
from tetherbed.simulator.checkers.evidence.records import (
    fields,
    is_event,
    ordered,
    seconds,
    time_of,
)
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record

NAME = "file_contents"
#: Writes of unknown outcome quoted as evidence (the latest ones); others are counted.
UNKNOWN_EVIDENCE = 3


def check(
    history: History,
    *,
    initial_files: InitialFiles = None,
    file_systems: FileSystems = None,
) -> Verdict:
    findings = Findings(NAME)
    ops = operations(history)
    by_key: dict[tuple[str | None, str], list[Effect]] = defaultdict(list)
    for change in effects(ops, file_systems):
        if change.op.outcome != "fail":
            by_key[(change.disk, change.path)].append(change)
    checked = unknown = 0
    for record in ordered(history):
        if not is_event(record, "final_file"):
            continue
        value = fields(record)
        path = norm_path(value.get("path"))
        if path is None:
            continue
        disk = disk_of(record.session, file_systems)
        changes = list(by_key.get((disk, path), []))
        for op in commands_naming(ops, disk, path, file_systems):
            changes.append(Effect(op, disk, path, WILD))
        judged = _judge(record, path, changes, initial_files, findings)
        checked += judged
        unknown += not judged
    note = f"; {unknown} could not be judged (unknown effects)" if unknown else ""
    summary = f"{checked} final file(s) match the acknowledged writes{note}"
    if not checked and not unknown:
        return findings.verdict(summary, no_evidence="no file was written")
    if not checked:
        findings.undecided(f"{unknown} final file(s) could not be judged (unknown effects)")
    return findings.verdict(summary)


def _judge(
    record: Record,
    path: str,
    changes: list[Effect],
    initial: InitialFiles,
    findings: Findings,
) -> bool:
    """Check one final file; False when it cannot be judged."""
    survivors = [c for c in changes if not _overwritten(c, changes)]
    acknowledged = [c for c in changes if c.op.outcome == "ok" and c.value is not WILD]
    candidates = [c.value for c in survivors]
    if not acknowledged:
        candidates.append(initial_content(initial, record.session, path))
    if any(value is WILD for value in candidates):
        return False
    value = fields(record)
    exists = value.get("exists") is True
    if not exists:
        if ABSENT in candidates:
            return True
        last = _last_acknowledged(survivors)
        why = f"{path} (session {record.session}) does not exist"
        if last is not None:
            why += (
                f", but {last.op.process} req {last.op.invoke.req} wrote it "
                f"(ok at {seconds(time_of(last.op.completion or last.op.invoke))}) "
                "after every delete: lost write"
            )
        else:
            why += ", though nothing deleted it"
        _report(findings, why, record, survivors)
        return True
    content = to_bytes(value.get("content"), value.get("encoding"))
    digest = value.get("digest")
    if content is None and not digest:
        return False
    wanted = [c for c in candidates if isinstance(c, bytes)]
    if content is not None and content in wanted:
        return True
    # The digest is authoritative: a binary file's text content may be lossy.
    if digest and any(digest_matches(digest, c) for c in wanted):
        return True
    shown = preview(content) if content is not None else f"digest {digest}"
    allowed = _listing(candidates)
    why = (
        f"{path} (session {record.session}) holds {shown}, but the acknowledged "
        f"history allows only {allowed}"
    )
    if ABSENT in candidates and len(candidates) == 1:
        why += ": it should have been deleted"
    elif acknowledged:
        why += ": lost write"
    _report(findings, why, record, survivors)
    return True


def _overwritten(change: Effect, changes: list[Effect]) -> bool:
    """Some acknowledged write/delete was invoked after this one completed."""
    if change.op.outcome != "ok":
        return False  # unknown outcome or still in flight: may land at any time
    return any(
        other.op.outcome == "ok" and other.value is not WILD and other.op.start > change.op.end
        for other in changes
    )


def _last_acknowledged(changes: list[Effect]) -> Effect | None:
    acknowledged = [c for c in changes if c.op.outcome == "ok"]
    return max(acknowledged, key=lambda c: c.op.end, default=None)


def _listing(candidates: list[object], limit: int = 4) -> str:
    """The allowed contents, most recent first, cut to `limit` in a summary."""
    shown = [preview(c) for c in reversed(candidates)]
    if not shown:
        return "nothing"
    more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
    return ", ".join(shown[:limit]) + more


def _report(findings: Findings, why: str, record: Record, survivors: list[Effect]) -> None:
    """Evidence: the file, every acknowledged survivor, the latest few unknown ones."""
    evidence: list[tuple[Record | None, str]] = [(record, "the file after the run")]
    ordered_ = sorted(survivors, key=lambda c: c.op.start)
    acknowledged = [c for c in ordered_ if c.op.outcome == "ok"]
    unknown = [c for c in ordered_ if c.op.outcome != "ok"][-UNKNOWN_EVIDENCE:]
    for change in sorted(acknowledged + unknown, key=lambda c: c.op.start):
        role = "delete" if change.value is ABSENT else f"write of {preview(change.value)}"
        outcome = change.op.outcome or "no answer"
        evidence.append((change.op.invoke, f"{role} ({outcome}) that may be last"))
        evidence.append((change.op.completion, f"its {outcome}"))
    findings.add(why, *evidence)
