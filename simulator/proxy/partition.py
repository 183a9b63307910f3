"""Network partitions of one proxy, per direction, and how they behave.

- `hold`: bytes wait at the proxy and are delivered, in order, after the heal;
  what a real partition does to TCP, which retransmits until the path is back.
- `drop`: a blackhole; bytes are discarded, connections stay open.
- `timeout`: Toxiproxy's `timeout` toxic as a partition: bytes are discarded and
  each connection is closed `timeout` ms after the partition reached it
  (0: never, which is `drop`).

New connections during a partition of *both* directions hang: the client's
connect succeeds (the proxy's listening socket accepts it) but the proxy neither
reads from it nor dials the upstream until a direction heals, so the client sees
its handshake time out, as behind a real partition. With one direction cut, new
connections are dialed and that direction's gate applies. A disabled proxy, by
contrast, refuses connections (see `FaultProxy.disable`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tetherbed.simulator.proxy import errors
from tetherbed.simulator.proxy.streams import DOWNSTREAM, STREAMS, UPSTREAM, Stream, select_streams

PartitionMode = Literal["hold", "drop", "timeout"]
MODES: frozenset[str] = frozenset({"hold", "drop", "timeout"})


@dataclass(frozen=True)
class Partition:
    mode: PartitionMode = "hold"
    timeout: int = 0  # ms, for mode "timeout"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise errors.BadRequest("partition mode must be hold, drop or timeout")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, int) or self.timeout < 0:
            raise errors.BadRequest("partition timeout must be a non-negative integer (ms)")

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "timeout": self.timeout}


class Partitions:
    """Which directions of a proxy are cut, and how."""

    def __init__(self) -> None:
        self._cut: dict[Stream, Partition | None] = dict.fromkeys(STREAMS)

    def cut(self, selector: str, partition: Partition) -> None:
        for stream in _streams(selector):
            self._cut[stream] = partition

    def heal(self, selector: str = "both") -> None:
        for stream in _streams(selector):
            self._cut[stream] = None

    def get(self, stream: Stream) -> Partition | None:
        return self._cut[stream]

    def gate(self, stream: Stream) -> str | None:
        partition = self._cut[stream]
        return partition.mode if partition is not None else None

    @property
    def fully_cut(self) -> bool:
        return self._cut[UPSTREAM] is not None and self._cut[DOWNSTREAM] is not None

    def close_after(self) -> float | None:
        """Seconds after which a connection under a `timeout` partition is closed."""
        timeouts = [
            partition.timeout / 1000
            for partition in self._cut.values()
            if partition is not None and partition.mode == "timeout" and partition.timeout > 0
        ]
        return min(timeouts) if timeouts else None

    def to_json(self) -> dict[str, Any]:
        return {
            stream: (partition.to_json() if partition is not None else None)
            for stream, partition in self._cut.items()
        }


def _streams(selector: str) -> tuple[Stream, ...]:
    try:
        return select_streams(selector)
    except ValueError as exc:
        raise errors.BadRequest(str(exc)) from None
