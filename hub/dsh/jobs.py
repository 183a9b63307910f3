"""Background jobs: executions that outlive the tool call that started them (§11.2, §11.6.3).

A job is one `computer-exec` execution owned by the user who started it. Its
output goes into a bounded ring (the tail is kept, the count of bytes seen is
exact), so `job_output` can page with `since` and never holds more than the
ring's size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class OutputRing:
    capacity: int
    _data: bytearray = field(default_factory=bytearray)
    #: Bytes ever appended; offsets handed out to readers count from here.
    total: int = 0

    def append(self, data: bytes) -> None:
        self.total += len(data)
        self._data += data
        excess = len(self._data) - self.capacity
        if excess > 0:
            del self._data[:excess]

    @property
    def start(self) -> int:
        """The offset of the oldest byte still kept."""
        return self.total - len(self._data)

    def read(self, since: int = 0) -> tuple[bytes, int, bool]:
        """Bytes from offset `since` (or the oldest kept), the next offset, and
        whether bytes between `since` and what is returned were dropped."""
        since = max(0, since)
        lost = since < self.start
        begin = max(since, self.start) - self.start
        return bytes(self._data[begin:]), self.total, lost


@dataclass(slots=True)
class Job:
    id: str
    user: str
    label: str
    request_id: str
    computer_id: str
    computer_name: str
    command: str
    started_at: float
    ring: OutputRing
    kind: str = "computer-exec"
    running: bool = True
    killed: bool = False
    value: dict[str, Any] | None = None
    error: str | None = None
    ended_at: float | None = None

    def finish(self, value: dict[str, Any] | None, error: str | None, now: float) -> None:
        if not self.running:
            return
        self.running = False
        self.value = value
        self.error = error
        self.ended_at = now

    def view(self, since: int = 0) -> dict[str, Any]:
        data, offset, lost = self.ring.read(since)
        value = self.value or {}
        return {
            "jobId": self.id,
            "kind": self.kind,
            "label": self.label,
            "running": self.running,
            "killed": self.killed,
            "output": data.decode("utf-8", "replace"),
            "offset": offset,
            "truncated": lost,
            "exitCode": value.get("exitCode"),
            "timedOut": value.get("timedOut", False),
            "error": self.error,
        }
