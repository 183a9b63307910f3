"""Typed protocol errors. Each carries the code that goes on the wire."""

from __future__ import annotations

from typing import Any

from tetherbed.wire.codes import ErrorCode, ExtensionCode


class ProtocolError(Exception):
    """An error that is answered with an ERROR frame carrying `code`.

    `request_id` is set when the offending frame's id could be read, so the
    answer can be correlated; `fatal` mirrors `ERROR.payload.fatal`.
    """

    def __init__(
        self,
        code: ErrorCode | ExtensionCode | str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        request_id: str | None = None,
        fatal: bool = False,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = str(code)
        self.message = message
        self.details = details
        self.request_id = request_id
        self.fatal = fatal


class WireError(ProtocolError):
    """A frame that cannot be decoded: malformed, mistyped, or too large."""
