"""The serial I/O extension on the agent: pyserial over a socat pty pair with the
simulated device on the far end (real processes, stopped by PID)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from tetherbed.agent.actions import Run, Send
from tetherbed.agent.config import Limits
from tetherbed.agent.hardware import HardwareConfig, SerialPorts
from tetherbed.agent.hello import build_hello
from tetherbed.agent.protocol import AgentProtocol
from tetherbed.runtime.clock import ManualClock
from tetherbed.simulator.peripherals.serial_ports import VirtualSerialPort
from tetherbed.wire import serial_io as x
from tetherbed.wire import strict
from tetherbed.wire.envelope import encode_message
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Capability, HelloAck


@pytest.fixture
def port(tmp_path: Path) -> Iterator[VirtualSerialPort]:
    started = VirtualSerialPort.start(tmp_path, "ttyTB0", baud=9600)
    try:
        yield started
    finally:
        started.stop()


def ports_for(port: VirtualSerialPort, **extra: object) -> SerialPorts:
    return SerialPorts(HardwareConfig(serial_ports=((port.client_end, "sim"),), **extra))  # type: ignore[arg-type]


async def test_open_write_read_close(port: VirtualSerialPort) -> None:
    ports = ports_for(port)
    kind, opened = await ports.run("SERIAL_OPEN", x.SerialOpen(port=port.client_end))
    assert kind == "SERIAL_OPENED" and opened.baud_rate == 9600
    kind, written = await ports.run(
        "SERIAL_WRITE", x.SerialWrite(port=port.client_end, data="PING\nID?\n")
    )
    assert kind == "SERIAL_WRITTEN" and written.bytes_written == 9
    read = x.SerialRead(port=port.client_end, until="\r\n", timeout_ms=3000)
    _, first = await ports.run("SERIAL_READ", read)
    _, second = await ports.run("SERIAL_READ", read)
    assert (first.data, first.timed_out) == ("PONG\r\n", False)
    assert second.data == "tetherbed,sim-arduino,ttyTB0,1.0.0\r\n"  # kept past the first's end
    _, nothing = await ports.run(
        "SERIAL_READ", x.SerialRead(port=port.client_end, timeout_ms=100, encoding="base64")
    )
    assert (nothing.data, nothing.size_bytes, nothing.timed_out) == ("", 0, True)
    with pytest.raises(ProtocolError) as busy:
        await ports.run("SERIAL_OPEN", x.SerialOpen(port=port.client_end))
    assert busy.value.code == "SERIAL_PORT_BUSY"
    assert (await ports.run("SERIAL_CLOSE", x.SerialClose(port=port.client_end)))[0] == "ACK"
    with pytest.raises(ProtocolError) as closed:
        await ports.run("SERIAL_READ", read)
    assert closed.value.code == "SERIAL_PORT_NOT_OPEN"


async def test_a_baud_mismatch_gives_garbage_and_no_line(port: VirtualSerialPort) -> None:
    ports = ports_for(port)
    await ports.run("SERIAL_OPEN", x.SerialOpen(port=port.client_end, baud_rate=115200))
    await ports.run("SERIAL_WRITE", x.SerialWrite(port=port.client_end, data="PING\n"))
    _, reply = await ports.run(
        "SERIAL_READ",
        x.SerialRead(port=port.client_end, until="\n", timeout_ms=500, encoding="base64"),
    )
    raw = base64.b64decode(reply.data)
    assert reply.timed_out and raw and b"\n" not in raw and b"PONG" not in raw


async def test_an_unplugged_device_is_port_gone_and_the_port_closes(
    port: VirtualSerialPort,
) -> None:
    ports = ports_for(port)
    await ports.run("SERIAL_OPEN", x.SerialOpen(port=port.client_end))
    port.unplug()
    with pytest.raises(ProtocolError) as gone:
        await ports.run("SERIAL_READ", x.SerialRead(port=port.client_end, timeout_ms=2000))
    assert gone.value.code == "SERIAL_PORT_GONE"
    with pytest.raises(ProtocolError) as after:
        await ports.run("SERIAL_READ", x.SerialRead(port=port.client_end))
    assert after.value.code == "SERIAL_PORT_NOT_OPEN"


async def test_unknown_ports_usb_and_gpio(port: VirtualSerialPort) -> None:
    ports = ports_for(
        port, usb_devices=(("2341", "0043", "Uno"),), gpio_lines=(("gpiochip0:17", "LED"),)
    )
    for name, code in [
        ("/dev/ttyS99", "SERIAL_PORT_UNKNOWN"),
        ("usb:2341:0043", "FEATURE_NOT_SUPPORTED"),
        ("gpiochip0:17", "FEATURE_NOT_SUPPORTED"),
    ]:
        with pytest.raises(ProtocolError) as caught:
            await ports.run("SERIAL_OPEN", x.SerialOpen(port=name))
        assert caught.value.code == code
    with pytest.raises(ProtocolError) as bad:
        await ports.run("SERIAL_OPEN", x.SerialOpen(port=port.client_end, baud_rate=1234))
    assert bad.value.code == "SERIAL_CONFIG_INVALID"


def test_hello_offers_the_extension_and_stays_strict() -> None:
    hardware = HardwareConfig(
        serial_ports=(("/dev/ttyTB0", "sim"),),
        usb_devices=(("2341", "0043", "Uno"),),
        gpio_lines=(("gpiochip0:17", "LED"),),
    )
    assert hardware.capabilities() == [
        "hardware_serial",
        x.CAPABILITY,
        "hardware_usb",
        "hardware_gpio",
    ]
    hello = build_hello(
        machine_id="m",
        shim_version="0.1.0",
        capabilities=[Capability.FILES, *hardware.capabilities()],  # type: ignore[list-item]
        allowed_root="/r",
        hardware_devices=hardware.devices(),
    )
    frame = encode_message("HELLO", "h", hello, ts=1.0, version="1.1")
    strict.check_frame(frame, from_shim=True)  # a strict platform accepts it
    assert HardwareConfig(serial_ports=(("/dev/x", "d"),), serial_io=False).capabilities() == [
        "hardware_serial"
    ]


def _protocol(granted: list[str], *, strict_wire: bool = False) -> AgentProtocol:
    hello = build_hello(
        machine_id="m",
        shim_version="0.1.0",
        capabilities=[Capability.FILES, Capability.HARDWARE_SERIAL, x.CAPABILITY],  # type: ignore[list-item]
        allowed_root="/r",
    )
    protocol = AgentProtocol(
        hello=hello,
        local_limits=Limits(),
        clock=ManualClock(),
        new_id=lambda: "h",
        session_id="s",
        strict_wire=strict_wire,
    )
    protocol.start()
    ack = HelloAck(session_id="s", protocol_version="1.1", granted_capabilities=granted)
    protocol.receive(encode_message("HELLO_ACK", "h", ack, ts=1.0, version="1.1"))
    return protocol


def test_only_a_connection_that_negotiated_it_serves_the_extension() -> None:
    request = encode_message("SERIAL_OPEN", "r1", {"port": "/dev/ttyTB0"}, ts=1.0, version="1.1")
    (run,) = _protocol(["files", "hardware_serial", x.CAPABILITY]).receive(request)
    assert isinstance(run, Run) and run.kind == "SERIAL_OPEN"
    (refusal,) = _protocol(["files", "hardware_serial"]).receive(request)
    assert isinstance(refusal, Send) and b"FEATURE_NOT_SUPPORTED" in refusal.data


def test_the_strict_profile_serves_the_extension_it_negotiated() -> None:
    """--strict-wire drops what a strict peer refuses among the spec's frames; a
    request of the extension it offered and was granted is not one of them (it
    once went unanswered: offered, granted, then dropped)."""
    request = encode_message("SERIAL_OPEN", "r1", {"port": "/dev/ttyTB0"}, ts=1.0, version="1.1")
    granted = _protocol(["files", "hardware_serial", x.CAPABILITY], strict_wire=True)
    (run,) = granted.receive(request)
    assert isinstance(run, Run) and run.kind == "SERIAL_OPEN"
    not_granted = _protocol(["files", "hardware_serial"], strict_wire=True)
    assert not any(isinstance(a, Send | Run) for a in not_granted.receive(request))
