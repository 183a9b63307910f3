"""The client leg of the recording: every request a load client sent, and every answer.

Written as history records (simulator/history.py) — `invoke` when a request
goes out, `ok`/`fail`/`info` for each answer that comes back, exactly as it
came, duplicates included — with the payload digests the wire recorder gives
the same payloads on the agents' side (simulator/wiretap/digest.py). The
takeover profile merges these files with the recorder's and judges them with
the simulator's own checkers. Times are wall-clock seconds; the analysis moves
them to the run's start. One file per Locust process.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO

from tetherbed.simulator.client import UNKNOWN_OUTCOME_CODES
from tetherbed.simulator.wiretap.digest import payload_digest

#: Files of this name pattern in the legs folder are client legs.
PATTERN = "client-legs-*.jsonl"


class ClientLegs:
    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"client-legs-{os.getpid()}.jsonl"
        self._file: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._process: dict[str, str] = {}

    def _write(self, record: dict[str, object]) -> None:
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")

    @staticmethod
    def _process_of(request_id: str) -> str:
        # The request id is "<client tag>-<n>": one history process per client.
        return "client:" + request_id.rsplit("-", 1)[0]

    def invoke(self, session: str, request_id: str, kind: str, payload: bytes) -> None:
        self._write(
            {
                "time": time.time(),
                "process": self._process_of(request_id),
                "type": "invoke",
                "f": kind,
                "value": {"digest": payload_digest(payload)},
                "session": session,
                "req": request_id,
            }
        )

    def complete(
        self, session: str, request_id: str, *, request: str, kind: str, code: str, payload: bytes
    ) -> None:
        """An answer of type `kind` to the request `request_id` (of type `request`)."""
        outcome = "ok"
        if kind == "ERROR":
            outcome = "info" if code in UNKNOWN_OUTCOME_CODES else "fail"
        value: dict[str, object] = {"type": kind, "digest": payload_digest(payload or b"{}")}
        if code:
            value["code"] = code
        self._write(
            {
                "time": time.time(),
                "process": self._process_of(request_id),
                "type": outcome,
                "f": request,
                "value": value,
                "session": session,
                "req": request_id,
            }
        )

    def close(self) -> None:
        self._file.close()
