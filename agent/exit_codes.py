"""Process exit codes of `tetherbed agent`, distinct per terminal cause.

The fatal close codes map to 26-29 (close code minus 4400) so that a script can
tell them apart without parsing output.
"""

from __future__ import annotations

from enum import IntEnum

from tetherbed.wire.codes import CloseCode


class AgentExit(IntEnum):
    OK = 0
    CONFIG = 2
    HANDSHAKE_INVALID = 3
    AUTH_REFUSED = 4
    #: A session child stopped after --idle-exit seconds without a request.
    IDLE = 5
    PROTOCOL_VERSION_MISMATCH = 26
    SESSION_TAKEN_OVER = 27
    SESSION_REVOKED = 28
    PLATFORM_SHUTDOWN = 29


def exit_for_close(code: int) -> AgentExit:
    """The exit code for a fatal close code (4426-4429)."""
    return {
        CloseCode.PROTOCOL_VERSION_MISMATCH: AgentExit.PROTOCOL_VERSION_MISMATCH,
        CloseCode.SESSION_TAKEN_OVER: AgentExit.SESSION_TAKEN_OVER,
        CloseCode.SESSION_REVOKED: AgentExit.SESSION_REVOKED,
        CloseCode.PLATFORM_SHUTDOWN: AgentExit.PLATFORM_SHUTDOWN,
    }[CloseCode(code)]
