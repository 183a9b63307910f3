"""The audit log writer: chain format, resuming, torn lines, rotation, threads, size."""

from __future__ import annotations

import errno
import hashlib
import hmac
import itertools
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.audit import log as audit
from tetherbed.agent.audit.key import AUDIT_CHAIN_LABEL
from tetherbed.agent.audit.log import (
    FIELDS,
    GENESIS_HMAC,
    LOG_RECOVERED,
    AuditLog,
    AuditLogError,
    canonical_json,
)
from tetherbed.agent.audit.verify import verify
from tetherbed.runtime.clock import ManualClock

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))


def open_log(path: Path, key: bytes = KEY, **options: Any) -> AuditLog:
    return AuditLog(path, key, machine_id="machine-1", clock=ManualClock(), **options)


def write(log: AuditLog, count: int, *, start: int = 0) -> list[dict[str, Any]]:
    return [
        log.record(
            session_id="session-1",
            request_id=f"req-{start + i}",
            op="FILE_READ",
            details={"path": f"/work/file-{start + i}.txt", "offset": 0},
            result="ok",
        )
        for i in range(count)
    ]


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def records_of(*paths: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in paths for line in lines_of(path)]


def independent_hmac(key: bytes, record: dict[str, Any]) -> str:
    """The documented definition, spelled out without the module's helpers."""
    chain_key = hmac.new(key, AUDIT_CHAIN_LABEL.encode(), hashlib.sha256).digest()
    body = {k: v for k, v in record.items() if k != "hmac"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(chain_key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def disk_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.name.startswith("audit.jsonl"))


# --- format and chain ------------------------------------------------------------


def test_records_form_a_chain_with_exactly_the_documented_fields(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with open_log(path) as log:
        returned = write(log, 5)

    records = records_of(path)
    assert records == returned
    assert [r["seq"] for r in records] == [0, 1, 2, 3, 4]
    assert records[0]["prev_hmac"] == GENESIS_HMAC
    for before, after in itertools.pairwise(records):
        assert after["prev_hmac"] == before["hmac"]
    for line, record in zip(lines_of(path), records, strict=True):
        assert set(record) == set(FIELDS)
        assert record["hmac"] == independent_hmac(KEY, record)
        assert len(record["hmac"]) == 64
        assert line == canonical_json(record)  # each line is itself canonical
    assert records[0]["machine_id"] == "machine-1"
    assert records[0]["ts"] == 1_700_000_000.0
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_canonical_json_is_the_documented_byte_form() -> None:
    value = {"b": 1, "a": 'é\n/"', "c": 1.0, "d": [None, True, 1e-05], "A": {"z": 0, "y": 0}}
    assert canonical_json(value) == (
        b'{"A":{"y":0,"z":0},"a":"\xc3\xa9\\n/\\"","b":1,"c":1.0,"d":[null,true,1e-05]}'
    )
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "\ud800", object()])
def test_unencodable_details_are_refused_without_writing(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "audit.jsonl"
    log = open_log(path)
    write(log, 1)
    before = path.read_bytes()
    with pytest.raises((ValueError, TypeError)):
        log.record(session_id=None, request_id=None, op="X", details={"v": bad}, result="ok")
    assert path.read_bytes() == before
    write(log, 1, start=1)
    assert verify(path, KEY).ok
    assert [r["seq"] for r in records_of(path)] == [0, 1]


@pytest.mark.parametrize(
    "fields",
    [{"op": 1}, {"result": None}, {"session_id": 5}, {"request_id": b"x"}, {"details": []}],
)
def test_fields_of_the_wrong_type_are_refused(tmp_path: Path, fields: dict[str, Any]) -> None:
    log = open_log(tmp_path / "audit.jsonl")
    record = {"session_id": None, "request_id": None, "op": "X", "details": {}, "result": "ok"}
    with pytest.raises(TypeError):
        log.record(**{**record, **fields})
    assert log.size_bytes == 0 and log.next_seq == 0


def test_ts_comes_from_the_clock(tmp_path: Path) -> None:
    clock = ManualClock(start=100.0)
    log = AuditLog(tmp_path / "audit.jsonl", KEY, machine_id="m", clock=clock)
    clock.advance(2.5)
    record = log.record(session_id=None, request_id=None, op="connected", details={}, result="ok")
    assert record["ts"] == 102.5


# --- resuming --------------------------------------------------------------------


def test_resume_after_restart_continues_seq_and_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with open_log(path) as log:
        first = write(log, 3)
    with open_log(path) as log:
        assert log.next_seq == 3
        assert log.last_hmac == first[-1]["hmac"]
        second = write(log, 2, start=3)

    assert [r["seq"] for r in second] == [3, 4]
    assert second[0]["prev_hmac"] == first[-1]["hmac"]
    report = verify(path, KEY)
    assert report.ok and report.records == 5


def test_torn_last_line_is_noted_not_silently_continued(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with open_log(path) as log:
        written = write(log, 3)
    torn = lines_of(path)[-1][:40]
    with path.open("ab") as fh:
        fh.write(torn)  # a crash in the middle of writing seq 3

    with open_log(path) as log:
        write(log, 1, start=3)

    lines = lines_of(path)
    assert lines[3] == torn
    recovered = json.loads(lines[4])
    assert recovered["op"] == LOG_RECOVERED
    assert recovered["seq"] == 3
    assert recovered["prev_hmac"] == written[-1]["hmac"]
    assert recovered["details"]["torn_bytes"] == len(torn)
    assert recovered["details"]["torn_sha256"] == hashlib.sha256(torn).hexdigest()
    assert json.loads(lines[5])["seq"] == 4
    report = verify(path, KEY)
    assert report.ok, report.summary()
    assert report.records == 5
    assert [(r.line, r.noted_by_seq) for r in report.recoveries] == [(4, 3)]


def test_torn_very_first_record_recovers_to_genesis(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b'{"details":{"pa')
    with open_log(path) as log:
        write(log, 1)
    records = [json.loads(line) for line in lines_of(path)[1:]]
    assert [(r["op"], r["seq"]) for r in records] == [(LOG_RECOVERED, 0), ("FILE_READ", 1)]
    assert records[0]["prev_hmac"] == GENESIS_HMAC
    assert verify(path, KEY).ok


def test_complete_record_missing_only_its_newline_is_finished(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with open_log(path) as log:
        write(log, 2)
    path.write_bytes(path.read_bytes()[:-1])
    with open_log(path) as log:
        write(log, 1, start=2)
    assert [r["op"] for r in records_of(path)] == ["FILE_READ"] * 3
    assert verify(path, KEY).ok


def test_altered_last_record_refuses_to_continue(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with open_log(path) as log:
        write(log, 2)
    path.write_bytes(path.read_bytes().replace(b'"result":"ok","seq":1', b'"result":"no","seq":1'))
    with pytest.raises(AuditLogError, match="does not verify"):
        open_log(path)


def test_log_written_with_another_key_refuses_to_continue(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with open_log(path, OTHER_KEY) as log:
        write(log, 2)
    with pytest.raises(AuditLogError):
        open_log(path)


def test_failed_partial_write_is_recovered_before_the_next_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.jsonl"
    log = open_log(path)
    write(log, 2)
    real_write = os.write
    target = log._fd

    def short_then_fail(fd: int, data: Any) -> int:
        if fd == target:
            real_write(fd, bytes(data[:25]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(audit.os, "write", short_then_fail)
    with pytest.raises(OSError):
        write(log, 1, start=2)
    monkeypatch.setattr(audit.os, "write", real_write)

    after = write(log, 1, start=3)[0]
    lines = lines_of(path)
    assert len(lines[2]) == 25  # the torn bytes, left in place as evidence
    recovered = json.loads(lines[3])
    assert (recovered["op"], recovered["seq"]) == (LOG_RECOVERED, 2)
    assert after["seq"] == 3 and after["prev_hmac"] == recovered["hmac"]
    report = verify(path, KEY)
    assert report.ok, report.summary()
    assert len(report.recoveries) == 1
    assert log.size_bytes == disk_bytes(tmp_path)


# --- rotation --------------------------------------------------------------------


def test_rotation_continues_one_chain_across_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with open_log(path, max_bytes=1200, keep=3) as log:
        write(log, 40)

    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.3"]
    files = [tmp_path / "audit.jsonl.3", tmp_path / "audit.jsonl.2", tmp_path / "audit.jsonl.1"]
    files.append(path)
    for file in files:
        assert 0 < file.stat().st_size <= 1200
    for older, newer in itertools.pairwise(files):
        assert records_of(newer)[0]["prev_hmac"] == records_of(older)[-1]["hmac"]
        assert records_of(newer)[0]["seq"] == records_of(older)[-1]["seq"] + 1
    chain = records_of(*files)
    assert [r["seq"] for r in chain] == list(range(chain[0]["seq"], 40))

    report = verify(path, KEY)
    assert report.ok, report.summary()
    assert report.files == files
    assert report.first_seq == chain[0]["seq"] > 0
    assert report.last_seq == 39


def test_rotation_survives_restart_and_crash_between_rename_and_write(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with open_log(path, max_bytes=1200, keep=5) as log:
        last = write(log, 3)[-1]
    assert not (tmp_path / "audit.jsonl.1").exists()
    path.rename(tmp_path / "audit.jsonl.1")  # rotated, then crashed before any new record
    with open_log(path, max_bytes=1200, keep=5) as log:
        nxt = write(log, 1, start=9)[0]
    assert nxt["seq"] == last["seq"] + 1
    assert nxt["prev_hmac"] == last["hmac"]
    assert verify(path, KEY).ok


def test_keep_zero_keeps_only_the_current_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with open_log(path, max_bytes=800, keep=0) as log:
        write(log, 12)
        assert log.size_bytes == path.stat().st_size
    assert [p.name for p in tmp_path.iterdir()] == ["audit.jsonl"]
    report = verify(path, KEY)
    assert report.ok and report.last_seq == 11


def test_a_lowered_keep_drops_the_surplus_rotated_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with open_log(path, max_bytes=600, keep=5) as log:
        write(log, 20)
    with open_log(path, max_bytes=600, keep=2) as log:
        write(log, 4, start=20)
        assert log.size_bytes == disk_bytes(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "audit.jsonl",
        "audit.jsonl.1",
        "audit.jsonl.2",
    ]
    assert verify(path, KEY).ok


# --- size accounting and threads -------------------------------------------------


def test_size_bytes_matches_the_files_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = open_log(path, max_bytes=1000, keep=2)
    assert log.size_bytes == 0
    for i in range(30):
        write(log, 1, start=i)
        assert log.size_bytes == disk_bytes(tmp_path)
        assert log.bytes_written == log.size_bytes
    log.close()
    assert open_log(path, max_bytes=1000, keep=2).size_bytes == disk_bytes(tmp_path)


def test_concurrent_writers_produce_one_valid_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = open_log(path, max_bytes=20_000, keep=50)
    threads, per_thread = 8, 60
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                log.record(
                    session_id="s",
                    request_id=f"t{n}-{i}",
                    op="EXECUTE_COMMAND",
                    details={"command": "true"},
                    result="ok",
                )
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    log.close()

    assert errors == []
    report = verify(path, KEY)
    assert report.ok, report.summary()
    assert report.records == threads * per_thread
    assert len(report.files) > 1  # rotation happened under contention too
    chain = records_of(*report.files)
    assert [r["seq"] for r in chain] == list(range(threads * per_thread))
    assert len({r["request_id"] for r in chain}) == threads * per_thread
    assert log.size_bytes == disk_bytes(tmp_path)


def test_invalid_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        open_log(tmp_path / "a.jsonl", max_bytes=0)
    with pytest.raises(ValueError):
        open_log(tmp_path / "a.jsonl", keep=-1)
    with pytest.raises(ValueError):
        open_log(tmp_path / "a.jsonl", key=b"")
