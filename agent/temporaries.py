"""Temporary files in the user's tree, and removing what a killed agent left behind.

Atomic writes and cross-device moves need a temporary beside their target (a
rename only works within one file system). Two things keep a crash from
leaving one there for good:

- A write's data goes into an unnamed O_TMPFILE file, which the kernel frees if
  the process dies; it gets a name only for the instant between `linkat` and
  the `rename` that puts it in place.
- Every temporary that has a name is first recorded in a ledger in the agent's
  state directory, and struck off once it is renamed or removed. An agent
  killed with SIGKILL leaves its ledger behind; the next agent on the same root
  removes the temporaries it lists, then the ledger.

Ledgers are per process (`<root hash>-<pid>-<random>.jsonl`) and each holds an
exclusive flock while its agent runs, so a sweep never touches the ledger, or
the temporaries, of an agent that is still alive (a same-machine takeover runs
two for a moment), nor those of another root. A sweep removes only entries
whose name is a temporary's name, through the jail and without following links.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tetherbed.wire.errors import ProtocolError

if TYPE_CHECKING:
    from tetherbed.agent.path_jail import PathJail

log = logging.getLogger(__name__)

#: What every temporary in the user's tree is called; the sweep removes nothing else.
TEMP_NAME = re.compile(r"\.tetherbed-[0-9a-f]{16}\.tmp")


def temp_name() -> str:
    """A fresh hidden name, short enough for any file system's NAME_MAX."""
    return f".tetherbed-{secrets.token_hex(8)}.tmp"


class TemporaryLedger:
    """Where the temporaries of one agent process are recorded while they exist.

    Thread-safe: file operations run in worker threads. `TemporaryLedger(None)`
    records nothing (tests, and agents without a state directory).
    """

    def __init__(self, directory: Path | None, root: str = "") -> None:
        self._lock = threading.Lock()
        self._file = None
        self._directory = directory
        self.path: Path | None = None
        self._prefix = _root_key(root)
        if directory is None:
            return
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = directory / f"{self._prefix}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
        self._file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed by close()
        fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.path = path

    @contextlib.contextmanager
    def holding(self, directory: str, name: str) -> Iterator[None]:
        """Record `directory/name` for as long as the block may leave it on disk."""
        self._note("+", directory, name)
        try:
            yield
        finally:
            self._note("-", directory, name)

    def _note(self, op: str, directory: str, name: str) -> None:
        if self._file is None:
            return
        line = json.dumps({"op": op, "dir": directory, "name": name}, separators=(",", ":"))
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")  # one write(2): survives a SIGKILL

    def close(self) -> None:
        """The agent stops cleanly: nothing is pending, the ledger goes."""
        with self._lock:
            if self._file is None or self._file.closed:
                return
            self._file.close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def sweep(self, jail: PathJail) -> list[str]:
        """Remove what dead agents on this root left; the paths removed."""
        if self._directory is None:
            return []
        removed: list[str] = []
        for ledger in sorted(self._directory.glob(f"{self._prefix}-*.jsonl")):
            if ledger == self.path:
                continue
            with contextlib.suppress(OSError), open(ledger, encoding="utf-8") as file:
                try:
                    fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its agent is alive
                for directory, name in _pending(file):
                    if _remove(jail, directory, name):
                        removed.append(f"{directory}/{name}")
                ledger.unlink()
        if removed:
            log.warning("removed %d temporaries a killed agent left: %s", len(removed), removed)
        return removed


def _root_key(root: str) -> str:
    return hashlib.sha256(os.fsencode(root)).hexdigest()[:16]


def _pending(file: object) -> list[tuple[str, str]]:
    """Entries recorded and never struck off; a torn last line is ignored."""
    pending: dict[tuple[str, str], None] = {}
    for line in file:  # type: ignore[attr-defined]
        try:
            entry = json.loads(line)
            key = (str(entry["dir"]), str(entry["name"]))
        except (ValueError, KeyError, TypeError):
            continue
        if entry.get("op") == "+":
            pending[key] = None
        else:
            pending.pop(key, None)
    return list(pending)


def _remove(jail: PathJail, directory: str, name: str) -> bool:
    """Remove one leftover through the jail, never following a link; whether it was there."""
    if not TEMP_NAME.fullmatch(name):
        return False
    try:
        fd = jail.open_directory(directory, directory)
    except ProtocolError:
        return False  # gone, or no longer inside the root
    try:
        status = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(status.st_mode):
            shutil.rmtree(name, dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
