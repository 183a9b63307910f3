"""Where a running agent sends its audit records: one writer, off the event loop.

Records are queued and written (each fsync'd) by a worker thread in order, so
an operation's answer never waits on the disk. Each agent process writes its
own file under `<state_dir>/audit/` — the control daemon `control.jsonl`, a
session agent `<session>.jsonl` — because the HMAC chain is a single
sequence and two processes appending to one file would fork it. An exclusive
lock guards the file; a second process serving the same name (a same-machine
takeover on one host) writes `<name>.<pid>.jsonl` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
from pathlib import Path
from typing import Any

from tetherbed.agent.audit.key import load_or_create
from tetherbed.agent.audit.log import AuditLog
from tetherbed.runtime.clock import Clock

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def _lock(path: Path) -> int | None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


class AuditSink:
    def __init__(
        self, state_dir: Path, name: str, *, machine_id: str, clock: Clock, max_bytes: int
    ) -> None:
        directory = state_dir / "audit"
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        stem = _SAFE.sub("_", name)[:100] or "agent"
        self._lock_fd = _lock(directory / f"{stem}.lock")
        if self._lock_fd is None:
            stem = f"{stem}.{os.getpid()}"
            self._lock_fd = _lock(directory / f"{stem}.lock")
        self.path = directory / f"{stem}.jsonl"
        self.log = AuditLog(
            self.path,
            load_or_create(state_dir),
            machine_id=machine_id,
            clock=clock,
            max_bytes=max_bytes,
        )
        self._queue: asyncio.Queue[dict[str, Any] | None] | None = None
        self._writer: asyncio.Task[None] | None = None

    @property
    def size_bytes(self) -> int:
        return self.log.size_bytes

    def record(self, **record: Any) -> None:
        """Queue one record (never blocks the caller)."""
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._writer = asyncio.ensure_future(self._write_all())
        self._queue.put_nowait(record)

    def record_now(self, **record: Any) -> None:
        """Write one record synchronously (for the last words before exit)."""
        self.log.record(**record)

    async def _write_all(self) -> None:
        assert self._queue is not None
        while True:
            record = await self._queue.get()
            if record is None:
                return
            try:
                await asyncio.to_thread(self.log.record, **record)
            except Exception:
                log.exception("audit record could not be written")

    async def close(self) -> None:
        """Write everything queued, then close the file."""
        if self._queue is not None and self._writer is not None:
            self._queue.put_nowait(None)
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        self.log.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


class NullAuditSink:
    """An audit sink that keeps nothing: for simulated agents, whose runs are
    recorded in the simulator's history instead, and which must not touch a
    disk in the middle of virtual time."""

    size_bytes = 0

    def record(self, **record: Any) -> None:
        return None

    def record_now(self, **record: Any) -> None:
        return None

    async def close(self) -> None:
        return None
