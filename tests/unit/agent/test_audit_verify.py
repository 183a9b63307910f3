"""Verification: every kind of tampering is found, at the first broken link; the CLI."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.audit.key import load_or_create
from tetherbed.agent.audit.log import AuditLog, canonical_json, chain_key
from tetherbed.agent.audit.verify import Problem, main, verify
from tetherbed.runtime.clock import ManualClock

KEY = bytes(range(32))
WRONG_KEY = b"\xee" * 32


def build(path: Path, count: int, key: bytes = KEY, **options: Any) -> list[dict[str, Any]]:
    with AuditLog(path, key, machine_id="m", clock=ManualClock(), **options) as log:
        return [
            log.record(
                session_id="s",
                request_id=f"r{i}",
                op="FILE_DELETE",
                details={"path": f"/w/{i}", "recursive": False},
                result="ok",
            )
            for i in range(count)
        ]


def signed(record: dict[str, Any], key: bytes) -> bytes:
    """A record re-signed under `key` (the chain key is derived as the writer does)."""
    body = {k: v for k, v in record.items() if k != "hmac"}
    mac = hmac.new(chain_key(key), canonical_json(body), hashlib.sha256).hexdigest()
    return canonical_json({**body, "hmac": mac})


def edit_lines(path: Path, change: Any) -> None:
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"".join(line + b"\n" for line in change(lines)))


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    path = tmp_path / "audit.jsonl"
    build(path, 6)
    return path


def test_an_intact_log_verifies(log_path: Path) -> None:
    report = verify(log_path, KEY)
    assert report.ok and report.broken is None
    assert (report.records, report.first_seq, report.last_seq) == (6, 0, 5)
    assert report.summary() == "OK: 6 records"


def test_the_wrong_key_fails_on_the_first_record(log_path: Path) -> None:
    report = verify(log_path, WRONG_KEY)
    assert not report.ok
    assert report.broken is not None
    assert (report.broken.line, report.broken.problem) == (1, Problem.BAD_HMAC)


def test_an_edited_field_is_a_bad_hmac(log_path: Path) -> None:
    def change(lines: list[bytes]) -> list[bytes]:
        record = json.loads(lines[2])
        record["result"] = "error"
        lines[2] = canonical_json(record)
        return lines

    edit_lines(log_path, change)
    report = verify(log_path, KEY)
    assert not report.ok and report.broken is not None
    assert (report.broken.line, report.broken.seq) == (3, 2)
    assert report.broken.problem is Problem.BAD_HMAC
    assert "altered" in report.broken.reason
    assert report.records == 2
    assert report.summary().startswith(f"BROKEN at {log_path}:3 (seq 2): hmac does not match")


def test_an_edited_ts_with_kept_formatting_is_still_caught(log_path: Path) -> None:
    data = log_path.read_bytes()
    log_path.write_bytes(data.replace(b'"ts":1700000000.0', b'"ts":1700000001.0', 1))
    broken = verify(log_path, KEY).broken
    assert broken is not None and broken.line == 1 and broken.problem is Problem.BAD_HMAC


def test_a_deleted_line_breaks_the_prev_link(log_path: Path) -> None:
    edit_lines(log_path, lambda lines: lines[:2] + lines[3:])
    broken = verify(log_path, KEY).broken
    assert broken is not None
    assert (broken.line, broken.seq, broken.problem) == (3, 3, Problem.PREV_MISMATCH)
    assert "removed" in broken.reason


def test_a_swapped_pair_of_lines_is_found(log_path: Path) -> None:
    edit_lines(log_path, lambda lines: [*lines[:2], lines[3], lines[2], *lines[4:]])
    broken = verify(log_path, KEY).broken
    assert broken is not None
    assert (broken.line, broken.seq, broken.problem) == (3, 3, Problem.PREV_MISMATCH)


def test_an_inserted_line_forged_under_a_wrong_key_is_found(log_path: Path) -> None:
    def insert(lines: list[bytes]) -> list[bytes]:
        before = json.loads(lines[1])
        forged = {**before, "seq": 2, "prev_hmac": before["hmac"], "op": "EXECUTE_COMMAND"}
        forged["details"] = {"command": "rm -rf /"}
        return [*lines[:2], signed(forged, WRONG_KEY), *lines[2:]]

    edit_lines(log_path, insert)
    broken = verify(log_path, KEY).broken
    assert broken is not None
    assert (broken.line, broken.seq, broken.problem) == (3, 2, Problem.BAD_HMAC)


def test_a_seq_gap_is_found_even_when_signed_correctly(log_path: Path) -> None:
    def renumber(lines: list[bytes]) -> list[bytes]:
        before = json.loads(lines[1])
        record = json.loads(lines[2])
        record.update(seq=7, prev_hmac=before["hmac"])
        lines[2] = signed(record, KEY)
        return lines

    edit_lines(log_path, renumber)
    broken = verify(log_path, KEY).broken
    assert broken is not None
    assert (broken.line, broken.seq, broken.problem) == (3, 7, Problem.SEQ_GAP)


def test_a_truncated_last_line_is_found(log_path: Path) -> None:
    data = log_path.read_bytes()
    log_path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 30])
    report = verify(log_path, KEY)
    assert report.broken is not None
    assert (report.broken.line, report.broken.problem) == (6, Problem.MALFORMED)
    assert "torn" in report.broken.reason
    assert report.records == 5


def test_a_missing_field_is_named(log_path: Path) -> None:
    def drop(lines: list[bytes]) -> list[bytes]:
        record = json.loads(lines[4])
        del record["result"]
        lines[4] = canonical_json(record)
        return lines

    edit_lines(log_path, drop)
    broken = verify(log_path, KEY).broken
    assert broken is not None
    assert (broken.line, broken.seq, broken.problem) == (5, 4, Problem.MISSING_FIELD)
    assert "result" in broken.reason


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"", Problem.MALFORMED),
        (b"[1,2]", Problem.MALFORMED),
        (b"\xff\xfe", Problem.MALFORMED),
        (b'{"seq":1,"seq":2}', Problem.MALFORMED),
        (b'{"ts":NaN}', Problem.MALFORMED),
    ],
)
def test_malformed_lines_are_named(log_path: Path, line: bytes, problem: Problem) -> None:
    edit_lines(log_path, lambda lines: [*lines[:3], line, *lines[3:]])
    broken = verify(log_path, KEY).broken
    assert broken is not None and (broken.line, broken.problem) == (4, problem)


def test_a_wrongly_typed_field_is_named(log_path: Path) -> None:
    def retype(lines: list[bytes]) -> list[bytes]:
        record = json.loads(lines[0])
        record["seq"] = "0"
        lines[0] = canonical_json(record)
        return lines

    edit_lines(log_path, retype)
    broken = verify(log_path, KEY).broken
    assert broken is not None and broken.problem is Problem.BAD_FIELD and "seq" in broken.reason


def test_a_torn_line_is_excused_only_by_a_genuine_log_recovered(log_path: Path) -> None:
    """A forger cannot hide a removed record behind a fake recovery note."""

    def hide(lines: list[bytes]) -> list[bytes]:
        torn = lines[3][:20]
        before = json.loads(lines[2])
        note = {
            **before,
            "seq": 3,
            "prev_hmac": before["hmac"],
            "op": "log_recovered",
            "details": {"torn_bytes": len(torn), "torn_sha256": hashlib.sha256(torn).hexdigest()},
        }
        return [*lines[:3], torn, signed(note, WRONG_KEY)]

    edit_lines(log_path, hide)
    broken = verify(log_path, KEY).broken
    assert broken is not None
    assert (broken.line, broken.problem) == (4, Problem.MALFORMED)


def test_a_deleted_rotated_file_in_the_middle_is_found(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    build(path, 30, max_bytes=1500, keep=4)
    assert verify(path, KEY).ok
    (tmp_path / "audit.jsonl.2").unlink()

    report = verify(path, KEY)
    assert report.broken is not None
    assert report.broken.file == tmp_path / "audit.jsonl.1"
    assert (report.broken.line, report.broken.problem) == (1, Problem.PREV_MISMATCH)


def test_rotated_files_are_verified_oldest_first_and_lists_are_taken_as_given(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    build(path, 30, max_bytes=1500, keep=9)
    report = verify(path, KEY)
    assert report.ok and report.records == 30 and report.first_seq == 0
    assert [p.name for p in report.files][-3:] == ["audit.jsonl.2", "audit.jsonl.1", "audit.jsonl"]

    newest_first = list(reversed(report.files))
    assert not verify(newest_first, KEY).ok
    assert verify(report.files[-2:], KEY).ok  # a suffix of the chain is still a chain


def test_verifying_nothing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        verify(tmp_path / "audit.jsonl", KEY)


# --- the command line --------------------------------------------------------------


def test_cli_reports_ok_with_a_state_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    key = load_or_create(state)
    path = tmp_path / "audit.jsonl"
    build(path, 4, key)
    assert main([str(path), "--state-dir", str(state)]) == 0
    assert capsys.readouterr().out == "OK: 4 records\n"


def test_cli_reports_the_break_with_a_key_file(
    log_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "audit.key"
    key_file.write_bytes(KEY)
    edit_lines(log_path, lambda lines: lines[:1] + lines[2:])
    assert main([str(log_path), "--key-file", str(key_file)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"BROKEN at {log_path}:2 (seq 2): prev_hmac")


def test_cli_usage_errors_exit_2_and_never_create_a_key(
    log_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty_state = tmp_path / "empty-state"
    empty_state.mkdir()
    key_file = tmp_path / "short.key"
    key_file.write_bytes(b"short")
    assert main([]) == 2
    assert main([str(log_path), "--state-dir", str(empty_state)]) == 2
    assert not (empty_state / "audit.key").exists()
    assert main([str(log_path), "--key-file", str(key_file)]) == 2
    assert main([str(log_path), "--state-dir", "x", "--key-file", "y"]) == 2
    key_file.write_bytes(KEY)
    assert main([str(tmp_path / "missing.jsonl"), "--key-file", str(key_file)]) == 2
    assert "error" in capsys.readouterr().err
