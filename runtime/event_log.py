"""A JSONL event log that a process writes for the simulator to read back.

`tetherbed hub --events FILE` and `tetherbed agent --journal FILE` write one
line per event: `{"t": <wall time>, "event": name, ...fields}`. The process
backend merges these files into the run's history. Lines are written and
flushed one at a time, so a killed process loses at most the line it was
writing, and the reader ignores a torn last line.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

EventSink = Callable[..., None]


class EventLog:
    def __init__(self, path: Path | str, time: Callable[[], float]) -> None:
        self._file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._time = time
        self._lock = threading.Lock()

    def __call__(self, event: str, **fields: Any) -> None:
        line = json.dumps(
            {"t": self._time(), "event": event, **fields}, default=str, separators=(",", ":")
        )
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every complete line of an event log (a torn last line is skipped)."""
    events = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events
