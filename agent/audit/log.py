"""The agent's tamper-evident audit log: an HMAC-chained JSON Lines file.

Every operation the agent performs is appended as one record, so that an
operator can later prove what ran on this machine and that nobody without the
machine-local key edited, removed, reordered or inserted a record.

Record format (one JSON object per line, exactly these ten fields)::

    ts         number   wall-clock seconds (Clock.time()), rounded to 1 µs
    session_id string | null
    machine_id string
    request_id string | null
    op         string   the request type ("FILE_WRITE") or an agent event
    details    object   what `agent/audit/redaction.py` allows to be recorded
    result     string   "ok", an error code, ...
    seq        integer  0 for the first record ever, then +1 per record,
                        continuing across rotated files
    prev_hmac  string   `hmac` of the previous record; 64 "0" for seq 0
    hmac       string   see below

Chain key: ``K = HMAC-SHA256(machine_key, "tetherbed/audit-chain/v1")`` where
``machine_key`` is the 32 bytes of the state directory's ``audit.key``
(`tetherbed.agent.audit.key.derive`). `AuditLog` and `verify` both take the
machine key and derive K themselves.

``hmac = lowercase_hex(HMAC-SHA256(K, canonical(record minus "hmac")))``

Canonical JSON, exactly as ``json.dumps(obj, sort_keys=True,
separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")``:

- object keys sorted by Unicode code point, at every depth;
- no whitespace outside strings: ``,`` between items, ``:`` after keys;
- strings in double quotes, written as UTF-8; only ``"`` ``\\`` and control
  characters below U+0020 are escaped (``\\"`` ``\\\\`` ``\\b`` ``\\f`` ``\\n``
  ``\\r`` ``\\t``, others as ``\\u00XX`` in lowercase hex); ``/`` and
  non-ASCII characters are not escaped;
- integers in plain decimal; floats in Python's ``repr`` form, the shortest
  text that round-trips (``1700000000.25``, ``1.0``, ``1e-05``, ``1e+22``):
  a float that happens to be integral keeps its ``.0``, so a verifier must
  keep integers and floats apart when re-serialising;
- ``true``, ``false``, ``null``; NaN and ±Infinity are never written.

Each line on disk is the canonical JSON of the whole record (``hmac``
included) followed by ``\\n``. Files rotate by size: ``audit.jsonl`` is the
current file, ``audit.jsonl.1`` the newest rotated one, ``audit.jsonl.N`` the
oldest kept; the chain runs unbroken from the oldest file to the current one.

A crash can leave a torn last line. On the next start the writer does not
continue silently: it appends a ``log_recovered`` record, chained to the last
good record, whose details carry ``torn_bytes`` and ``torn_sha256`` (length
and SHA-256 of the torn line's bytes, without any newline); the verifier
accepts exactly that line, and only when so attested.

What a chain cannot show by itself: whole records cut from the *end* of the
newest file, or the oldest files deleted (rotation deletes them too; the
verifier reports where the surviving chain starts). Detecting those needs an
anchor outside the machine, such as the `audit_log_bytes` the agent reports.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from tetherbed.agent.audit.key import AUDIT_CHAIN_LABEL, derive
from tetherbed.runtime.clock import Clock

DEFAULT_FILE_NAME = "audit.jsonl"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_KEEP = 5

GENESIS_HMAC = "0" * 64
FIELDS = (
    "ts",
    "session_id",
    "machine_id",
    "request_id",
    "op",
    "details",
    "result",
    "seq",
    "prev_hmac",
    "hmac",
)

#: The writer's own event: a torn line was found and left in place.
LOG_RECOVERED = "log_recovered"

_TAIL_CHUNK = 64 * 1024


class AuditLogError(Exception):
    """The existing log cannot be continued safely (altered, or another key)."""


def chain_key(machine_key: bytes) -> bytes:
    """The key that signs the chain, derived so the machine key signs nothing directly."""
    if not machine_key:
        raise ValueError("the audit key is empty")
    return derive(machine_key, AUDIT_CHAIN_LABEL)


def canonical_json(value: Any) -> bytes:
    """The one byte form that is signed; see the module docstring."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def record_hmac(key: bytes, record: dict[str, Any]) -> str:
    """HMAC of a record without its `hmac` field, under the *chain* key."""
    body = {name: value for name, value in record.items() if name != "hmac"}
    return hmac.new(key, canonical_json(body), hashlib.sha256).hexdigest()


