"""What the dsh hub core asks its driver to do.

Streams and store changes are values; the driver owns the sockets and the
database and carries these out in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tetherbed.hub.dsh.records import Computer, PendingKey


@dataclass(eq=False, slots=True)
class Stream:
    """One open SSE response (identity matters: a computer's second stream is
    a different Stream even though it has the same computer id)."""

    number: int
    computer_id: str
    opened_at: float
    next_ping_at: float
    hello_sent: bool = False

    def __repr__(self) -> str:
        return f"Stream(#{self.number} {self.computer_id})"


@dataclass(frozen=True, slots=True)
class Push:
    """Write these SSE bytes to the stream."""

    stream: Stream
    data: bytes


@dataclass(frozen=True, slots=True)
class End:
    """End the stream's response (replaced, deleted, token changed, shutdown)."""

    stream: Stream
    reason: str


@dataclass(frozen=True, slots=True)
class PutComputer:
    computer: Computer


@dataclass(frozen=True, slots=True)
class DropComputer:
    computer_id: str


@dataclass(frozen=True, slots=True)
class PutKey:
    key: PendingKey


@dataclass(frozen=True, slots=True)
class DropKey:
    digest: str


Change = PutComputer | DropComputer | PutKey | DropKey


@dataclass(frozen=True, slots=True)
class Persist:
    """Apply these changes in one transaction."""

    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True)
class Output:
    """In-order output of a running execution, for whoever watches it."""

    request_id: str
    stream: str  # "stdout" | "stderr"
    data: bytes


@dataclass(frozen=True, slots=True)
class ToolError:
    """A failure the model can act on (§5.2), with a code a program can branch on."""

    code: str
    message: str
    status: int = 409
    details: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Settled:
    """An execution or file operation ended: with a value, or an error."""

    request_id: str
    value: dict[str, Any] | None = None
    error: ToolError | None = None


DshAction = Push | End | Persist | Output | Settled
