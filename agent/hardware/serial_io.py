"""SERIAL_OPEN/WRITE/READ/CLOSE on the advertised ports (wire/serial_io.py).

`SerialPorts` keeps the extension's rules: which ports may be opened, how
many at once, one request at a time per port (a lock per port, so a slow
device holds up nobody else), the limits and the typed errors. The bytes move
on a `SerialLine` (lines.py): pyserial by default, a simulated device on the
sim backend. Reads collect what arrives until `max_bytes`, the terminator
`until`, or `timeout_ms`; what arrived before a device vanished is never
dropped: it travels in the error's `details.received` (base64). A device that
vanishes makes the port SERIAL_PORT_GONE and closed.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tetherbed.agent.hardware.devices import HardwareConfig
from tetherbed.agent.hardware.lines import LineGone, LineOpener, SerialLine, port_error
from tetherbed.agent.hardware.pyserial_line import WRITE_TIMEOUT_SECONDS, open_pyserial
from tetherbed.wire import serial_io as x
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Ack

__all__ = ["WRITE_TIMEOUT_SECONDS", "SerialPorts"]

T = TypeVar("T")


@dataclass(slots=True)
class _Open:
    line: SerialLine
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: Bytes read past a read's terminator: the next read starts with them.
    pending: bytearray = field(default_factory=bytearray)


class SerialPorts:
    """The open ports of one agent connection. `opener` makes the lines
    (pyserial by default)."""

    def __init__(self, hardware: HardwareConfig, opener: LineOpener = open_pyserial) -> None:
        self.hardware = hardware
        self._opener = opener
        self._advertised = {path for path, _ in hardware.serial_ports}
        self._open: dict[str, _Open] = {}

    async def run(self, kind: str, payload: Any) -> tuple[str, Any]:
        if kind == x.S.SERIAL_OPEN:
            return x.S.SERIAL_OPENED, await self._run_open(payload)
        if kind == x.S.SERIAL_CLOSE:
            self._held(payload.port)
            await self._close(payload.port)
            return "ACK", Ack(ok=True)
        held = self._held(payload.port)
        if kind == x.S.SERIAL_WRITE:
            data = _decode(payload.data, payload.encoding)
            written = await self._io(payload.port, held, held.line.write(data))
            return x.S.SERIAL_WRITTEN, x.SerialWritten(port=payload.port, bytes_written=written)
        if kind == x.S.SERIAL_READ:
            data, timed_out = await self._io(
                payload.port, held, held.line.read(payload, held.pending)
            )
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
        for path in list(self._open):
            await self._close(path)

    # --- internals ---------------------------------------------------------

    async def _io(self, path: str, held: _Open, call: Awaitable[T]) -> T:
        """One write or read on a port, after the ones before it on that port."""
        async with held.lock:
            try:
                return await call
            except LineGone as gone:
                if self._open.get(path) is held:
                    del self._open[path]
                await held.line.close()
                raise _vanished(path, gone) from None

    async def _run_open(self, request: x.SerialOpen) -> x.SerialOpened:
        kind = self.hardware.other_kind(request.port)
        if kind is not None:
            raise ProtocolError(
                ErrorCode.FEATURE_NOT_SUPPORTED,
                f"{request.port} is a {kind} device: it is advertised, but no I/O exists for it",
                details={"port": request.port, "type": kind},
            )
        if request.port not in self._advertised:
            raise port_error(
                x.SerialErrorCode.SERIAL_PORT_UNKNOWN,
                f"{request.port} is not an advertised serial port",
                request.port,
                ports=sorted(self._advertised),
            )
        if request.port in self._open:
            raise port_error(x.SerialErrorCode.SERIAL_PORT_BUSY, "already open", request.port)
        if len(self._open) >= x.MAX_OPEN_PORTS:
            raise port_error(
                x.SerialErrorCode.SERIAL_TOO_MANY_OPEN,
                f"{x.MAX_OPEN_PORTS} ports are open already",
                request.port,
            )
        if request.stopbits not in x.STOP_BITS:
            raise port_error(
                x.SerialErrorCode.SERIAL_CONFIG_INVALID,
                f"stopbits {request.stopbits} is not one of {x.STOP_BITS}",
                request.port,
            )
        if request.baud_rate not in x.BAUD_RATES:
            raise port_error(
                x.SerialErrorCode.SERIAL_CONFIG_INVALID,
                f"baud rate {request.baud_rate} is not one of {x.BAUD_RATES}",
                request.port,
            )
        line = await self._opener(request)
        if request.port in self._open:  # opened meanwhile by a request that overtook this one
            await line.close()
            raise port_error(x.SerialErrorCode.SERIAL_PORT_BUSY, "already open", request.port)
        self._open[request.port] = _Open(line)
        return x.SerialOpened(port=request.port, baud_rate=request.baud_rate)

    def _held(self, path: str) -> _Open:
        held = self._open.get(path)
        if held is None:
            raise port_error(
                x.SerialErrorCode.SERIAL_PORT_NOT_OPEN, "not open (SERIAL_OPEN it)", path
            )
        return held

    async def _close(self, path: str) -> None:
        held = self._open.pop(path, None)
        if held is not None:
            await held.line.close()


def _vanished(path: str, gone: LineGone) -> ProtocolError:
    details: dict[str, Any] = {"port": path}
    if gone.received:
        details["received"] = base64.b64encode(gone.received).decode("ascii")
        details["received_bytes"] = len(gone.received)
    return ProtocolError(
        x.SerialErrorCode.SERIAL_PORT_GONE,
        f"{path}: the device went away ({gone}); the port is closed",
        details=details,
    )


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
