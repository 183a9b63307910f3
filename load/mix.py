"""The request mix: which requests clients send, how often, with what payload.

`--mix FILE_STAT=4,FILE_READ=1,EXECUTE_COMMAND=1` weighs request types. Every
payload is valid for a real agent serving `root` (the load agents answer
anything), and every request's payload names its own id where the request
allows it, so that each one can be followed across the hub by its digest.
"""

from __future__ import annotations

import msgspec

from tetherbed.wire.catalog import ANSWERS
from tetherbed.wire.messages import MessageType

#: What a load run can send, and what a real agent needs to answer it.
SUPPORTED = ("FILE_STAT", "FILE_READ", "FILE_WRITE", "FILE_LIST", "EXECUTE_COMMAND")
DEFAULT_MIX = "FILE_STAT=4,FILE_READ=1,EXECUTE_COMMAND=1"
#: The file real agents serve for FILE_READ (created by `tetherbed load`).
DATA_FILE = "load-data.txt"


class MixError(ValueError):
    """A `--mix` that names an unknown type or a weight that is not a positive integer."""


def parse_mix(text: str) -> dict[str, int]:
    mix: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        kind, sep, weight = part.strip().partition("=")
        kind = kind.strip().upper()
        if kind not in SUPPORTED:
            raise MixError(f"--mix: {kind!r} is not one of {', '.join(SUPPORTED)}")
        try:
            value = int(weight) if sep else 1
        except ValueError:
            raise MixError(f"--mix: the weight of {kind} must be an integer") from None
        if value <= 0:
            raise MixError(f"--mix: the weight of {kind} must be positive")
        mix[kind] = mix.get(kind, 0) + value
    if not mix:
        raise MixError("--mix names no request type")
    return mix


def expected_answer(kind: str) -> str:
    return str(ANSWERS[MessageType(kind)])


class Payloads:
    """The JSON payload of each request type, for a request id."""

    def __init__(self, root: str, answer_bytes: int) -> None:
        self.root = root.rstrip("/") or "/"
        self.data_file = f"{self.root}/{DATA_FILE}"
        self.answer_bytes = answer_bytes
        self._encode = msgspec.json.encode

    def payload(self, kind: str, request_id: str) -> bytes:
        root = self.root
        if kind == "FILE_STAT":
            return self._encode({"path": f"{root}/stat-{request_id}"})
        if kind == "FILE_READ":
            # The request id cannot go in a read of a file that exists: the
            # length (the whole file) makes the payload the same for all.
            return self._encode({"path": self.data_file, "encoding": "utf-8"})
        if kind == "FILE_WRITE":
            return self._encode({"path": f"{root}/write-{request_id}", "content": request_id})
        if kind == "FILE_LIST":
            return self._encode({"path": root})
        if kind == "EXECUTE_COMMAND":
            return self._encode({"command": f"echo {request_id}", "timeout_seconds": 30})
        raise MixError(f"no payload for {kind}")
