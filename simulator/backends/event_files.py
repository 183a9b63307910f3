"""Reads the event files real hubs and agents write into the run's history.

A hub started with `--events FILE` and an agent with `--journal FILE` write
one JSON line per event (runtime/event_log.py). Backends that run real
processes or containers register those files here and call `ingest()` as
often as they like: each call moves only the lines added since the last one,
converting their wall-clock stamps into the run's time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tetherbed.runtime.event_log import read_events
from tetherbed.simulator.recorder import Recorder


@dataclass
class _Source:
    path: Path
    process: str
    session: str | None
    machine: str | None
    read: int = 0
    #: Each line names its own session and machine (the hub's, a recorder's).
    own_fields: bool = False


class EventFiles:
    def __init__(self, recorder: Recorder, wall0: float) -> None:
        self._recorder = recorder
        self._wall0 = wall0
        self._sources: list[_Source] = []

    def hub(self, path: Path) -> None:
        """The hub's events; each line names its own session and machine."""
        self._sources.append(_Source(path, "hub", None, None, own_fields=True))

    def agent(self, path: Path, process: str, session: str, machine: str) -> None:
        """An agent's journal; its lines are about that agent's session."""
        self._sources.append(_Source(path, process, session, machine))

    def wire(self, path: Path, process: str) -> None:
        """A wire recorder's records (`wiretap.records.file_sink`), as `process`."""
        self._sources.append(_Source(path, process, None, None, own_fields=True))

    def ingest(self) -> None:
        for source in self._sources:
            lines = read_events(source.path)
            for line in lines[source.read :]:
                fields = dict(line)
                at = fields.pop("t") - self._wall0
                name = fields.pop("event")
                session = fields.pop("session", None) if source.own_fields else source.session
                machine = fields.pop("machine", None) if source.own_fields else source.machine
                self._recorder.event(
                    source.process, name, fields, session=session, machine=machine, time=at
                )
            source.read = len(lines)
