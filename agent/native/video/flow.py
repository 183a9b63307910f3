"""Video flow control, sans-I/O: per-viewer admission, the I/O handoff, keyframe pacing.

Nothing here sends, sleeps or reads a clock: callers pass `now` and act on the
answers. The listener wraps `ViewerFlow` per socket and `Handoff` between the
encoder thread and its own loop. Every frame is one immutable `bytes` object, the
complete WebSocket frame, that all viewers share; admission decides *whether* a
viewer gets it, never copies it. Sizes count the message (CDV1/CDN1 header and
payload), not the WebSocket frame header in front of it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum

MAX_UNACKED_FRAMES = 8
MAX_UNACKED_BYTES = 1024 * 1024
STALL_SECONDS = 10.0
KEYFRAME_INTERVAL_S = 1.0
HANDOFF_FRAMES = 60
HANDOFF_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True, eq=False)
class OutFrame:
    """One prepared message, shared by every viewer.

    `wire` is the whole WebSocket binary frame, written to each viewer's socket as
    it is; the message itself starts at `offset` (after the frame header).
    """

    generation: int
    sequence: int
    keyframe: bool
    wire: bytes
    offset: int = 0

    @property
    def size(self) -> int:
        return len(self.wire) - self.offset

    @property
    def message(self) -> memoryview:
        """The CDV1/CDN1 message, without the WebSocket frame header (a view, no copy)."""
        return memoryview(self.wire)[self.offset :]


class Verdict(Enum):
    SEND = "send"
    SKIP = "skip"
    HOLD = "hold"  # NV12: kept as the viewer's one pending picture


class FlowViolation(Exception):
    """The viewer broke the ack protocol (unknown or out-of-order ack)."""


class ViewerFlow:
    """Admission for one viewer: ≤ 8 unacked frames and ≤ 1 MiB (a lone keyframe may exceed).

    H.264 (`nv12=False`): after any skipped frame only an IDR is admitted, since
    the dependent pictures can no longer be decoded. NV12: one unacked picture,
    and the newest skipped picture waits as `pending` for the next ack.
    """

    def __init__(
        self,
        *,
        nv12: bool = False,
        max_frames: int = MAX_UNACKED_FRAMES,
        max_bytes: int = MAX_UNACKED_BYTES,
    ) -> None:
        self.nv12 = nv12
        self.max_frames = 1 if nv12 else max_frames
        self.max_bytes = max_bytes
        self.need_keyframe = not nv12
        self.dropped = 0
        self._unacked: deque[tuple[OutFrame, float]] = deque()
        self._bytes = 0
        self._pending: OutFrame | None = None
        self._last_keyframe_request = float("-inf")

    @property
    def unacked_frames(self) -> int:
        return len(self._unacked)

    @property
    def unacked_bytes(self) -> int:
        return self._bytes

    def offer(self, frame: OutFrame, now: float) -> Verdict:
        if self.nv12:
            if self._unacked:
                if self._pending is not None:
                    self.dropped += 1
                self._pending = frame
                return Verdict.HOLD
            self._admit(frame, now)
            return Verdict.SEND
        if self.need_keyframe and not frame.keyframe:
            self.dropped += 1
            return Verdict.SKIP
        if not self._fits(frame):
            self.dropped += 1
            self.need_keyframe = True
            return Verdict.SKIP
        self.need_keyframe = False
        self._admit(frame, now)
        return Verdict.SEND

    @property
    def wants_keyframe(self) -> bool:
        """It waits for an IDR and could take one now: only then is one worth forcing.

        A viewer at its cap (a stalled one) could not take it, so forcing IDRs for it
        would only cost every other viewer a keyframe a second.
        """
        if not self.need_keyframe:
            return False
        if not self._unacked:
            return True
        return len(self._unacked) < self.max_frames and self._bytes < self.max_bytes

    def _fits(self, frame: OutFrame) -> bool:
        if len(self._unacked) >= self.max_frames:
            return False
        if self._bytes + frame.size <= self.max_bytes:
            return True
        return not self._unacked and frame.keyframe

    def _admit(self, frame: OutFrame, now: float) -> None:
        self._unacked.append((frame, now))
        self._bytes += frame.size

    def ack(self, generation: int, sequence: int, now: float) -> OutFrame | None:
        """Acknowledge the oldest unacked frame; returns a pending NV12 picture to send."""
        if not self._unacked:
            raise FlowViolation("ack with nothing outstanding")
        oldest, _ = self._unacked[0]
        if (oldest.generation, oldest.sequence) != (generation, sequence):
            raise FlowViolation(
                f"ack {generation}/{sequence} is out of order; expected "
                f"{oldest.generation}/{oldest.sequence}"
            )
        self._unacked.popleft()
        self._bytes -= oldest.size
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._admit(pending, now)
            return pending
        return None

    def keyframe_requested(self, now: float) -> bool:
        """A viewer's `{"type":"keyframe"}`: honoured at most once a second."""
        if now - self._last_keyframe_request < KEYFRAME_INTERVAL_S:
            return False
        self._last_keyframe_request = now
        if not self.nv12:
            self.need_keyframe = True
        return True

    def stalled(self, now: float) -> bool:
        return bool(self._unacked) and now - self._unacked[0][1] >= STALL_SECONDS


