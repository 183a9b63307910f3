"""Virtual serial ports on the sim backend: the simulated device in virtual time.

The same device core the other backends run behind socat
(`peripherals.serial_device.SerialDevice`, with the same wrong-speed rule,
`reply`) answers here in process, on the run's virtual clock, and the agent's
real `SerialPorts` drives it through a `SimSerialLine` instead of pyserial.
So open, write, read with a deadline, an unplug in the middle of a read and
a baud mismatch behave as they do on a pty, deterministically and without
waiting in real time.

Bytes cross the line at the device's speed: ten bits per byte (start, eight
data bits, stop), so a reply arrives once its command line and the reply
itself have crossed, after the replies before it, as on a real UART. A port
outlives its agent's restarts, as the device on a machine does; `unplug`
takes the device away (an open line is dead at once: a read in progress ends
with the bytes it had) and `plug` puts a new one in, freshly powered up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tetherbed.agent.hardware.lines import LineGone, port_error, take, take_all
from tetherbed.simulator.peripherals.serial_device import SerialDevice, reply
from tetherbed.simulator.peripherals.serial_ports import DeviceSpec
from tetherbed.wire import serial_io as x

#: Bits a UART sends per byte at 8N1.
BITS_PER_BYTE = 10


class SimSerialPort:
    """One machine's virtual port at `path`, with its device (when plugged in)."""

    def __init__(self, path: str, spec: DeviceSpec, clock: Callable[[], float]) -> None:
        self.path = path
        self.spec = spec
        self._clock = clock
        self.device: SerialDevice | None = spec.device(clock)
        #: The line a program has open (the port is opened exclusively).
        self.line: SimSerialLine | None = None

    @property
    def plugged(self) -> bool:
        return self.device is not None

    def unplug(self) -> None:
        self.device = None
        if self.line is not None:
            self.line.vanish()
            self.line = None

    def plug(self) -> None:
        self.device = self.spec.device(self._clock)

    def release(self) -> None:
        """The program that had the port open is gone (its descriptor closed)."""
        if self.line is not None:
            self.line.vanish()
            self.line = None

    async def open(self, request: x.SerialOpen) -> SimSerialLine:
        if self.device is None:
            raise port_error(
                x.SerialErrorCode.SERIAL_PORT_GONE, "no such device (unplugged)", request.port
            )
        if self.line is not None:
            raise port_error(
                x.SerialErrorCode.SERIAL_PORT_BUSY, "open by another program", request.port
            )
        self.line = SimSerialLine(self, request.baud_rate)
        return self.line

    def seconds_for(self, size: int) -> float:
        """How long `size` bytes take on the wire at the device's speed."""
        return size * BITS_PER_BYTE / self.spec.baud


class SimSerialLine:
    """An open port, as the agent's `SerialPorts` sees it (lines.SerialLine)."""

    def __init__(self, port: SimSerialPort, baud: int) -> None:
        self._port = port
        self._baud = baud
        self._arrived = bytearray()
        self._changed = asyncio.Event()
        self._dead = False
        #: When each direction of the line is free again (virtual seconds).
        self._to_device_free = 0.0
        self._from_device_free = 0.0

    async def write(self, data: bytes) -> int:
        device = self._port.device
        if self._dead or device is None:
            raise LineGone("the device is gone (unplugged)")
        loop = asyncio.get_running_loop()
        port = self._port
        # Both directions are serial lines: a command crosses after the bytes
        # written before it, and each reply goes out once the device has read
        # the line it answers and sent the replies before it.
        received = max(loop.time(), self._to_device_free)
        for piece in _lines(data):
            received += port.seconds_for(len(piece))
            answer = reply(device, piece, baud=port.spec.baud, client_baud=self._baud)
            if answer:
                sent = max(received, self._from_device_free) + port.seconds_for(len(answer))
                self._from_device_free = sent
                loop.call_at(sent, self._arrive, answer)
        self._to_device_free = received
        return len(data)

    async def read(self, request: x.SerialRead, pending: bytearray) -> tuple[bytes, bool]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.timeout_ms / 1000
        while True:
            pending += self._arrived
            self._arrived.clear()
            answer = take(pending, request)
            if answer is not None:
                return answer, False
            if self._dead:
                raise LineGone("the device went away (unplugged)", take_all(pending))
            left = deadline - loop.time()
            if left <= 0:
                return take_all(pending), True
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                pass

    async def close(self) -> None:
        if self._port.line is self:
            self._port.line = None
        self._dead = True
        self._changed.set()

    def vanish(self) -> None:
        """The device was unplugged under this open line."""
        self._dead = True
        self._changed.set()

    def _arrive(self, data: bytes) -> None:
        if not self._dead:
            self._arrived += data
            self._changed.set()


def _lines(data: bytes) -> list[bytes]:
    """`data` cut after each line end (CR or LF), the way the device reads it."""
    pieces, start = [], 0
    for index, byte in enumerate(data):
        if byte in (0x0A, 0x0D):
            pieces.append(data[start : index + 1])
            start = index + 1
    if start < len(data):
        pieces.append(data[start:])
    return pieces
