"""What the agent's protocol core asks its driver to do."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from tetherbed.wire.messages import HelloAck, MessageType, Payload


@dataclass(frozen=True, slots=True)
class Send:
    """Write this frame to the connection."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Run:
    """Start the operation for an admitted request; report with complete()/fail()."""

    request_id: str
    kind: MessageType
    payload: Payload
    #: The payload bytes as received (for the execution journal's digest).
    raw: msgspec.Raw | None = None


@dataclass(frozen=True, slots=True)
class Ready:
    """The handshake finished; the connection now serves requests."""

    ack: HelloAck
    version: str


@dataclass(frozen=True, slots=True)
class Close:
    """Close the connection with this code.

    `fatal` means the agent must not reconnect: the driver exits with
    `exit_code` after writing `reason` as its one-line explanation.
    """

    code: int
    reason: str
    fatal: bool = False
    exit_code: int = 0


@dataclass(frozen=True, slots=True)
class Log:
    level: str
    message: str


@dataclass(frozen=True, slots=True)
class Revoked:
    """SESSION_REVOKED arrived; the driver writes the audit record."""

    reason: str
    new_shim_machine_id: str | None


Action = Send | Run | Ready | Close | Log | Revoked
