"""The sim backend's serial ports: the agent's real SerialPorts on a simulated
device in virtual time (no socat, no threads, no waiting)."""

from __future__ import annotations

import asyncio
import base64

import pytest

from tetherbed.agent.hardware import HardwareConfig, SerialPorts
from tetherbed.simulator.peripherals.serial_device import garble
from tetherbed.simulator.peripherals.serial_ports import DeviceSpec
from tetherbed.simulator.sim.serial import SimSerialPort
from tetherbed.simulator.virtual_time import run_virtual
from tetherbed.wire import serial_io as x
from tetherbed.wire.errors import ProtocolError

PATH = "/dev/ttyTB0"


def machine(**device: object) -> tuple[SimSerialPort, SerialPorts]:
    loop = asyncio.get_running_loop()
    spec = DeviceSpec.from_scenario("ttyTB0", device, "laptop")
    port = SimSerialPort(PATH, spec, loop.time)

    async def opener(request: x.SerialOpen) -> object:
        return await port.open(request)

    ports = SerialPorts(HardwareConfig(serial_ports=((PATH, spec.description),)), opener=opener)  # type: ignore[arg-type]
    return port, ports


def read(**fields: object) -> x.SerialRead:
    return x.SerialRead(port=PATH, **fields)  # type: ignore[arg-type]


def test_replies_arrive_at_the_devices_speed_and_reads_split_at_the_terminator() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        _, ports = machine(baud=9600, serial="SN-7", sensors={"temp": 30.5})
        await ports.run("SERIAL_OPEN", x.SerialOpen(port=PATH))
        started = loop.time()
        await ports.run("SERIAL_WRITE", x.SerialWrite(port=PATH, data="PING\nID?\nREAD temp\n"))
        _, pong = await ports.run("SERIAL_READ", read(until="\r\n", timeout_ms=1000))
        # "PING\n" and "PONG\r\n" cross at 960 bytes per second.
        assert loop.time() - started == pytest.approx(11 / 960)
        _, ident = await ports.run("SERIAL_READ", read(until="\r\n"))
        _, temp = await ports.run("SERIAL_READ", read(until="\r\n"))
        assert [pong.data, ident.data, temp.data] == [
            "PONG\r\n",
            "tetherbed,sim-arduino,SN-7,1.0.0\r\n",
            "temp=30.50\r\n",
        ]
        started = loop.time()
        _, quiet = await ports.run("SERIAL_READ", read(until="\r\n", timeout_ms=250))
        assert (quiet.data, quiet.timed_out, loop.time() - started) == ("", True, 0.25)

    run_virtual(main())


def test_an_unplug_mid_read_hands_over_the_bytes_and_closes_the_port() -> None:
    async def main() -> None:
        port, ports = machine()
        await ports.run("SERIAL_OPEN", x.SerialOpen(port=PATH))
        await ports.run("SERIAL_WRITE", x.SerialWrite(port=PATH, data="PING\n"))
        reading = asyncio.ensure_future(
            ports.run("SERIAL_READ", read(max_bytes=64, timeout_ms=20_000))
        )
        await asyncio.sleep(1)
        assert not reading.done()  # PONG arrived; it waits for more
        port.unplug()
        with pytest.raises(ProtocolError) as gone:
            await reading
        assert gone.value.code == "SERIAL_PORT_GONE"
        assert base64.b64decode(gone.value.details["received"]) == b"PONG\r\n"
        assert gone.value.details["received_bytes"] == 6
        for request, payload, code in [
            ("SERIAL_READ", read(), "SERIAL_PORT_NOT_OPEN"),
            ("SERIAL_OPEN", x.SerialOpen(port=PATH), "SERIAL_PORT_GONE"),
        ]:
            with pytest.raises(ProtocolError) as refused:
                await ports.run(request, payload)
            assert refused.value.code == code
        port.plug()
        await ports.run("SERIAL_OPEN", x.SerialOpen(port=PATH))
        await ports.run("SERIAL_WRITE", x.SerialWrite(port=PATH, data="PING\n"))
        _, pong = await ports.run("SERIAL_READ", read(until="\r\n"))
        assert pong.data == "PONG\r\n"

    run_virtual(main())


