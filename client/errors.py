"""Typed errors of the hub client.

Every failure a caller can see is a `HubError` with the wire `code`, so code
that only knows the base class can still branch on `err.code`. The subclasses
group codes by what a caller does next: re-authenticate, give up on a path,
back off and retry, or treat the outcome as unknown.
"""

from __future__ import annotations

from typing import Any

from tetherbed.wire.codes import ErrorCode, ExtensionCode

#: Codes the client itself produces; none of them ever travels on the wire.
CONNECTION_LOST = "CONNECTION_LOST"
CONNECT_FAILED = "CONNECT_FAILED"
REQUEST_TIMEOUT = "REQUEST_TIMEOUT"
UNEXPECTED_RESPONSE = "UNEXPECTED_RESPONSE"
COMMAND_EXIT = "COMMAND_EXIT"


class HubError(Exception):
    """An ERROR answer from the hub or agent, or a client-side failure.

    `fatal` mirrors `ERROR.payload.fatal`; `details` is the optional
    per-code object; `http_status` is set only for refused upgrades.
    """

    def __init__(
        self,
        code: str,
        message: str = "",
        *,
        details: dict[str, Any] | None = None,
        fatal: bool = False,
        http_status: int | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = str(code)
        self.message = message
        self.details = details
        self.fatal = fatal
        self.http_status = http_status


class AuthenticationError(HubError):
    """The token was refused (AUTH_FAILED); retrying with it will not help."""


class NotFoundError(HubError):
    """PATH_NOT_FOUND or SESSION_NOT_FOUND: the thing named does not exist."""


class PermissionDeniedError(HubError):
    """The agent's policy or the OS refused: jail, capability, OS permission."""


class InvalidArgumentError(HubError):
    """The request itself is wrong; sending it again unchanged fails again."""


class TooLargeError(HubError):
    """A file, output or frame is over a limit (FILE_TOO_LARGE, FRAME_TOO_LARGE)."""


class OverloadedError(HubError):
    """The agent is busy (SHIM_OVERLOADED, LOCAL_LLM_BUSY): back off and retry."""


class AgentUnavailableError(HubError):
    """No agent answered the request.

    AGENT_NOT_CONNECTED: it never reached an agent, so a retry is safe.
    AGENT_DISCONNECTED: the agent left with it in flight, so it may have run;
    retry only idempotent requests.
    """


class OutcomeUnknownError(HubError):
    """A non-idempotent request was in flight when the agent dropped.

    It may or may not have taken effect; never retry it blindly.
    """


class ConnectionLost(HubError):
    """The client's own socket to the hub ended with requests still waiting.

    Like OUTCOME_UNKNOWN, a request that was already sent may have run.
    `close_code`/`close_reason` are the WebSocket close frame, when one came.
    """

    def __init__(
        self,
        message: str = "connection to the hub was lost",
        *,
        close_code: int | None = None,
        close_reason: str = "",
    ) -> None:
        super().__init__(CONNECTION_LOST, message)
        self.close_code = close_code
        self.close_reason = close_reason


class ConnectFailedError(HubError):
    """The WebSocket to the hub could not be opened (network, handshake, HTTP)."""


class RequestTimeoutError(HubError, TimeoutError):
    """No terminal answer in time; the request may still run.

    REQUEST_TIMEOUT: the client's own `request_timeout` ran out. AGENT_TIMEOUT:
    the hub's deadline did (the agent never answered; its slot is free again).
    """


class UnexpectedResponseError(HubError):
    """The answer did not fit the request: wrong type, or a payload that fails
    its model. Points at a hub or agent bug, not at the caller."""


class CommandExitException(HubError):
    """`commands.run` finished with a non-zero exit code (E2B's behaviour).

    Carries the whole result; `code` is COMMAND_TIMEOUT when the agent killed
    the command at its timeout, otherwise COMMAND_EXIT.
    """

    def __init__(self, result: Any) -> None:
        code = ErrorCode.COMMAND_TIMEOUT if result.timed_out else COMMAND_EXIT
        super().__init__(str(code), f"command exited with code {result.exit_code}")
        self.result = result
        self.stdout: str = result.stdout
        self.stderr: str = result.stderr
        self.exit_code: int = result.exit_code
        self.error: str | None = result.error
        self.timed_out: bool = result.timed_out
        self.output_truncated: bool = result.output_truncated
        self.duration_seconds: float = result.duration_seconds

    def __str__(self) -> str:
        return f"Command exited with code {self.exit_code} and error:\n{self.stderr}"


E = ErrorCode
X = ExtensionCode

#: Which subclass an ERROR code raises; codes not listed raise plain HubError.
ERROR_CLASSES: dict[str, type[HubError]] = {
    E.AUTH_FAILED: AuthenticationError,
    E.PATH_NOT_FOUND: NotFoundError,
    X.SESSION_NOT_FOUND: NotFoundError,
    E.PATH_OUTSIDE_ALLOWED_ROOT: PermissionDeniedError,
    E.CAPABILITY_NOT_GRANTED: PermissionDeniedError,
    E.PERMISSION_PENDING: PermissionDeniedError,
    X.PERMISSION_DENIED: PermissionDeniedError,
    E.PATH_RESERVED_NAME: InvalidArgumentError,
    E.PATH_INVALID_CHARS: InvalidArgumentError,
    E.INPUT_OUT_OF_BOUNDS: InvalidArgumentError,
    X.PATH_TOO_LONG: InvalidArgumentError,
    X.NOT_A_FILE: InvalidArgumentError,
    X.NOT_A_DIRECTORY: InvalidArgumentError,
    X.INVALID_ENCODING: InvalidArgumentError,
    X.INVALID_MESSAGE: InvalidArgumentError,
    X.UNKNOWN_MESSAGE_TYPE: InvalidArgumentError,
    X.MESSAGE_NOT_ALLOWED: InvalidArgumentError,
    X.DUPLICATE_REQUEST_ID: InvalidArgumentError,
    E.FILE_TOO_LARGE: TooLargeError,
    X.FRAME_TOO_LARGE: TooLargeError,
    E.SHIM_OVERLOADED: OverloadedError,
    E.LOCAL_LLM_BUSY: OverloadedError,
    X.AGENT_NOT_CONNECTED: AgentUnavailableError,
    X.AGENT_DISCONNECTED: AgentUnavailableError,
    X.OUTCOME_UNKNOWN: OutcomeUnknownError,
    X.AGENT_TIMEOUT: RequestTimeoutError,
    X.UNEXPECTED_ANSWER_TYPE: UnexpectedResponseError,
    X.SESSION_REVOKED: PermissionDeniedError,
}


def error_from_code(
    code: str,
    message: str = "",
    *,
    details: dict[str, Any] | None = None,
    fatal: bool = False,
    http_status: int | None = None,
) -> HubError:
    """The typed exception for an ERROR code (plain HubError when unmapped)."""
    cls = ERROR_CLASSES.get(code, HubError)
    return cls(code, message, details=details, fatal=fatal, http_status=http_status)
