"""SERIAL_OPEN/WRITE/READ/CLOSE on the advertised ports, with pyserial.

Blocking pyserial calls run in worker threads, one port at a time (a lock
per port), so a slow device holds up nobody else. Reads collect what arrives
until `max_bytes`, the terminator `until`, or `timeout_ms`; what arrived
before a device vanished is never dropped: it travels in the error's
`details.received` (base64). A device that vanishes (EIO/ENXIO/ENODEV, or
the port disappearing) makes the port SERIAL_PORT_GONE and closed.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import errno
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tetherbed.agent.hardware.devices import HardwareConfig
from tetherbed.wire import serial_io as x
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Ack

_GONE_ERRNOS = frozenset({errno.EIO, errno.ENXIO, errno.ENODEV, errno.ENOENT, errno.EBADF})
#: How often a read looks at its deadline and terminator while data trickles in.
_READ_SLICE_SECONDS = 0.05
WRITE_TIMEOUT_SECONDS = 5.0

_PARITY = {"none": "N", "even": "E", "odd": "O", "mark": "M", "space": "S"}


@dataclass(slots=True)
class _Open:
    port: Any  # serial.Serial
    lock: threading.Lock
    #: Bytes read past a read's terminator: the next read starts with them.
    pending: bytearray = field(default_factory=bytearray)


class SerialPorts:
    """The open ports of one agent connection."""

    def __init__(self, hardware: HardwareConfig) -> None:
        self.hardware = hardware
        self._advertised = {path for path, _ in hardware.serial_ports}
        self._open: dict[str, _Open] = {}

    async def run(self, kind: str, payload: Any) -> tuple[str, Any]:
        if kind == x.S.SERIAL_OPEN:
            return x.S.SERIAL_OPENED, await self._run_open(payload)
        if kind == x.S.SERIAL_CLOSE:
            await self._close(self._held(payload.port).port, payload.port)
            return "ACK", Ack(ok=True)
        held = self._held(payload.port)
        if kind == x.S.SERIAL_WRITE:
            data = _decode(payload.data, payload.encoding)
            written = await asyncio.to_thread(self._locked, held, _write, held.port, data)
            return x.S.SERIAL_WRITTEN, x.SerialWritten(port=payload.port, bytes_written=written)
        if kind == x.S.SERIAL_READ:
            data, timed_out = await asyncio.to_thread(self._locked, held, _read, held, payload)
            return x.S.SERIAL_DATA, x.SerialData(
                port=payload.port,
                data=_encode(data, payload.encoding),
                encoding=payload.encoding,
                size_bytes=len(data),
                timed_out=timed_out,
            )
        raise ProtocolError(ExtensionCode.UNKNOWN_MESSAGE_TYPE, f"unknown message type {kind}")

    async def close_all(self) -> None:
        """The connection ended: its ports are released."""
        for path, held in list(self._open.items()):
            await self._close(held.port, path)

    # --- internals ---------------------------------------------------------

    def _locked(self, held: _Open, operation: Any, *args: Any) -> Any:
        with held.lock:
            try:
                return operation(*args)
            except _Gone as gone:
                self._open.pop(held.port.port, None)
                _quietly_close(held.port)
                raise gone.error from None

    async def _run_open(self, request: x.SerialOpen) -> x.SerialOpened:
        kind = self.hardware.other_kind(request.port)
        if kind is not None:
            raise ProtocolError(
                ErrorCode.FEATURE_NOT_SUPPORTED,
                f"{request.port} is a {kind} device: it is advertised, but no I/O exists for it",
                details={"port": request.port, "type": kind},
            )
        if request.port not in self._advertised:
            raise _error(
                x.SerialErrorCode.SERIAL_PORT_UNKNOWN,
                f"{request.port} is not an advertised serial port",
                request.port,
                ports=sorted(self._advertised),
            )
        if request.port in self._open:
            raise _error(x.SerialErrorCode.SERIAL_PORT_BUSY, "already open", request.port)
        if len(self._open) >= x.MAX_OPEN_PORTS:
            raise _error(
                x.SerialErrorCode.SERIAL_TOO_MANY_OPEN,
                f"{x.MAX_OPEN_PORTS} ports are open already",
                request.port,
            )
        if request.stopbits not in x.STOP_BITS:
            raise _error(
                x.SerialErrorCode.SERIAL_CONFIG_INVALID,
                f"stopbits {request.stopbits} is not one of {x.STOP_BITS}",
                request.port,
            )
        if request.baud_rate not in x.BAUD_RATES:
            raise _error(
                x.SerialErrorCode.SERIAL_CONFIG_INVALID,
                f"baud rate {request.baud_rate} is not one of {x.BAUD_RATES}",
                request.port,
            )
        port = await asyncio.to_thread(_open, request)
        self._open[request.port] = _Open(port, threading.Lock())
        return x.SerialOpened(port=request.port, baud_rate=request.baud_rate)

    def _held(self, path: str) -> _Open:
        held = self._open.get(path)
        if held is None:
            raise _error(x.SerialErrorCode.SERIAL_PORT_NOT_OPEN, "not open (SERIAL_OPEN it)", path)
        return held

    async def _close(self, port: Any, path: str) -> None:
        held = self._open.pop(path, None)
        if held is not None:
            await asyncio.to_thread(_quietly_close, port)


class _Gone(Exception):
    def __init__(self, error: ProtocolError) -> None:
        self.error = error


def _error(code: str, message: str, port: str, **details: Any) -> ProtocolError:
    return ProtocolError(code, f"{port}: {message}", details={"port": port, **details})


def _open(request: x.SerialOpen) -> Any:
    import serial

    try:
        return serial.Serial(
            request.port,
            baudrate=request.baud_rate,
            bytesize=request.bytesize,
            parity=_PARITY[request.parity],
            stopbits=request.stopbits,
            timeout=0,
            write_timeout=WRITE_TIMEOUT_SECONDS,
            exclusive=True,
        )
    except serial.SerialException as exc:
        text = str(exc)
        if "exclusively lock" in text or getattr(exc, "errno", None) == errno.EBUSY:
            code = x.SerialErrorCode.SERIAL_PORT_BUSY
        elif getattr(exc, "errno", None) in _GONE_ERRNOS:
            code = x.SerialErrorCode.SERIAL_PORT_GONE
        else:
            code = x.SerialErrorCode.SERIAL_IO_FAILED
        raise _error(code, text, request.port) from None
    except ValueError as exc:
        raise _error(x.SerialErrorCode.SERIAL_CONFIG_INVALID, str(exc), request.port) from None


def _write(port: Any, data: bytes) -> int:
    import serial

    try:
        written = port.write(data)
        port.flush()
    except serial.SerialTimeoutException:
        raise _error(
            x.SerialErrorCode.SERIAL_TIMEOUT,
            f"the device took nothing for {WRITE_TIMEOUT_SECONDS:g} s",
            port.port,
        ) from None
    except (serial.SerialException, OSError) as exc:
        raise _vanished(port.port, exc, b"") from None
    return int(written or 0)


def _read(held: _Open, request: x.SerialRead) -> tuple[bytes, bool]:
    import serial

    port = held.port
    terminator = request.until.encode("utf-8") if request.until is not None else None
    deadline = time.monotonic() + request.timeout_ms / 1000
    data = held.pending
    timed_out = False
    while True:
        if terminator is not None and terminator in data:
            end = data.index(terminator) + len(terminator)
            break
        if len(data) >= request.max_bytes:
            end = request.max_bytes
            break
        left = deadline - time.monotonic()
        if left <= 0:
            end, timed_out = len(data), True
            break
        try:
            port.timeout = min(left, _READ_SLICE_SECONDS)  # pyserial reconfigures: may fail
            chunk = port.read(max(1, min(port.in_waiting, request.max_bytes - len(data))))
        except (serial.SerialException, OSError) as exc:
            received = bytes(data)
            data.clear()
            raise _vanished(port.port, exc, received) from None
        data += chunk
    answer = bytes(data[:end])
    del data[:end]
    return answer, timed_out


def _vanished(path: str, exc: BaseException, received: bytes) -> _Gone:
    details: dict[str, Any] = {"port": path}
    if received:
        details["received"] = base64.b64encode(received).decode("ascii")
        details["received_bytes"] = len(received)
    error = ProtocolError(
        x.SerialErrorCode.SERIAL_PORT_GONE,
        f"{path}: the device went away ({exc}); the port is closed",
        details=details,
    )
    return _Gone(error)


def _quietly_close(port: Any) -> None:
    try:
        port.close()
    except Exception:  # a vanished device may fail its close too
        pass


def _decode(data: str, encoding: str) -> bytes:
    if encoding == "base64":
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ProtocolError(
                ExtensionCode.INVALID_ENCODING, f"data is not base64: {exc}"
            ) from None
    else:
        raw = data.encode("utf-8")
    if len(raw) > x.MAX_IO_BYTES:
        raise ProtocolError(
            ErrorCode.FILE_TOO_LARGE,
            f"{len(raw)} bytes in one SERIAL_WRITE; the limit is {x.MAX_IO_BYTES}",
            details={"limit": x.MAX_IO_BYTES},
        )
    return raw


def _encode(data: bytes, encoding: str) -> str:
    if encoding == "base64":
        return base64.b64encode(data).decode("ascii")
    return data.decode("utf-8", "replace")
