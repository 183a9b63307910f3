"""Typed errors of crossdesk-automation/1: a stable code, retryability, side-effect flag.

The spec only shows `CONTROL_DENIED`; every other code here is Tetherbed's, listed in
docs/spec-notes.md. Each code has a default retryability so that call sites stay short.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Code(StrEnum):
    INVALID_REQUEST = "INVALID_REQUEST"  # not JSON, not an object, bad id
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    NESTING_TOO_DEEP = "NESTING_TOO_DEEP"
    UNKNOWN_METHOD = "UNKNOWN_METHOD"
    UNKNOWN_FIELD = "UNKNOWN_FIELD"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    DUPLICATE_REQUEST_ID = "DUPLICATE_REQUEST_ID"
    UNSUPPORTED_PROTOCOL = "UNSUPPORTED_PROTOCOL"
    NOT_CONNECTED = "NOT_CONNECTED"
    ALREADY_CONNECTED = "ALREADY_CONNECTED"
    NOT_READY = "NOT_READY"
    AUTH_FAILED = "AUTH_FAILED"
    PASSWORD_UNAVAILABLE = "PASSWORD_UNAVAILABLE"
    DEVICE_NOT_FOUND = "DEVICE_NOT_FOUND"
    DISPLAY_NOT_FOUND = "DISPLAY_NOT_FOUND"
    CONTROL_DENIED = "CONTROL_DENIED"
    HUMAN_PAUSED = "HUMAN_PAUSED"
    FRAME_STALE = "FRAME_STALE"
    FRAME_OBSOLETE = "FRAME_OBSOLETE"
    IMAGE_TOO_LARGE = "IMAGE_TOO_LARGE"
    OBSERVATION_NOT_FOUND = "OBSERVATION_NOT_FOUND"
    OBSERVATION_EXPIRED = "OBSERVATION_EXPIRED"
    OBSERVATION_STALE = "OBSERVATION_STALE"
    COORDINATE_OUT_OF_RANGE = "COORDINATE_OUT_OF_RANGE"
    OPERATION_CONFLICT = "OPERATION_CONFLICT"
    OPERATION_CACHE_FULL = "OPERATION_CACHE_FULL"
    INPUT_BUSY = "INPUT_BUSY"
    INPUT_FAILED = "INPUT_FAILED"
    CANCELLED = "CANCELLED"
    VIDEO_DISABLED = "VIDEO_DISABLED"
    TICKET_REUSED = "TICKET_REUSED"
    VIEW_GENERATION_STALE = "VIEW_GENERATION_STALE"
    SHUTTING_DOWN = "SHUTTING_DOWN"
    INTERNAL_ERROR = "INTERNAL_ERROR"


# Codes whose failure is transient: the same request may succeed later.
_RETRYABLE = frozenset(
    {
        Code.NOT_READY,
        Code.HUMAN_PAUSED,
        Code.FRAME_STALE,
        Code.FRAME_OBSOLETE,
        Code.OPERATION_CACHE_FULL,
        Code.INPUT_BUSY,
        Code.INTERNAL_ERROR,
    }
)


class NativeError(Exception):
    """An error answered as `{"ok": false, "error": {...}}`."""

    def __init__(
        self,
        code: Code,
        message: str = "",
        *,
        retryable: bool | None = None,
        side_effect_possible: bool = False,
    ) -> None:
        super().__init__(f"{code}: {message}" if message else str(code))
        self.code = code
        self.message = message
        self.retryable = code in _RETRYABLE if retryable is None else retryable
        self.side_effect_possible = side_effect_possible
        self.request_id: int | None = None

    def to_wire(self) -> dict[str, Any]:
        """The spec's three fields, plus a human-readable `message` when there is one."""
        error: dict[str, Any] = {
            "code": str(self.code),
            "retryable": self.retryable,
            "side_effect_possible": self.side_effect_possible,
        }
        if self.message:
            error["message"] = self.message
        return error
