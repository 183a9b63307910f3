"""The decision log: one JSON line per released frame, plus a header and an outcome.

    {"schedule": "explore", "seed": 7, "bound": "200ms,16", ...}          header
    {"n": 0, "t": 12.5, "frame": ["agent-w", 0, "down", 3], "type": "FILE_READ",
     "id": "a", "hold": 140, "held": [["agent-w", 0, "down", 4]], "why": "due"}
    {"summary": {"released": 9, "divergence": {...}}}                    when it stops
    {"outcome": {"verdict": "fail", "failed": ["exactly_one_answer"]}}    appended

`n` is the release order, `t` milliseconds since the scheduler started,
`hold` the hold drawn for the frame (explore mode), `held` the other frames
the proxy was holding at that moment: a replay waits for them too before it
releases this one, so that a frame that went out "together with" others goes
out together with them again. `why` says what released it: `due` (its hold
ended), `count` (the count bound), and in a replay `replay`, `unexpected` (not
in the log), `late` (in the log, but given up on before it came) or
`past-log`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tetherbed.simulator.proxy.scheduler.frames import FrameKey


class DecisionLogError(ValueError):
    """A decision log that cannot be read."""


@dataclass(frozen=True, slots=True)
class Decision:
    n: int
    t: float
    key: FrameKey
    kind: str
    request_id: str | None
    held: tuple[FrameKey, ...] = ()
    hold: float | None = None
    why: str = "due"

    def to_json(self) -> dict[str, Any]:
        line: dict[str, Any] = {
            "n": self.n,
            "t": round(self.t, 3),
            "frame": self.key.to_json(),
            "type": self.kind,
            "id": self.request_id,
            "held": [key.to_json() for key in self.held],
            "why": self.why,
        }
        if self.hold is not None:
            line["hold"] = round(self.hold, 3)
        return line

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Decision:
        return cls(
            n=int(raw["n"]),
            t=float(raw.get("t", 0.0)),
            key=FrameKey.from_json(raw["frame"]),
            kind=str(raw.get("type")),
            request_id=None if raw.get("id") is None else str(raw["id"]),
            held=tuple(FrameKey.from_json(k) for k in raw.get("held") or ()),
            hold=raw.get("hold"),
            why=str(raw.get("why", "due")),
        )


@dataclass(slots=True)
class DecisionLog:
    """A decision log as read back: its header, its decisions and the outcome."""

    header: dict[str, Any] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    outcome: dict[str, Any] | None = None
    #: What the scheduler said when it stopped (released, divergence).
    summary: dict[str, Any] | None = None

    @classmethod
    def read(cls, path: Path) -> DecisionLog:
        log = cls()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise DecisionLogError(f"cannot read the decision log {path}: {exc}") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                if "schedule" in raw:
                    log.header = raw
                elif "outcome" in raw:
                    log.outcome = raw["outcome"]
                elif "summary" in raw:
                    log.summary = raw["summary"]
                else:
                    log.decisions.append(Decision.from_json(raw))
            except (ValueError, KeyError, TypeError) as exc:
                raise DecisionLogError(f"{path}:{number}: not a decision: {exc}") from None
        if not log.header:
            raise DecisionLogError(f"{path}: no header line: is this a decision log?")
        log.decisions.sort(key=lambda d: d.n)
        return log


class DecisionWriter:
    """Writes a decision log line by line (flushed: a killed run keeps what it decided)."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = path.open("w", encoding="utf-8")
        self._line(header)

    def write(self, decision: Decision) -> None:
        self._line(decision.to_json())

    def summary(self, summary: dict[str, Any]) -> None:
        self._line({"summary": summary})

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _line(self, raw: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(raw, separators=(",", ":")) + "\n")
        self._file.flush()


def append_outcome(path: Path, outcome: dict[str, Any]) -> None:
    """Add what the run's checkers said, so a replay knows which failure to look for."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"outcome": outcome}, separators=(",", ":")) + "\n")
