"""Error codes and WebSocket close codes of the local-executor protocol."""

from __future__ import annotations

from enum import IntEnum, StrEnum


class ErrorCode(StrEnum):
    """`ERROR.payload.code` values named by the spec."""

    PATH_OUTSIDE_ALLOWED_ROOT = "PATH_OUTSIDE_ALLOWED_ROOT"
    PATH_RESERVED_NAME = "PATH_RESERVED_NAME"
    PATH_INVALID_CHARS = "PATH_INVALID_CHARS"
    PATH_NOT_FOUND = "PATH_NOT_FOUND"
    PATH_NOT_EMPTY = "PATH_NOT_EMPTY"
    PATH_EXISTS = "PATH_EXISTS"
    COMMAND_TIMEOUT = "COMMAND_TIMEOUT"
    SHELL_NOT_AVAILABLE = "SHELL_NOT_AVAILABLE"
    UNSUPPORTED_ARCH = "UNSUPPORTED_ARCH"
    CAPABILITY_NOT_GRANTED = "CAPABILITY_NOT_GRANTED"
    AUTH_FAILED = "AUTH_FAILED"
    SHIM_OVERLOADED = "SHIM_OVERLOADED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    FILE_TOO_LARGE = "FILE_TOO_LARGE"
    DEPENDENCY_MISSING = "DEPENDENCY_MISSING"
    DIRECTORY_REFERENCE_INVALID = "DIRECTORY_REFERENCE_INVALID"
    DIRECTORY_UNAVAILABLE = "DIRECTORY_UNAVAILABLE"
    ROOT_GRANT_INVALID = "ROOT_GRANT_INVALID"
    SESSION_NOT_ATTACHED = "SESSION_NOT_ATTACHED"
    SESSION_ALREADY_ACTIVE = "SESSION_ALREADY_ACTIVE"
    SESSION_REVISION_MISMATCH = "SESSION_REVISION_MISMATCH"
    WINDOW_STALE = "WINDOW_STALE"
    PERMISSION_PENDING = "PERMISSION_PENDING"
    FEATURE_NOT_SUPPORTED = "FEATURE_NOT_SUPPORTED"
    CLIPBOARD_CONCEALED = "CLIPBOARD_CONCEALED"
    INPUT_OUT_OF_BOUNDS = "INPUT_OUT_OF_BOUNDS"
    MODEL_NOT_AVAILABLE = "MODEL_NOT_AVAILABLE"
    LOCAL_LLM_BUSY = "LOCAL_LLM_BUSY"
    LOCAL_LLM_FAILED = "LOCAL_LLM_FAILED"
    # Named in the idempotency table for the reserved recording messages.
    RECORDING_ALREADY_ACTIVE = "RECORDING_ALREADY_ACTIVE"
    RECORDING_NOT_FOUND = "RECORDING_NOT_FOUND"


class ExtensionCode(StrEnum):
    """Codes the spec does not name but a complete implementation needs.

    Each is documented in docs/spec-notes.md. They travel in the same
    `ERROR.payload.code` field, so a receiver that only knows the spec's codes
    still sees a well-formed ERROR.
    """

    INVALID_MESSAGE = "INVALID_MESSAGE"  # malformed JSON, missing/mistyped field
    FRAME_TOO_LARGE = "FRAME_TOO_LARGE"  # message over the 16 MiB frame limit
    UNKNOWN_MESSAGE_TYPE = "UNKNOWN_MESSAGE_TYPE"
    MESSAGE_NOT_ALLOWED = "MESSAGE_NOT_ALLOWED"  # known type, wrong connection/direction
    DUPLICATE_REQUEST_ID = "DUPLICATE_REQUEST_ID"
    SESSION_NOT_FOUND = "SESSION_NOT_FOUND"  # hub: no such session for this user
    AGENT_NOT_CONNECTED = "AGENT_NOT_CONNECTED"  # hub: session has no live agent
    AGENT_DISCONNECTED = "AGENT_DISCONNECTED"  # hub: agent left with the request in flight
    OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"  # hub: non-idempotent request lost in a drop
    AGENT_TIMEOUT = "AGENT_TIMEOUT"  # hub: no answer within the request's deadline
    UNEXPECTED_ANSWER_TYPE = "UNEXPECTED_ANSWER_TYPE"  # hub: agent answered with the wrong type
    SESSION_REVOKED = "SESSION_REVOKED"  # hub: the user revoked the session
    NOT_A_FILE = "NOT_A_FILE"  # FILE_READ of a directory or special file
    NOT_A_DIRECTORY = "NOT_A_DIRECTORY"  # FILE_LIST of a file, cwd that is a file
    INVALID_ENCODING = "INVALID_ENCODING"  # text read of non-UTF-8 bytes, bad base64
    PERMISSION_DENIED = "PERMISSION_DENIED"  # the OS refused (EACCES/EPERM)
    PATH_TOO_LONG = "PATH_TOO_LONG"  # ENAMETOOLONG


class CloseCode(IntEnum):
    """WebSocket close codes. 4426-4429 are the spec's fatal application codes."""

    NORMAL = 1000
    GOING_AWAY = 1001
    PROTOCOL_ERROR = 1002
    UNSUPPORTED_DATA = 1003
    POLICY_VIOLATION = 1008
    MESSAGE_TOO_BIG = 1009
    INTERNAL_ERROR = 1011
    PROTOCOL_VERSION_MISMATCH = 4426
    SESSION_TAKEN_OVER = 4427
    SESSION_REVOKED = 4428
    PLATFORM_SHUTDOWN = 4429


#: The codes after which the shim must not reconnect without an operator.
FATAL_CLOSE_CODES = frozenset(
    {
        CloseCode.PROTOCOL_VERSION_MISMATCH,
        CloseCode.SESSION_TAKEN_OVER,
        CloseCode.SESSION_REVOKED,
        CloseCode.PLATFORM_SHUTDOWN,
    }
)

#: Not the spec's: Tetherbed's agents exit with the fatal close code minus this
#: (26-29), so a script, and a checker that cannot see an agent's wire, can tell
#: the causes apart. Kept here because the agent and the checkers both need it.
FATAL_EXIT_OFFSET = 4400
FATAL_EXIT_CODES = frozenset(code - FATAL_EXIT_OFFSET for code in FATAL_CLOSE_CODES)


def is_fatal_close(code: int | None) -> bool:
    """True for 4426-4429, the codes after which the shim must not reconnect."""
    return code in FATAL_CLOSE_CODES
