"""The recording of a run read back: the recorder's wire records and the clients' legs.

The recorder (`tetherbed proxy --record`) writes what crossed between the load
agents and the hub as event-log lines (simulator/wiretap/records.py); the
clients write their legs as history records (users/client_legs.py). Merged
into one `History`, they are judged by the simulator's own checkers, exactly
as a scenario's recording would be.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tetherbed.simulator.history import History, Record
from tetherbed.simulator.wiretap.records import process_of

#: The node name the recorder gives the load agents' link (`--record agents=load=…`).
NODE = "load"


class RecordTail:
    """New complete lines of a file that another process is still writing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as source:
                source.seek(self._offset)
                chunk = source.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        records = []
        for line in lines:
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return records


def read_records(path: Path) -> list[dict[str, Any]]:
    return RecordTail(path).read()


def wire_history_records(raw: Iterable[dict[str, Any]], t0: float) -> list[Record]:
    """The recorder's lines as history records of process `wire:load`."""
    process = process_of(NODE)
    found = []
    for index, line in enumerate(raw):
        value = {k: v for k, v in line.items() if k not in ("t", "event", "session", "machine")}
        found.append(
            Record(
                index,
                float(line["t"]) - t0,
                process,
                "event",
                str(line["event"]),
                value,
                line.get("session"),
                line.get("machine"),
            )
        )
    return found


def leg_records(folder: Path, t0: float) -> list[Record]:
    found = []
    for path in sorted(folder.glob("client-legs-*.jsonl")):
        for index, line in enumerate(read_records(path)):
            found.append(
                Record(
                    index,
                    float(line["time"]) - t0,
                    str(line["process"]),
                    line["type"],
                    str(line["f"]),
                    line.get("value"),
                    line.get("session"),
                    None,
                    line.get("req"),
                )
            )
    return found


def merged_history(wire: list[dict[str, Any]], legs_folder: Path, t0: float) -> History:
    """One history of the run, ordered by time, ready for the checkers."""
    return History.merged([*wire_history_records(wire, t0), *leg_records(legs_folder, t0)])
