"""The hub's answer to an agent's HELLO: an ACK, or a reasoned refusal."""

from __future__ import annotations

from dataclasses import dataclass

from tetherbed.hub.config import HubConfig
from tetherbed.wire.codes import CloseCode, ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.host import normalize_arch
from tetherbed.wire.messages import Capability, Hello, HelloAck
from tetherbed.wire.version import VersionMismatch, negotiate


@dataclass(frozen=True, slots=True)
class Accepted:
    ack: HelloAck
    version: str


@dataclass(frozen=True, slots=True)
class Refused:
    """Close with `code`/`reason`; `error` (if any) goes out as an ERROR frame first."""

    code: int
    reason: str
    error: ProtocolError | None = None


def answer_hello(
    hello: Hello, *, config: HubConfig, session_id: str | None, connection_id: str
) -> Accepted | Refused:
    """Negotiate the version, check the arch, and grant advertised ∩ policy."""
    try:
        version = negotiate(hello.protocol_version, config.protocol_version)
    except VersionMismatch as exc:
        return Refused(CloseCode.PROTOCOL_VERSION_MISMATCH, exc.close_reason())
    except ProtocolError as exc:
        return Refused(CloseCode.PROTOCOL_ERROR, exc.message[:120], exc)
    try:
        normalize_arch(hello.arch)
    except ProtocolError as exc:
        exc.fatal = True
        return Refused(CloseCode.POLICY_VIOLATION, "UNSUPPORTED_ARCH", exc)
    grants = set(config.grants)
    if session_id is None:
        # The control connection browses folders and nothing else.
        grants &= {Capability.DIRECTORY_BROWSE}
    else:
        grants.discard(Capability.DIRECTORY_BROWSE)
    granted = [c for c in hello.capabilities if c in grants]
    if "grant_unadvertised" in config.defects:  # a planted defect
        granted = sorted(map(str, grants))
    if session_id is None and Capability.DIRECTORY_BROWSE not in granted:
        error = ProtocolError(
            ErrorCode.CAPABILITY_NOT_GRANTED,
            "the control connection must advertise directory_browse",
            fatal=True,
        )
        return Refused(CloseCode.POLICY_VIOLATION, "directory_browse required", error)
    ack = HelloAck(
        session_id=session_id,
        connection_id=connection_id,
        protocol_version=config.protocol_version,
        granted_capabilities=granted,
        max_file_size_bytes=config.max_file_size_bytes,
        command_timeout_seconds=config.command_timeout_seconds,
        max_concurrent=config.max_concurrent,
    )
    return Accepted(ack, str(version))
