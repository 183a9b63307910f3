"""Serial lines on a real machine: pyserial, its blocking calls in worker threads.

A slow device holds up nobody else: each call runs in a thread, and a read
looks at its deadline and terminator every `_READ_SLICE_SECONDS` while data
trickles in. A device that vanishes (EIO/ENXIO/ENODEV, or the port
disappearing) is `LineGone` with what the read had collected.
"""

from __future__ import annotations

import asyncio
import errno
import time
from typing import Any

from tetherbed.agent.hardware.lines import LineGone, port_error, take, take_all
from tetherbed.wire import serial_io as x

_GONE_ERRNOS = frozenset({errno.EIO, errno.ENXIO, errno.ENODEV, errno.ENOENT, errno.EBADF})
#: How often a read looks at its deadline and terminator while data trickles in.
_READ_SLICE_SECONDS = 0.05
WRITE_TIMEOUT_SECONDS = 5.0

_PARITY = {"none": "N", "even": "E", "odd": "O", "mark": "M", "space": "S"}


async def open_pyserial(request: x.SerialOpen) -> PyserialLine:
    return PyserialLine(await asyncio.to_thread(_open, request))


class PyserialLine:
    def __init__(self, port: Any) -> None:
        self._port = port  # serial.Serial

    async def write(self, data: bytes) -> int:
        return await asyncio.to_thread(_write, self._port, data)

    async def read(self, request: x.SerialRead, pending: bytearray) -> tuple[bytes, bool]:
        return await asyncio.to_thread(_read, self._port, request, pending)

    async def close(self) -> None:
        await asyncio.to_thread(_quietly_close, self._port)


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
        raise port_error(code, text, request.port) from None
    except ValueError as exc:
        raise port_error(x.SerialErrorCode.SERIAL_CONFIG_INVALID, str(exc), request.port) from None


def _write(port: Any, data: bytes) -> int:
    import serial

    try:
        written = port.write(data)
        port.flush()
    except serial.SerialTimeoutException:
        raise port_error(
            x.SerialErrorCode.SERIAL_TIMEOUT,
            f"the device took nothing for {WRITE_TIMEOUT_SECONDS:g} s",
            port.port,
        ) from None
    except (serial.SerialException, OSError) as exc:
        raise LineGone(str(exc)) from None
    return int(written or 0)


def _read(port: Any, request: x.SerialRead, data: bytearray) -> tuple[bytes, bool]:
    import serial

    deadline = time.monotonic() + request.timeout_ms / 1000
    while True:
        answer = take(data, request)
        if answer is not None:
            return answer, False
        left = deadline - time.monotonic()
        if left <= 0:
            return take_all(data), True
        try:
            port.timeout = min(left, _READ_SLICE_SECONDS)  # pyserial reconfigures: may fail
            data += port.read(max(1, min(port.in_waiting, request.max_bytes - len(data))))
        except (serial.SerialException, OSError) as exc:
            raise LineGone(str(exc), take_all(data)) from None


def _quietly_close(port: Any) -> None:
    try:
        port.close()
    except Exception:  # a vanished device may fail its close too
        pass
