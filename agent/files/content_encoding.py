"""How file content travels on the wire: UTF-8 text or base64 bytes.

The spec keeps both `encoding` and `format`; they must agree. Sizes are checked
before anything is decoded or encoded, so an oversized request costs no memory.
"""

from __future__ import annotations

import base64
import binascii

import msgspec

from tetherbed.wire import limits
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Encoding, Format

#: Room left for file content inside one frame once the envelope is accounted for.
CONTENT_BUDGET_BYTES = limits.FRAME_LIMIT_BYTES - limits.ENVELOPE_HEADROOM_BYTES

_FORMAT_OF_ENCODING: dict[str, str] = {"utf-8": "text", "base64": "bytes"}


def is_text(encoding: Encoding, format: Format | None) -> bool:
    """True for UTF-8 text, False for base64 bytes; INVALID_MESSAGE when they disagree."""
    if format is not None and _FORMAT_OF_ENCODING[encoding] != format:
        raise ProtocolError(
            ExtensionCode.INVALID_MESSAGE,
            f"format {format!r} does not match encoding {encoding!r} "
            "(text goes with utf-8, bytes with base64)",
            details={"encoding": encoding, "format": format},
        )
    return encoding == "utf-8"


def too_large(wire_path: str, size: int, limit: int, what: str = "content") -> ProtocolError:
    return ProtocolError(
        ErrorCode.FILE_TOO_LARGE,
        f"{wire_path}: {what} is {size} bytes, over the limit of {limit} bytes",
        details={"path": wire_path, "size_bytes": size, "limit_bytes": limit},
    )


def base64_length(raw_size: int) -> int:
    """Length of the base64 text for `raw_size` bytes."""
    return 4 * ((raw_size + 2) // 3)


def check_frame_room(raw_size: int, *, as_text: bool, wire_path: str) -> None:
    """Refuse, before reading, content that cannot fit in one frame once encoded."""
    encoded_size = raw_size if as_text else base64_length(raw_size)
    if encoded_size > CONTENT_BUDGET_BYTES:
        raise too_large(wire_path, encoded_size, CONTENT_BUDGET_BYTES, "encoded content")


def encode_content(data: bytes, *, as_text: bool, wire_path: str) -> str:
    """File bytes as wire content, refusing what would not fit in one frame."""
    check_frame_room(len(data), as_text=as_text, wire_path=wire_path)
    if not as_text:
        return base64.b64encode(data).decode("ascii")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            ExtensionCode.INVALID_ENCODING,
            f"{wire_path}: content is not valid UTF-8 (byte {exc.start} of the range); "
            "read it with format=bytes, encoding=base64",
            details={"path": wire_path, "byte_offset": exc.start},
        ) from exc
    # Control characters grow sixfold as \u00XX; measure only when that could matter.
    if len(data) * limits.JSON_ESCAPE_FACTOR > CONTENT_BUDGET_BYTES:
        encoded_size = len(msgspec.json.encode(text))
        if encoded_size > CONTENT_BUDGET_BYTES:
            raise too_large(wire_path, encoded_size, CONTENT_BUDGET_BYTES, "JSON-encoded content")
    return text


def decode_content(content: str, *, as_text: bool, limit: int, wire_path: str) -> bytes:
    """Wire content as bytes to write, checking the size before decoding."""
    if as_text:
        if len(content) > limit:  # every character is at least one byte
            raise too_large(wire_path, len(content), limit)
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ProtocolError(
                ExtensionCode.INVALID_ENCODING,
                f"{wire_path}: content is not encodable as UTF-8",
                details={"path": wire_path},
            ) from exc
        if len(data) > limit:
            raise too_large(wire_path, len(data), limit)
        return data
    padding = len(content[-2:]) - len(content[-2:].rstrip("="))
    estimated = len(content) * 3 // 4 - padding
    if estimated > limit:
        raise too_large(wire_path, estimated, limit)
    try:
        return base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError(
            ExtensionCode.INVALID_ENCODING,
            f"{wire_path}: content is not valid base64 ({exc})",
            details={"path": wire_path},
        ) from exc
