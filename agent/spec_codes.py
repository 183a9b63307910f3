"""The agent answers with the spec's error codes only.

Inside the agent an error keeps the precise Tetherbed code it was raised with
(`ExtensionCode`: NOT_A_FILE, INVALID_MESSAGE, ...); the audit log records that
one. On the wire a strict peer accepts only the codes the spec lists, so each
precise code is sent as the closest spec code, and the precise one travels in
`details.reason_code` (the message says it in words). The spec has no code for
a malformed request; INTERNAL_ERROR is what the public reference shim itself
answers for one ("both command and argv", bad base64, reading a directory).
The table is docs/spec-notes.md's "Error codes on the wire".
"""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import UNSET

from tetherbed.wire import serial_io, strict
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError

E = ErrorCode
X = ExtensionCode

#: Precise codes whose closest spec code is not INTERNAL_ERROR.
CLOSEST_SPEC_CODE: Mapping[str, ErrorCode] = {
    X.PATH_TOO_LONG: E.PATH_INVALID_CHARS,  # a path this OS cannot hold
    X.FRAME_TOO_LARGE: E.FILE_TOO_LARGE,
    X.UNKNOWN_MESSAGE_TYPE: E.FEATURE_NOT_SUPPORTED,
    X.MESSAGE_NOT_ALLOWED: E.FEATURE_NOT_SUPPORTED,  # e.g. FILE_* on the control connection
}

#: Every other code the spec does not name.
FALLBACK_SPEC_CODE = E.INTERNAL_ERROR

#: The `details` key that carries the precise code when it is not a spec code.
REASON_CODE = "reason_code"

_SPEC_CODES = frozenset(ErrorCode)


def spec_code(code: str) -> ErrorCode:
    """The spec code sent for `code` (itself when the spec names it)."""
    if code in _SPEC_CODES:
        return ErrorCode(code)
    if code in serial_io.CODES:
        # Only a peer that negotiated the serial extension ever asks for it,
        # and that peer knows its codes.
        return code  # type: ignore[return-value]
    return CLOSEST_SPEC_CODE.get(code, FALLBACK_SPEC_CODE)


def error_payload(error: ProtocolError) -> strict.ErrorPayload:
    """The ERROR payload for `error`: a spec code, and `details` only when there are some."""
    code = spec_code(error.code)
    details = dict(error.details) if error.details else {}
    if code != error.code:
        details[REASON_CODE] = error.code
    return strict.ErrorPayload(
        code=str(code), message=error.message, fatal=error.fatal, details=details or UNSET
    )
