"""An open serial port as `SerialPorts` drives it: a line that moves bytes.

`SerialPorts` (serial_io.py) keeps the extension's rules — which ports, how
many, which error for what; a line only opens, writes, reads and closes. On a
real machine it is pyserial (`pyserial_line.py`); on the simulator's sim
backend a simulated device on the virtual clock (`simulator/sim/serial.py`),
so the same rules run in virtual time. Every line ends a read by one rule,
`take`, and reports a device that vanished as `LineGone` with the bytes the
read had collected, which the extension hands to the client, never drops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from tetherbed.wire import serial_io as x
from tetherbed.wire.errors import ProtocolError


class SerialLine(Protocol):
    """One open port. `read` may take bytes already in `pending` (left past an
    earlier read's terminator) and leaves there what it does not answer."""

    async def write(self, data: bytes) -> int: ...

    async def read(self, request: x.SerialRead, pending: bytearray) -> tuple[bytes, bool]:
        """(the answer, whether `timeout_ms` ran out before it was complete)."""
        ...

    async def close(self) -> None: ...


#: Opens the port a SERIAL_OPEN names (raises ProtocolError with the extension's code).
LineOpener = Callable[[x.SerialOpen], Awaitable[SerialLine]]


class LineGone(Exception):
    """The device went away (unplugged): the line is dead; `received` holds
    what the interrupted read had collected."""

    def __init__(self, why: str, received: bytes = b"") -> None:
        super().__init__(why)
        self.received = received


def take(data: bytearray, request: x.SerialRead) -> bytes | None:
    """What a read answers from `data` now (removed from it), or None while it
    must wait for more: everything through the terminator `until` when it lies
    within `max_bytes`, else the first `max_bytes` once that many are there."""
    if request.until is not None:
        terminator = request.until.encode("utf-8")
        found = data.find(terminator, 0, request.max_bytes)
        if found >= 0:
            return _cut(data, found + len(terminator))
    if len(data) >= request.max_bytes:
        return _cut(data, request.max_bytes)
    return None


def take_all(data: bytearray) -> bytes:
    """A read whose time ran out answers what arrived (maybe nothing)."""
    return _cut(data, len(data))


def _cut(data: bytearray, end: int) -> bytes:
    answer = bytes(data[:end])
    del data[:end]
    return answer


def port_error(code: str, message: str, port: str, **details: Any) -> ProtocolError:
    return ProtocolError(code, f"{port}: {message}", details={"port": port, **details})