class KeyframePacer:
    """Forces at most one IDR a second; a request inside the interval waits, not vanishes."""

    def __init__(self, interval: float = KEYFRAME_INTERVAL_S) -> None:
        self._interval = interval
        self._last = float("-inf")
        self.pending = False

    def request(self) -> None:
        self.pending = True

    def due_in(self, now: float) -> float | None:
        """Seconds until a waiting request may be honoured (0.0: now); None when none waits."""
        if not self.pending:
            return None
        return max(0.0, self._last + self._interval - now)

    def take(self, now: float) -> bool:
        """True when the next encoded picture should be an IDR."""
        if self.due_in(now) == 0.0:
            self.pending = False
            self._last = now
            return True
        return False

    def produced_keyframe(self, now: float) -> None:
        """A natural keyframe also satisfies waiting requests."""
        self.pending = False
        self._last = now


class Handoff:
    """The bounded queue from the encoder to the listener: 60 frames / 8 MiB.

    H.264 overflow drops the new dependent frame and every later one until an IDR;
    an IDR that does not fit replaces the queue (older pictures are superseded by it).
    NV12 keeps only the latest picture.
    """

    def __init__(
        self,
        *,
        nv12: bool = False,
        max_frames: int = HANDOFF_FRAMES,
        max_bytes: int = HANDOFF_BYTES,
    ) -> None:
        self.nv12 = nv12
        self.max_frames = max_frames
        self.max_bytes = max_bytes
        self.dropped = 0
        self._queue: deque[OutFrame] = deque()
        self._bytes = 0
        self._skipping = False

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def queued_bytes(self) -> int:
        return self._bytes

    def push(self, frame: OutFrame) -> bool:
        if self.nv12:
            self.dropped += len(self._queue)
            self._queue.clear()
            self._bytes = 0
        elif self._skipping and not frame.keyframe:
            self.dropped += 1
            return False
        elif len(self._queue) >= self.max_frames or self._bytes + frame.size > self.max_bytes:
            if not frame.keyframe:
                self._skipping = True
                self.dropped += 1
                return False
            self.dropped += len(self._queue)
            self._queue.clear()
            self._bytes = 0
        if frame.keyframe:
            self._skipping = False
        self._queue.append(frame)
        self._bytes += frame.size
        return True

    def pop_all(self) -> list[OutFrame]:
        frames = list(self._queue)
        self._queue.clear()
        self._bytes = 0
        return frames

    def clear(self) -> None:
        self._queue.clear()
        self._bytes = 0
        self._skipping = False
