"""What makes a recorded payload depend on the host rather than the run.

The sim backend promises the same history, byte for byte, for the same seed.
Its agents work in a real temporary folder, so payloads carry that folder's
path (HELLO's `allowed_root`, FILE_STAT's `path`) and the file system's
times (`mtime`, `ctime`). A `Scrubber` replaces both, before a payload is
digested or kept, on every leg alike — the digests still match a request to
its answer, and the history no longer depends on where or when it ran.
Backends on real time (process, docker) record payloads as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

#: Fields that hold the host's clock rather than the run's.
HOST_TIMES = frozenset({"mtime", "ctime", "atime"})
PLACEHOLDER = "<workdir>"


class Scrubber:
    def __init__(self, workdir: Path) -> None:
        self._folder = str(workdir).encode()

    def __call__(self, payload: bytes) -> bytes:
        payload = payload.replace(self._folder, PLACEHOLDER.encode())
        if not any(f'"{name}"'.encode() in payload for name in HOST_TIMES):
            return payload
        try:
            value = msgspec.json.decode(payload)
        except msgspec.DecodeError:
            return payload
        return msgspec.json.encode(_without_times(value))


def _without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: 0 if k in HOST_TIMES else _without_times(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value
