"""Reassembling an execution's streamed chunks (§11.2).

Chunks arrive as separate HTTP POSTs, so they can come late, twice (an agent
retried a POST whose answer it lost) or out of order (two POSTs raced). `seq`
starts at 0 and grows by one: the assembler passes chunks on strictly in
`seq` order, drops any `seq` it has already passed on or is already holding,
and holds at most `max_buffered` chunks that arrived ahead of a gap. A chunk
beyond that window is refused (the agent keeps the authoritative tail in the
final result anyway).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True, slots=True)
class Chunk:
    seq: int
    stdout: bytes = b""
    stderr: bytes = b""
    #: §11.6.2: a heartbeat frame carries no data, it only proves liveness.
    heartbeat: bool = False


class Verdict(Enum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    HELD = "held"
    #: Too far ahead of the gap: not kept.
    REFUSED = "refused"


@dataclass(slots=True)
class ChunkAssembler:
    max_buffered: int = 256
    #: The planted defect: pass chunks on as they arrive, duplicates too.
    in_arrival_order: bool = False
    next_seq: int = 0
    _held: dict[int, Chunk] = field(default_factory=dict)
    duplicates: int = 0

    @property
    def held(self) -> int:
        return len(self._held)

    def add(self, chunk: Chunk) -> tuple[Verdict, list[Chunk]]:
        """File one chunk; return what it means and the chunks now in order."""
        if self.in_arrival_order:
            self.next_seq = max(self.next_seq, chunk.seq + 1)
            return Verdict.ACCEPTED, [chunk]
        seq = chunk.seq
        if seq < self.next_seq or seq in self._held:
            self.duplicates += 1
            return Verdict.DUPLICATE, []
        if seq > self.next_seq:
            if seq - self.next_seq > self.max_buffered or len(self._held) >= self.max_buffered:
                return Verdict.REFUSED, []
            self._held[seq] = chunk
            return Verdict.HELD, []
        ready = [chunk]
        self.next_seq += 1
        while self.next_seq in self._held:
            ready.append(self._held.pop(self.next_seq))
            self.next_seq += 1
        return Verdict.ACCEPTED, ready

    def gaps(self) -> list[int]:
        """Sequence numbers still missing before the held chunks."""
        if not self._held:
            return []
        return [s for s in range(self.next_seq, max(self._held)) if s not in self._held]
