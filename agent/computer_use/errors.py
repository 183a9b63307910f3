"""Desktop-core failures as the local-executor spec's error codes.

On X11 there is no OS permission prompt; the nearest thing is the X server
refusing our connection (no authorization), which is PERMISSION_PENDING. A
display that cannot be reached at all means computer use is not available in
this session: FEATURE_NOT_SUPPORTED.
"""

from __future__ import annotations

from tetherbed.agent.desktop.errors import (
    DependencyMissing,
    DesktopError,
    DisplayAccessDenied,
    DisplayUnavailable,
    ImageTooLarge,
    InputCancelled,
    WindowGone,
)
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError


def protocol_error(exc: Exception) -> ProtocolError:
    """The ProtocolError to answer with for a failure of the desktop core."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, ProtocolError):
        return exc
    if isinstance(exc, DisplayAccessDenied):
        return ProtocolError(
            ErrorCode.PERMISSION_PENDING, message, details={"permission": "x11_authorization"}
        )
    if isinstance(exc, DisplayUnavailable):
        return ProtocolError(
            ErrorCode.FEATURE_NOT_SUPPORTED, message, details={"reason": "display_unavailable"}
        )
    if isinstance(exc, DependencyMissing):
        return ProtocolError(ErrorCode.DEPENDENCY_MISSING, message)
    if isinstance(exc, WindowGone):
        return ProtocolError(ErrorCode.WINDOW_STALE, message)
    if isinstance(exc, ImageTooLarge):
        return ProtocolError(ErrorCode.FILE_TOO_LARGE, message)
    if isinstance(exc, InputCancelled):
        return ProtocolError(ErrorCode.INTERNAL_ERROR, message, details={"reason": "cancelled"})
    if isinstance(exc, ValueError):  # UnknownKey, UntypableText, bad button/direction
        return ProtocolError(ExtensionCode.INVALID_MESSAGE, message)
    if isinstance(exc, DesktopError):
        return ProtocolError(ErrorCode.INTERNAL_ERROR, message)
    return ProtocolError(ErrorCode.INTERNAL_ERROR, f"computer use failed: {exc!r}")