def rotated_files(path: Path) -> list[tuple[int, Path]]:
    """`path.N` siblings that exist, newest (N=1) first."""
    pattern = re.compile(re.escape(path.name) + r"\.([1-9][0-9]*)")
    found: list[tuple[int, Path]] = []
    try:
        entries = list(path.parent.iterdir())
    except FileNotFoundError:
        return []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match and entry.is_file():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def _valid_record(key: bytes, raw: bytes) -> dict[str, Any] | None:
    """The record on this line if it is one of ours (well-formed, hmac verifies)."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(record, dict) or set(record) != set(FIELDS):
        return None
    seq, mac = record["seq"], record["hmac"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0 or not isinstance(mac, str):
        return None
    try:
        expected = record_hmac(key, record)
    except (TypeError, ValueError):
        return None
    return record if hmac.compare_digest(expected, mac) else None


def _read_tail(path: Path) -> tuple[bytes | None, bytes]:
    """(last complete line without its newline, bytes after the last newline)."""
    with path.open("rb") as fh:
        pos = fh.seek(0, os.SEEK_END)
        buf = b""
        while pos > 0 and buf.count(b"\n") < 2:
            step = min(_TAIL_CHUNK, pos)
            pos -= step
            fh.seek(pos)
            buf = fh.read(step) + buf
    end = buf.rfind(b"\n")
    if end < 0:
        return None, buf
    start = buf.rfind(b"\n", 0, end) + 1
    return buf[start:end], buf[end + 1 :]


def _check_types(
    session_id: object, request_id: object, op: object, details: object, result: object
) -> None:
    for name, value in (("session_id", session_id), ("request_id", request_id)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a string or None, not {type(value).__name__}")
    for name, value in (("op", op), ("result", result)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    if not isinstance(details, dict):
        raise TypeError(f"details must be a dict, not {type(details).__name__}")


def _fsync_dir(directory: Path) -> None:
    """Make renames and creations in `directory` durable (best effort)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class AuditLog:
    """Appends chained records to `path`, rotating by size; safe across threads.

    `key` is the machine-local key (`audit_key.load_or_create`); the chain key
    is derived from it. `max_bytes` bounds one file (a single larger record
    still gets a file of its own); `keep` is how many rotated files survive
    besides the current one. Raises AuditLogError when the existing log ends
    in a record this key cannot verify, rather than chain onto it.
    """

    def __init__(
        self,
        path: Path,
        key: bytes,
        *,
        machine_id: str,
        clock: Clock,
        max_bytes: int = DEFAULT_MAX_BYTES,
        keep: int = DEFAULT_KEEP,
    ) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        if keep < 0:
            raise ValueError("keep must not be negative")
        self.path = Path(path)
        self.machine_id = machine_id
        self._key = chain_key(key)
        self._clock = clock
        self._max_bytes = max_bytes
        self._keep = keep
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._seq = 0
        self._prev = GENESIS_HMAC
        self._current_size = 0
        self._total_size = 0
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._lock:
            self._resume()

    # --- public ------------------------------------------------------------

    def record(
        self,
        *,
        session_id: str | None,
        request_id: str | None,
        op: str,
        details: dict[str, Any],
        result: str,
    ) -> dict[str, Any]:
        """Append one record, durably (fsync), and return it.

        Raises ValueError/TypeError, writing nothing, when a field has the
        wrong type or `details` is not canonical-JSON-safe (NaN, lone
        surrogates, non-JSON values): a record the verifier would reject is
        never written.
        """
        _check_types(session_id, request_id, op, details, result)
        with self._lock:
            if self._fd is None:
                # A previous write failed (or the log was closed): find out
                # from disk what really landed before chaining onto it.
                self._resume()
            return self._append(session_id, request_id, op, details, result)

    @property
    def size_bytes(self) -> int:
        """Audit bytes on disk, current plus rotated files (STATUS audit_log_bytes)."""
        return self._total_size

    @property
    def bytes_written(self) -> int:
        """Same as `size_bytes`: what the audit log occupies on disk now."""
        return self._total_size

    @property
    def next_seq(self) -> int:
        return self._seq

    @property
    def last_hmac(self) -> str:
        return self._prev

    def close(self) -> None:
        with self._lock:
            self._close_fd()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- writing -----------------------------------------------------------

    def _append(
        self,
        session_id: str | None,
        request_id: str | None,
        op: str,
        details: dict[str, Any],
        result: str,
        *,
        end_torn_line: bool = False,
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            "ts": round(self._clock.time(), 6),
            "session_id": session_id,
            "machine_id": self.machine_id,
            "request_id": request_id,
            "op": op,
            "details": details,
            "result": result,
            "seq": self._seq,
            "prev_hmac": self._prev,
        }
        try:
            record["hmac"] = record_hmac(self._key, record)
            line = canonical_json(record) + b"\n"
        except UnicodeEncodeError as exc:
            raise ValueError(f"audit record is not valid UTF-8: {exc}") from exc
        if self._current_size > 0 and self._current_size + len(line) > self._max_bytes:
            self._rotate()
        elif end_torn_line:
            # Still the file with the torn line: give the record a line of its own.
            line = b"\n" + line
        self._write(line)
        self._seq += 1
        self._prev = record["hmac"]
        return record

    def _write(self, data: bytes) -> None:
        """Write all of `data` and fsync it; on failure, forget our state."""
        if self._fd is None:
            self._open()
        assert self._fd is not None
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                self._current_size += written
                self._total_size += written
                view = view[written:]
            os.fsync(self._fd)
        except OSError:
            # Part of the line may be on disk; the next record() re-reads the
            # tail and notes a torn line rather than appending after it.
            self._close_fd()
            raise

    def _open(self) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self._fd = os.open(self.path, flags, 0o600)
        self._current_size = os.fstat(self._fd).st_size

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def _rotate(self) -> None:
        """current → .1 → .2 …, dropping what is beyond `keep`; the chain goes on."""
        self._close_fd()
        for number, old in reversed(rotated_files(self.path)):
            if number >= self._keep:
                self._total_size -= old.stat().st_size
                old.unlink()
            else:
                old.rename(old.with_name(f"{self.path.name}.{number + 1}"))
        if self._keep > 0:
            self.path.rename(self.path.with_name(f"{self.path.name}.1"))
        else:
            self._total_size -= self.path.stat().st_size
            self.path.unlink()
        _fsync_dir(self.path.parent)
        self._open()
        _fsync_dir(self.path.parent)

    # --- resuming ----------------------------------------------------------

    def _resume(self) -> None:
        """Continue the chain from what is on disk; note a torn line if there is one."""
        self._close_fd()
        self._seq, self._prev = 0, GENESIS_HMAC
        torn: tuple[Path, bytes] | None = None
        finish_line = False
        for path in [self.path] + [p for _, p in rotated_files(self.path)]:
            if not path.exists():
                continue
            last, tail = _read_tail(path)
            if tail:
                record = _valid_record(self._key, tail)
                if record is not None:
                    # A whole record that only lacks its newline: finish it.
                    self._continue_from(record)
                    finish_line = path == self.path
                    break
                if torn is not None:
                    raise AuditLogError(
                        f"{path} and {torn[0]} both end in a torn line; "
                        "move the audit log aside to start a new chain"
                    )
                torn = (path, tail)
            if last is not None:
                record = _valid_record(self._key, last)
                if record is None:
                    raise AuditLogError(
                        f"the last record of {path} does not verify under this machine's "
                        "audit key (altered, or written with another key); run "
                        "`tetherbed agent audit verify`, then move the log aside"
                    )
                self._continue_from(record)
                break
        self._open()
        self._total_size = self._current_size + sum(
            p.stat().st_size for _, p in rotated_files(self.path)
        )
        if finish_line:
            self._write(b"\n")
        if torn is not None:
            torn_path, torn_bytes = torn
            self._append(
                None,
                None,
                LOG_RECOVERED,
                {
                    "reason": "torn_line",
                    "file": torn_path.name,
                    "torn_bytes": len(torn_bytes),
                    "torn_sha256": hashlib.sha256(torn_bytes).hexdigest(),
                },
                "recovered",
                end_torn_line=torn_path == self.path,
            )

    def _continue_from(self, record: dict[str, Any]) -> None:
        self._seq = record["seq"] + 1
        self._prev = record["hmac"]