def test_a_write_to_a_vanished_device_is_port_gone() -> None:
    async def main() -> None:
        port, ports = machine()
        await ports.run("SERIAL_OPEN", x.SerialOpen(port=PATH))
        port.unplug()
        with pytest.raises(ProtocolError) as gone:
            await ports.run("SERIAL_WRITE", x.SerialWrite(port=PATH, data="PING\n"))
        assert gone.value.code == "SERIAL_PORT_GONE" and "received" not in gone.value.details

    run_virtual(main())


def test_at_the_wrong_speed_the_device_answers_garbage_and_runs_nothing() -> None:
    async def main() -> None:
        _, ports = machine(baud=9600)
        await ports.run("SERIAL_OPEN", x.SerialOpen(port=PATH, baud_rate=115200))
        await ports.run("SERIAL_WRITE", x.SerialWrite(port=PATH, data="SET led 1\n"))
        _, noise = await ports.run(
            "SERIAL_READ", read(until="\n", timeout_ms=500, encoding="base64")
        )
        assert noise.timed_out and base64.b64decode(noise.data) == garble(b"SET led 1\n")
        await ports.run("SERIAL_CLOSE", x.SerialClose(port=PATH))
        await ports.run("SERIAL_OPEN", x.SerialOpen(port=PATH, baud_rate=9600))
        await ports.run("SERIAL_WRITE", x.SerialWrite(port=PATH, data="GET led\n"))
        _, led = await ports.run("SERIAL_READ", read(until="\r\n"))
        assert led.data == "led=0\r\n"

    run_virtual(main())


def test_one_opener_at_a_time_and_a_dead_agent_frees_the_port() -> None:
    async def main() -> None:
        port, first = machine()
        second = SerialPorts(first.hardware, opener=port.open)
        await first.run("SERIAL_OPEN", x.SerialOpen(port=PATH))
        with pytest.raises(ProtocolError) as busy:
            await second.run("SERIAL_OPEN", x.SerialOpen(port=PATH))
        assert busy.value.code == "SERIAL_PORT_BUSY"
        port.release()  # the first agent's process is gone
        await second.run("SERIAL_OPEN", x.SerialOpen(port=PATH))

    run_virtual(main())


def test_a_testbed_drives_the_ports_step_by_step(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tetherbed.simulator.testbed import Testbed, topology

    bench = topology(
        agents={"laptop": {"session": "s", "options": {"serial": {"ttyTB0": {"baud": 9600}}}}},
        clients={"alice": {"session": "s"}},
    )
    tb = Testbed(bench, backend="sim", workdir=tmp_path)
    try:
        tb.start("hub")
        tb.start("laptop")
        tb.expect(agent="laptop", state="connected")
        assert tb.serial("alice", "open", "ttyTB0").value["baud_rate"] == 9600
        tb.serial("alice", "write", "ttyTB0", data="PING\n")
        assert tb.serial("alice", "read", "ttyTB0", until="\r\n").value["data"] == "PONG\r\n"
        tb.unplug("laptop", "ttyTB0")
        # Open, its device gone: the next read finds out, and closes the port.
        assert tb.serial("alice", "read", "ttyTB0").value["code"] == "SERIAL_PORT_GONE"
        assert tb.serial("alice", "read", "ttyTB0").value["code"] == "SERIAL_PORT_NOT_OPEN"
        tb.plug("laptop", "ttyTB0")
        assert tb.serial("alice", "open", "ttyTB0").type == "ok"
        assert all(v.ok for v in tb.check(["serial_io"]))
    finally:
        tb.close()
