"""Process exit codes of `tetherbed agent`, distinct per terminal cause.

The fatal close codes map to 26-29 (close code minus 4400) so that a script can
tell them apart without parsing output.
"""

from __future__ import annotations

from enum import IntEnum

from tetherbed.wire.codes import FATAL_CLOSE_CODES, FATAL_EXIT_OFFSET, CloseCode


class AgentExit(IntEnum):
    OK = 0
    CONFIG = 2
    HANDSHAKE_INVALID = 3
    AUTH_REFUSED = 4
    #: A session child stopped after --idle-exit seconds without a request.
    IDLE = 5
    PROTOCOL_VERSION_MISMATCH = CloseCode.PROTOCOL_VERSION_MISMATCH - FATAL_EXIT_OFFSET
    SESSION_TAKEN_OVER = CloseCode.SESSION_TAKEN_OVER - FATAL_EXIT_OFFSET
    SESSION_REVOKED = CloseCode.SESSION_REVOKED - FATAL_EXIT_OFFSET
    PLATFORM_SHUTDOWN = CloseCode.PLATFORM_SHUTDOWN - FATAL_EXIT_OFFSET


def exit_for_close(code: int) -> AgentExit:
    """The exit code for a fatal close code (4426-4429)."""
    if code not in FATAL_CLOSE_CODES:
        raise ValueError(f"{code} is not a fatal close code")
    return AgentExit(code - FATAL_EXIT_OFFSET)
