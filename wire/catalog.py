"""What each message type is: who sends it, on which connection, what it needs.

The hub relays by these tables, the agent enforces capabilities by them, and the
retry layer reads idempotency from them. One table per question, so a new
message type is added in one obvious place.
"""

from __future__ import annotations

from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.messages import Capability, MessageType

T = MessageType
C = Capability

#: Data-plane requests (platform → shim on /ws/local-executor/{session_id}) and
#: the capability each one needs.
DATA_REQUESTS: dict[MessageType, Capability] = {
    T.EXECUTE_COMMAND: C.SHELL,
    T.FILE_READ: C.FILES,
    T.FILE_WRITE: C.FILES,
    T.FILE_STAT: C.FILES,
    T.FILE_LIST: C.FILES,
    T.FILE_DELETE: C.FILES,
    T.FILE_MOVE: C.FILES,
    T.LOCAL_LLM_COMPLETION: C.LOCAL_LLM,
    T.SCREENSHOT_REQUEST: C.COMPUTER_USE,
    T.INPUT_ACTION: C.COMPUTER_USE,
    T.CURSOR_POSITION_REQUEST: C.COMPUTER_USE,
    T.DISPLAY_INFO_REQUEST: C.COMPUTER_USE,
    T.WINDOW_LIST_REQUEST: C.COMPUTER_USE,
    T.WINDOW_FOCUS: C.COMPUTER_USE,
    T.APP_LIST_REQUEST: C.COMPUTER_USE,
    T.APP_LAUNCH: C.COMPUTER_USE,
    T.CLIPBOARD_READ: C.COMPUTER_USE,
    T.CLIPBOARD_WRITE: C.COMPUTER_USE,
    T.PERMISSIONS_CHECK_REQUEST: C.COMPUTER_USE,
    T.REQUEST_RECORDING_CONSENT: C.RECORDING,
    T.START_RECORDING: C.RECORDING,
    T.STOP_RECORDING: C.RECORDING,
    T.RECORDING_FETCH: C.RECORDING,
    T.APPLY_RECORDING_REVIEW: C.RECORDING,
}

#: Control-plane requests (platform → shim on /ws/local-executor only).
CONTROL_REQUESTS: dict[MessageType, Capability] = {
    T.DIRECTORY_LIST_REQUEST: C.DIRECTORY_BROWSE,
    T.ATTACH_SESSION: C.DIRECTORY_BROWSE,
    T.ACTIVATE_SESSION: C.DIRECTORY_BROWSE,
    T.RESTORE_SESSION: C.DIRECTORY_BROWSE,
    T.DETACH_SESSION: C.DIRECTORY_BROWSE,
}

#: The answer each request calls for (besides ERROR, which may answer any).
#: The reserved recording requests have no answer the spec defines: a relay
#: lets whatever comes back for them through.
ANSWERS: dict[MessageType, MessageType] = {
    T.EXECUTE_COMMAND: T.COMMAND_RESULT,
    T.FILE_READ: T.FILE_CONTENTS,
    T.FILE_WRITE: T.ACK,
    T.FILE_STAT: T.FILE_STAT_RESPONSE,
    T.FILE_LIST: T.FILE_LIST_RESPONSE,
    T.FILE_DELETE: T.ACK,
    T.FILE_MOVE: T.ACK,
    T.LOCAL_LLM_COMPLETION: T.LOCAL_LLM_COMPLETION_RESPONSE,
    T.SCREENSHOT_REQUEST: T.SCREENSHOT_RESPONSE,
    T.INPUT_ACTION: T.ACK,
    T.CURSOR_POSITION_REQUEST: T.CURSOR_POSITION_RESPONSE,
    T.DISPLAY_INFO_REQUEST: T.DISPLAY_INFO_RESPONSE,
    T.WINDOW_LIST_REQUEST: T.WINDOW_LIST_RESPONSE,
    T.WINDOW_FOCUS: T.ACK,
    T.APP_LIST_REQUEST: T.APP_LIST_RESPONSE,
    T.APP_LAUNCH: T.ACK,
    T.CLIPBOARD_READ: T.CLIPBOARD_READ_RESPONSE,
    T.CLIPBOARD_WRITE: T.ACK,
    T.PERMISSIONS_CHECK_REQUEST: T.PERMISSIONS_CHECK_RESPONSE,
    T.DIRECTORY_LIST_REQUEST: T.DIRECTORY_LIST_RESPONSE,
    T.ATTACH_SESSION: T.SESSION_ATTACHED,
    T.ACTIVATE_SESSION: T.SESSION_ACTIVATED,
    T.RESTORE_SESSION: T.SESSION_RESTORED,
    T.DETACH_SESSION: T.ACK,
}

#: Frames the shim sends under a request's id without ending the request.
STREAMING_RESPONSES: frozenset[MessageType] = frozenset({T.LOCAL_LLM_COMPLETION_CHUNK})

#: Requests answered by streamed frames before their terminal answer.
STREAMING_REQUESTS: frozenset[MessageType] = frozenset({T.LOCAL_LLM_COMPLETION})

