"""Verify an audit log chain: which record, if any, was altered, removed or added.

The format and the canonical JSON are defined in `agent/audit/log.py`. For every
line, oldest file first, the verifier checks that it is a JSON object with
exactly the ten fields and their types, that its `hmac` matches, that its
`prev_hmac` is the previous record's `hmac` and that `seq` is the previous
`seq` + 1. The first record must be seq 0 with an all-zero `prev_hmac`, or a
later record whose predecessors were rotated away (reported as `first_seq`).

One bad line is forgiven only when the next record is a `log_recovered` record
whose `torn_bytes` and `torn_sha256` match that line: that is the writer
attesting, under the key, that a crash tore it. Anything else stops at the
FIRST broken link, since every later record is then unanchored.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from tetherbed.agent.audit import key as audit_key
from tetherbed.agent.audit.log import (
    FIELDS,
    GENESIS_HMAC,
    LOG_RECOVERED,
    chain_key,
    record_hmac,
    rotated_files,
)

_HEX64 = re.compile(r"[0-9a-f]{64}")


class Problem(StrEnum):
    MALFORMED = "malformed"  # not UTF-8, not JSON, not an object, duplicate keys
    MISSING_FIELD = "missing_field"
    BAD_FIELD = "bad_field"  # an unexpected field, or a field of the wrong type
    BAD_HMAC = "bad_hmac"  # the record was altered
    PREV_MISMATCH = "prev_hmac_mismatch"  # a record removed, reordered or inserted
    SEQ_GAP = "seq_gap"


@dataclass(frozen=True, slots=True)
class Break:
    """The first broken link: where, which record, and why."""

    file: Path
    line: int
    seq: int | None
    problem: Problem
    reason: str


@dataclass(frozen=True, slots=True)
class Recovery:
    """A torn line that a later `log_recovered` record attests."""

    file: Path
    line: int
    noted_by_seq: int


@dataclass(frozen=True, slots=True)
class VerifyReport:
    ok: bool
    records: int
    files: list[Path]
    first_seq: int | None = None
    last_seq: int | None = None
    last_hmac: str | None = None
    broken: Break | None = None
    recoveries: list[Recovery] = field(default_factory=list)

    def summary(self) -> str:
        """The CLI's answer: `OK: N records` or `BROKEN at FILE:LINE (seq S): REASON`."""
        if self.broken is not None:
            b = self.broken
            seq = "?" if b.seq is None else b.seq
            return f"BROKEN at {b.file}:{b.line} (seq {seq}): {b.reason}"
        lines = [f"OK: {self.records} records"]
        if self.first_seq:
            lines.append(
                f"note: the chain starts at seq {self.first_seq}; earlier records were rotated away"
            )
        lines.extend(
            f"note: torn line at {r.file}:{r.line}, attested by log_recovered seq {r.noted_by_seq}"
            for r in self.recoveries
        )
        return "\n".join(lines)


def discover(path: Path) -> list[Path]:
    """The current file's rotated siblings, oldest first, then the file itself."""
    files = [p for _, p in reversed(rotated_files(path))]
    if path.exists():
        files.append(path)
    if not files:
        raise FileNotFoundError(f"no audit log at {path}")
    return files


def verify(paths: list[Path] | Path, key: bytes) -> VerifyReport:
    """Check the chain across `paths` (oldest first; a single Path means "discover").

    `key` is the machine-local key, as for `AuditLog`.
    """
    files = discover(Path(paths)) if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    return _Verifier(chain_key(key), files).run()


@dataclass(slots=True)
class _Bad:
    file: Path
    line: int
    raw: bytes
    seq: int | None
    problem: Problem
    reason: str
    terminated: bool = True  # the line ended with a newline


class _Verifier:
    def __init__(self, key: bytes, files: list[Path]) -> None:
        self.key = key
        self.files = files
        self.count = 0
        self.first_seq: int | None = None
        self.last: dict[str, Any] | None = None
        self.recoveries: list[Recovery] = []

    def run(self) -> VerifyReport:
        pending: _Bad | None = None
        for file, number, raw, terminated in _lines(self.files):
            record, bad = self._check_line(file, number, raw)
            if bad is not None:
                bad.terminated = terminated
                if pending is not None:
                    return self._report(pending)
                pending = bad
                continue
            assert record is not None
            if pending is not None:
                if not _attests(record, pending.raw):
                    return self._report(pending)
                self.recoveries.append(Recovery(pending.file, pending.line, record["seq"]))
                pending = None
            link = self._check_link(file, number, record)
            if link is not None:
                return self._report(link)
            self.last = record
            self.count += 1
        if pending is not None:
            if pending.problem is Problem.MALFORMED and not pending.terminated:
                pending.reason += "; it ends the log: a torn write the writer has not noted yet"
            return self._report(pending)
        return self._report(None)

    def _check_line(
        self, file: Path, number: int, raw: bytes
    ) -> tuple[dict[str, Any] | None, _Bad | None]:
        record, problem, reason = _parse(raw)
        seq = record.get("seq") if isinstance(record, dict) else None
        seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
        if problem is None:
            assert record is not None
            try:
                expected = record_hmac(self.key, record)
            except (TypeError, ValueError):
                problem, reason = Problem.MALFORMED, "holds a value canonical JSON forbids"
            else:
                if not hmac.compare_digest(expected, record["hmac"]):
                    problem = Problem.BAD_HMAC
                    reason = "hmac does not match: the record was altered (or forged)"
        if problem is not None:
            return None, _Bad(file, number, raw, seq, problem, reason)
        return record, None

    def _check_link(self, file: Path, number: int, record: dict[str, Any]) -> _Bad | None:
        seq, prev = record["seq"], record["prev_hmac"]
        if self.last is None:
            self.first_seq = seq
            if (seq == 0) != (prev == GENESIS_HMAC):
                why = (
                    "seq 0 must have an all-zero prev_hmac"
                    if seq == 0
                    else f"seq {seq} has the all-zero prev_hmac of a first record"
                )
                return _Bad(file, number, b"", seq, Problem.PREV_MISMATCH, why)
            return None
        expected_seq = self.last["seq"] + 1
        if prev != self.last["hmac"]:
            return _Bad(
                file,
                number,
                b"",
                seq,
                Problem.PREV_MISMATCH,
                f"prev_hmac is not the hmac of the preceding record (seq {self.last['seq']}): "
                f"a record was removed, reordered or inserted (expected seq {expected_seq})",
            )
        if seq != expected_seq:
            return _Bad(
                file,
                number,
                b"",
                seq,
                Problem.SEQ_GAP,
                f"seq {seq} follows seq {self.last['seq']} (expected {expected_seq})",
            )
        return None

    def _report(self, bad: _Bad | None) -> VerifyReport:
        return VerifyReport(
            ok=bad is None,
            records=self.count,
            files=self.files,
            first_seq=self.first_seq,
            last_seq=None if self.last is None else self.last["seq"],
            last_hmac=None if self.last is None else self.last["hmac"],
            broken=None
            if bad is None
            else Break(bad.file, bad.line, bad.seq, bad.problem, bad.reason),
            recoveries=self.recoveries,
        )


