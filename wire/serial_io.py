"""Serial I/O: a Tetherbed extension of the local-executor protocol.

The spec advertises hardware (`hardware_serial` and HELLO's `hardware_devices`)
but defines no message to use it. This extension does, and only between
peers that both know it:

- **Negotiation.** An agent that offers it adds the capability
  `tetherbed.serial_io` to HELLO's `capabilities` (only with `hardware_serial`);
  a platform that knows it grants it in HELLO_ACK's `granted_capabilities`.
  A capability string is the one place the spec lets a peer add something a
  strict peer still accepts (`capabilities` is a list of strings; a platform
  grants "the subset it approved"). Nothing else ever changes: a platform that
  does not grant it never receives a SERIAL_* frame, and an agent that was not
  granted it answers SERIAL_* as any unknown type.
- **Messages** (platform → shim, each answered once under its id):
  SERIAL_OPEN {port (as advertised), baud_rate (9600), bytesize (8), parity
  (none/even/odd/mark/space), stopbits (1, 1.5, 2)} → SERIAL_OPENED {port,
  baud_rate}; SERIAL_WRITE {port, data, encoding (utf-8/base64)} →
  SERIAL_WRITTEN {port, bytes_written}; SERIAL_READ {port, max_bytes (4096),
  timeout_ms (1000), until (a terminator such as "\\n", or null), encoding} →
  SERIAL_DATA {port, data, encoding, size_bytes, timed_out}; SERIAL_CLOSE
  {port} → ACK.
  A port is open at most once per agent (pyserial's exclusive lock keeps
  other programs out too), so the port itself names the open port; ports are
  closed when the connection that opened them ends.
- **Limits**: at most 64 KiB per write or read, a read waits at most 30 s,
  eight ports open at once.
- **Errors** are ERROR frames with the codes of `SerialErrorCode`, or the
  spec's FEATURE_NOT_SUPPORTED for a USB or GPIO device (advertised, but the
  extension has no I/O for them).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

#: The capability that offers (HELLO) and grants (HELLO_ACK) the extension.
CAPABILITY = "tetherbed.serial_io"

MAX_IO_BYTES = 64 * 1024
MAX_READ_TIMEOUT_MS = 30_000
MAX_OPEN_PORTS = 8
STOP_BITS = (1, 1.5, 2)
BAUD_RATES = (
    300, 600, 1200, 2400, 4800, 9600, 14400, 19200, 38400, 57600, 115200, 230400, 460800, 921600,
)  # fmt: skip
#: A write's `data` as text: base64 of MAX_IO_BYTES is the longest spelling.
_MAX_DATA_CHARS = (MAX_IO_BYTES + 2) // 3 * 4


class SerialMessageType(StrEnum):
    SERIAL_OPEN = "SERIAL_OPEN"
    SERIAL_OPENED = "SERIAL_OPENED"
    SERIAL_WRITE = "SERIAL_WRITE"
    SERIAL_WRITTEN = "SERIAL_WRITTEN"
    SERIAL_READ = "SERIAL_READ"
    SERIAL_DATA = "SERIAL_DATA"
    SERIAL_CLOSE = "SERIAL_CLOSE"


class SerialErrorCode(StrEnum):
    SERIAL_PORT_UNKNOWN = "SERIAL_PORT_UNKNOWN"  # not an advertised serial port
    SERIAL_PORT_BUSY = "SERIAL_PORT_BUSY"  # open already (here, or by another program)
    SERIAL_PORT_NOT_OPEN = "SERIAL_PORT_NOT_OPEN"  # WRITE/READ/CLOSE before OPEN
    SERIAL_PORT_GONE = "SERIAL_PORT_GONE"  # the device went away (unplugged); now closed
    SERIAL_CONFIG_INVALID = "SERIAL_CONFIG_INVALID"  # a setting the port does not take
    SERIAL_TIMEOUT = "SERIAL_TIMEOUT"  # a write the device did not take in time
    SERIAL_IO_FAILED = "SERIAL_IO_FAILED"  # any other OS error (the message says it)
    SERIAL_TOO_MANY_OPEN = "SERIAL_TOO_MANY_OPEN"  # MAX_OPEN_PORTS are open


S = SerialMessageType
#: Each request and the answer it calls for (besides ERROR).
ANSWERS: dict[str, str] = {
    S.SERIAL_OPEN: S.SERIAL_OPENED,
    S.SERIAL_WRITE: S.SERIAL_WRITTEN,
    S.SERIAL_READ: S.SERIAL_DATA,
    S.SERIAL_CLOSE: "ACK",
}
REQUESTS = frozenset(ANSWERS)
CODES = frozenset(str(code) for code in SerialErrorCode)

Encoding = Literal["utf-8", "base64"]
Port = Annotated[str, Meta(min_length=1, max_length=4096)]


class SerialOpen(Struct, kw_only=True):
    port: Port
    baud_rate: int = 9600
    bytesize: Literal[5, 6, 7, 8] = 8
    parity: Literal["none", "even", "odd", "mark", "space"] = "none"
    stopbits: float = 1  # 1, 1.5 or 2 (checked on open)


class SerialOpened(Struct, kw_only=True):
    port: str
    baud_rate: int


class SerialWrite(Struct, kw_only=True):
    port: Port
    data: Annotated[str, Meta(max_length=_MAX_DATA_CHARS)]
    encoding: Encoding = "utf-8"


class SerialWritten(Struct, kw_only=True):
    port: str
    bytes_written: int


class SerialRead(Struct, kw_only=True):
    port: Port
    max_bytes: Annotated[int, Meta(ge=1, le=MAX_IO_BYTES)] = 4096
    timeout_ms: Annotated[int, Meta(ge=0, le=MAX_READ_TIMEOUT_MS)] = 1000
    until: Annotated[str, Meta(min_length=1, max_length=16)] | None = None
    encoding: Encoding = "utf-8"


class SerialData(Struct, kw_only=True):
    port: str
    data: str
    encoding: Encoding
    size_bytes: int
    timed_out: bool


class SerialClose(Struct, kw_only=True):
    port: Port


#: The payload model of each request.
REQUEST_MODELS: dict[str, type[Struct]] = {
    S.SERIAL_OPEN: SerialOpen,
    S.SERIAL_WRITE: SerialWrite,
    S.SERIAL_READ: SerialRead,
    S.SERIAL_CLOSE: SerialClose,
}
_decoders = {kind: msgspec.json.Decoder(model) for kind, model in REQUEST_MODELS.items()}


def decode_request(kind: str, payload: bytes | msgspec.Raw) -> Struct:
    """The request's payload; msgspec.ValidationError names a bad field."""
    return _decoders[kind].decode(payload)