#: Frames the shim sends on its own, not as an answer to a request.
UNSOLICITED_FROM_SHIM: frozenset[MessageType] = frozenset({T.STATUS, T.RECORDING_STEP})

#: The answers that complete a request successfully, by request type (an ERROR
#: may complete any request). LOCAL_LLM_COMPLETION streams chunks first.
RESPONSES: dict[str, frozenset[str]] = {
    T.EXECUTE_COMMAND: frozenset({T.COMMAND_RESULT}),
    T.FILE_READ: frozenset({T.FILE_CONTENTS}),
    T.FILE_WRITE: frozenset({T.ACK}),
    T.FILE_DELETE: frozenset({T.ACK}),
    T.FILE_MOVE: frozenset({T.ACK}),
    T.FILE_STAT: frozenset({T.FILE_STAT_RESPONSE}),
    T.FILE_LIST: frozenset({T.FILE_LIST_RESPONSE}),
    T.DIRECTORY_LIST_REQUEST: frozenset({T.DIRECTORY_LIST_RESPONSE}),
    T.ATTACH_SESSION: frozenset({T.SESSION_ATTACHED}),
    T.ACTIVATE_SESSION: frozenset({T.SESSION_ACTIVATED}),
    T.RESTORE_SESSION: frozenset({T.SESSION_RESTORED}),
    T.DETACH_SESSION: frozenset({T.ACK}),
    T.LOCAL_LLM_COMPLETION: frozenset({T.LOCAL_LLM_COMPLETION_RESPONSE}),
}

#: ERROR codes with which an agent refuses a request before doing any of it:
#: a request answered so was not executed (the platform may send it again).
REFUSED_UNRUN: frozenset[str] = frozenset(
    {
        ErrorCode.SHIM_OVERLOADED,
        ErrorCode.CAPABILITY_NOT_GRANTED,
        ErrorCode.SHELL_NOT_AVAILABLE,
        ErrorCode.FEATURE_NOT_SUPPORTED,
        ExtensionCode.INVALID_MESSAGE,
        ExtensionCode.UNKNOWN_MESSAGE_TYPE,
        ExtensionCode.MESSAGE_NOT_ALLOWED,
        ExtensionCode.DUPLICATE_REQUEST_ID,
    }
)

#: The spec's idempotency table: may the platform's retry layer re-issue it?
IDEMPOTENT: dict[MessageType, bool] = {
    T.HELLO: True,
    T.PING: True,
    T.EXECUTE_COMMAND: False,
    T.FILE_READ: True,
    T.FILE_STAT: True,
    T.FILE_LIST: True,
    T.FILE_WRITE: True,
    T.FILE_DELETE: True,  # re-issued with missing_ok: true
    T.FILE_MOVE: False,
    T.SCREENSHOT_REQUEST: True,
    T.INPUT_ACTION: False,
    T.WINDOW_FOCUS: False,
    T.APP_LAUNCH: False,
    T.CLIPBOARD_READ: True,
    T.CLIPBOARD_WRITE: True,
    T.LOCAL_LLM_COMPLETION: True,
    T.REQUEST_RECORDING_CONSENT: False,
    T.START_RECORDING: False,
    T.STOP_RECORDING: False,
    T.RECORDING_FETCH: True,
    T.APPLY_RECORDING_REVIEW: True,
    # Pure reads the table does not list; they change nothing.
    T.CURSOR_POSITION_REQUEST: True,
    T.DISPLAY_INFO_REQUEST: True,
    T.WINDOW_LIST_REQUEST: True,
    T.APP_LIST_REQUEST: True,
    T.PERMISSIONS_CHECK_REQUEST: True,
    # Control plane: browse is a read; the rest change bindings.
    T.DIRECTORY_LIST_REQUEST: True,
    T.ATTACH_SESSION: False,
    T.ACTIVATE_SESSION: False,
    T.RESTORE_SESSION: False,
    T.DETACH_SESSION: False,
}


def allowed_answers(request_type: str) -> frozenset[str] | None:
    """Every frame that may come back under a request's id: its answer, ERROR,
    and (for a streaming request) the chunks before it. None: not checked."""
    answer = ANSWERS.get(request_type)  # type: ignore[call-overload]
    if answer is None:
        return None
    allowed = {str(answer), str(T.ERROR)}
    if request_type == T.LOCAL_LLM_COMPLETION:
        allowed.add(str(T.LOCAL_LLM_COMPLETION_CHUNK))
    return frozenset(allowed)


def is_idempotent(message_type: str) -> bool:
    """Unknown or unlisted types are treated as non-idempotent: never re-sent."""
    return IDEMPOTENT.get(message_type, False)  # type: ignore[call-overload]


def required_capability(message_type: str) -> Capability | None:
    """The capability a request needs, or None when it is not a request."""
    return DATA_REQUESTS.get(message_type) or CONTROL_REQUESTS.get(message_type)  # type: ignore[call-overload]