def _lines(files: list[Path]) -> Iterator[tuple[Path, int, bytes, bool]]:
    """(file, 1-based line number, line without its newline, had a newline), oldest first."""
    for file in files:
        with file.open("rb") as fh:
            for number, line in enumerate(fh, 1):
                if line.endswith(b"\n"):
                    yield file, number, line[:-1], True
                else:
                    yield file, number, line, False


def _attests(record: dict[str, Any], raw: bytes) -> bool:
    details = record["details"]
    return (
        record["op"] == LOG_RECOVERED
        and details.get("torn_bytes") == len(raw)
        and details.get("torn_sha256") == hashlib.sha256(raw).hexdigest()
    )


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate key")
    return result


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _parse(raw: bytes) -> tuple[dict[str, Any] | None, Problem | None, str]:
    """The record on a line, or what is wrong with its shape."""
    try:
        value = json.loads(
            raw.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constants
        )
    except UnicodeDecodeError:
        return None, Problem.MALFORMED, "not UTF-8"
    except (ValueError, RecursionError):
        return None, Problem.MALFORMED, "not a valid JSON line (torn or edited)"
    if not isinstance(value, dict):
        return None, Problem.MALFORMED, "not a JSON object"
    missing = [name for name in FIELDS if name not in value]
    if missing:
        return value, Problem.MISSING_FIELD, f"missing field(s): {', '.join(missing)}"
    extra = sorted(set(value) - set(FIELDS))
    if extra:
        return value, Problem.BAD_FIELD, f"unexpected field(s): {', '.join(extra)}"
    wrong = [name for name in FIELDS if not _FIELD_CHECKS[name](value[name])]
    if wrong:
        return value, Problem.BAD_FIELD, f"field(s) of the wrong type: {', '.join(wrong)}"
    return value, None, ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_hex64(value: Any) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


_FIELD_CHECKS = {
    "ts": lambda v: _is_int(v) or isinstance(v, float),
    "session_id": lambda v: v is None or isinstance(v, str),
    "machine_id": lambda v: isinstance(v, str),
    "request_id": lambda v: v is None or isinstance(v, str),
    "op": lambda v: isinstance(v, str),
    "details": lambda v: isinstance(v, dict),
    "result": lambda v: isinstance(v, str),
    "seq": lambda v: _is_int(v) and v >= 0,
    "prev_hmac": _is_hex64,
    "hmac": _is_hex64,
}


# --- command line --------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tetherbed agent audit verify",
        description="Verify the agent's HMAC-chained audit log, rotated files included.",
    )
    parser.add_argument("file", type=Path, help="the current audit log file (audit.jsonl)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--state-dir", type=Path, help="agent state directory holding audit.key (default: XDG)"
    )
    source.add_argument("--key-file", type=Path, help="the audit.key file itself")
    return parser


def _read_key(args: argparse.Namespace) -> bytes:
    """Read the key; never create one (a fresh key would verify nothing)."""
    if args.key_file is not None:
        path = args.key_file
    else:
        path = (args.state_dir or audit_key.default_state_dir()) / audit_key.KEY_FILE
    key = Path(path).read_bytes()
    if len(key) != audit_key.KEY_BYTES:
        raise ValueError(f"{path} is not a {audit_key.KEY_BYTES}-byte key")
    return key


def main(argv: Sequence[str] | None = None) -> int:
    """`tetherbed agent audit verify FILE`: 0 intact, 1 broken, 2 usage error."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else 2
    try:
        key = _read_key(args)
    except (OSError, ValueError) as exc:
        print(f"error: cannot read the audit key: {exc}", file=sys.stderr)
        return 2
    try:
        report = verify(args.file, key)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.summary())
    return 0 if report.ok else 1
