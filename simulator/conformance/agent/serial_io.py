"""Hardware: the advertisement, and Tetherbed's serial I/O extension when negotiated.

Sections: HELLO (`hardware_serial`, `hardware_usb`, `hardware_devices`) and
the extension `tetherbed.serial_io` (wire/serial_io.py): the spec advertises
hardware but defines no message to use it; the extension adds SERIAL_OPEN,
WRITE, READ and CLOSE between peers that both know it. Each case gives the
agent a virtual serial port with the simulated line-protocol device on its
far end (`{serial_ports}`). An agent that does not offer the extension is not
judged by its cases — but one that offers it must keep its frames from a
platform that did not grant it.
"""

from __future__ import annotations

import base64
from typing import Any

from tetherbed.simulator.conformance.agent.answers import quote, require_error, require_type
from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.agent.peripherals import serial_device
from tetherbed.simulator.conformance.agent.platform import AckPolicy, AgentConnection
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.simulator.peripherals.serial_ports import VirtualSerialPort
from tetherbed.wire import serial_io as x
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.messages import Capability

HELLO = "Message Types › Handshake › HELLO (hardware)"
EXTENSION = f"Tetherbed extension {x.CAPABILITY} (wire/serial_io.py)"
DESCRIPTION = "Tetherbed simulated device"
USB = ("2341", "0043", "Arduino Uno")
GPIO = ("gpiochip0:17", "LED")
#: Every capability the spec names: a platform that does not know the extension grants these.
SPEC_CAPABILITIES = {str(c) for c in Capability}
#: Read timeouts: long enough for the device's reply on a loaded machine.
REPLY_WAIT_MS = 5000
#: Seconds to wait for an answer to a request of the extension it was not granted.
UNGRANTED_WAIT = 5.0


async def hardware_agent(
    ctx: AgentContext, *, grant_extension: bool = True, usb: bool = False, gpio: bool = False
) -> tuple[AgentConnection, VirtualSerialPort]:
    """An agent given a serial device (and a USB device, a GPIO line), connected."""
    port = await serial_device(ctx)
    grant = None if grant_extension else SPEC_CAPABILITIES
    conn = await ctx.connect(
        AckPolicy(grant=grant),
        serial_ports=f"{port.client_end}={DESCRIPTION}",
        usb_devices=f"{USB[0]}:{USB[1]}={USB[2]}" if usb else "",
        gpio_lines=f"{GPIO[0]}={GPIO[1]}" if gpio else "",
    )
    return conn, port


async def extension_agent(
    ctx: AgentContext, **options: Any
) -> tuple[AgentConnection, VirtualSerialPort]:
    """As hardware_agent, and skipped unless the agent offers the extension."""
    conn, port = await hardware_agent(ctx, **options)
    if x.CAPABILITY not in conn.advertised:
        ctx.not_applicable(f"the agent does not offer the serial I/O extension ({x.CAPABILITY})")
    return conn, port


async def serial(conn: AgentConnection, kind: str, **payload: Any) -> Any:
    return await conn.request(kind, payload, timeout=REPLY_WAIT_MS / 1000 + 10)


@case(
    "LE-hello-hardware-devices",
    level=Level.MUST,
    section=HELLO,
    rule="An agent that advertises hardware_serial lists each port in hardware_devices as "
    '{"type": "serial", "port", "desc"}.',
)
async def hardware_devices(ctx: AgentContext) -> None:
    conn, port = await hardware_agent(ctx)
    if "hardware_serial" not in conn.advertised:
        ctx.not_applicable("the agent does not advertise hardware_serial for the port it was given")
    devices = conn.hello_payload.get("hardware_devices")
    ctx.require(isinstance(devices, list), f"hardware_devices is {devices!r}, not a list")
    serial_ports = [d for d in devices if isinstance(d, dict) and d.get("type") == "serial"]
    ctx.require(serial_ports, f"no device of type serial in hardware_devices {devices!r}")
    ours = [d for d in serial_ports if d.get("port") == port.client_end]
    ctx.require(ours, f"no serial device with port {port.client_end} in {serial_ports!r}")
    ctx.require(isinstance(ours[0].get("desc"), str), f"its desc is {ours[0].get('desc')!r}")


@case(
    "LE-serial-offered-with-hardware",
    level=Level.MUST,
    section=EXTENSION,
    rule=f"The capability {x.CAPABILITY} is offered in HELLO only together with hardware_serial.",
)
async def offered_with_hardware(ctx: AgentContext) -> None:
    conn, _ = await extension_agent(ctx)
    ctx.require("hardware_serial" in conn.advertised, f"{x.CAPABILITY} without hardware_serial")


@case(
    "LE-serial-not-negotiated",
    level=Level.MUST,
    section=EXTENSION,
    rule="A platform that did not grant the extension never sees it: a SERIAL_OPEN from it "
    "is treated as an unknown message type (an ERROR, or dropped), never answered with a "
    "SERIAL_* frame.",
)
async def not_negotiated(ctx: AgentContext) -> None:
    conn, port = await extension_agent(ctx, grant_extension=False)
    ctx.require(x.CAPABILITY not in conn.granted, "the case's platform granted the extension")
    frame = conn.envelope(x.S.SERIAL_OPEN, {"port": port.client_end})
    sent = ctx.evidence.now()
    await conn.send(frame)
    answer = await conn.answer_to(frame["id"], timeout=UNGRANTED_WAIT, after=sent)
    if answer is not None and answer.type != "ERROR":
        ctx.depart(f"SERIAL_OPEN without the grant was answered {quote(answer)}")
    shown = conn.socket.frames(lambda f: str(f.type or "").startswith("SERIAL_"))
    if shown:
        ctx.depart(f"the agent sent {quote(shown[0])} to a platform that did not grant it")
    # Whether an unknown type gets an ERROR at all is LE-envelope-unknown-type's rule.
    ctx.observe(f"answered {quote(answer)}" if answer else "dropped without an answer")


@case(
    "LE-serial-round-trip",
    level=Level.MUST,
    section=EXTENSION,
    rule="SERIAL_OPEN → SERIAL_OPENED {port, baud_rate}; SERIAL_WRITE → SERIAL_WRITTEN "
    "{port, bytes_written}; SERIAL_READ until a terminator → SERIAL_DATA {port, data, "
    "encoding, size_bytes, timed_out} with the device's reply; SERIAL_CLOSE → ACK.",
)
async def round_trip(ctx: AgentContext) -> None:
    conn, port = await extension_agent(ctx)
    path = port.client_end
    opened = require_type(
        await serial(conn, x.S.SERIAL_OPEN, port=path, baud_rate=port.baud),
        x.S.SERIAL_OPENED,
        "SERIAL_OPEN of the advertised port",
    )
    ctx.require(
        opened.get("port") == path and opened.get("baud_rate") == port.baud,
        f"SERIAL_OPENED is {opened!r}",
    )
    written = require_type(
        await serial(conn, x.S.SERIAL_WRITE, port=path, data="ECHO conformance\n"),
        x.S.SERIAL_WRITTEN,
        "SERIAL_WRITE",
    )
    ctx.require(written.get("bytes_written") == 17, f"SERIAL_WRITTEN is {written!r}")
    data = require_type(
        await serial(
            conn, x.S.SERIAL_READ, port=path, until="\n", timeout_ms=REPLY_WAIT_MS,
            encoding="base64",
        ),
        x.S.SERIAL_DATA,
        "SERIAL_READ until a newline",
    )  # fmt: skip
    raw = base64.b64decode(str(data.get("data", "")))
    ctx.require(raw == b"conformance\r\n", f"the device's reply came back as {raw!r}")
    ctx.require(
        data.get("size_bytes") == len(raw) and data.get("timed_out") is False,
        f"SERIAL_DATA says size_bytes {data.get('size_bytes')!r}, timed_out "
        f"{data.get('timed_out')!r}",
    )
    require_type(await serial(conn, x.S.SERIAL_CLOSE, port=path), "ACK", "SERIAL_CLOSE")


@case(
    "LE-serial-read-timeout",
    level=Level.MUST,
    section=EXTENSION,
    rule="A SERIAL_READ that gets nothing within timeout_ms answers SERIAL_DATA with no "
    "data and timed_out true.",
)
async def read_timeout(ctx: AgentContext) -> None:
    conn, port = await extension_agent(ctx)
    path = port.client_end
    require_type(await serial(conn, x.S.SERIAL_OPEN, port=path), x.S.SERIAL_OPENED, "SERIAL_OPEN")
    data = require_type(
        await serial(conn, x.S.SERIAL_READ, port=path, timeout_ms=200),
        x.S.SERIAL_DATA,
        "SERIAL_READ of a silent device",
    )
    ctx.require(
        data.get("data") == "" and data.get("size_bytes") == 0 and data.get("timed_out") is True,
        f"SERIAL_DATA is {data!r}",
    )


@case(
    "LE-serial-port-errors",
    level=Level.MUST,
    section=EXTENSION,
    rule="A port not advertised is SERIAL_PORT_UNKNOWN; WRITE before OPEN is "
    "SERIAL_PORT_NOT_OPEN; a second OPEN of an open port is SERIAL_PORT_BUSY; a baud rate "
    "the port does not take is SERIAL_CONFIG_INVALID.",
)
async def port_errors(ctx: AgentContext) -> None:
    conn, port = await extension_agent(ctx)
    path = port.client_end
    elsewhere = str(ctx.outside / "ttyNOPE")
    require_error(
        await serial(conn, x.S.SERIAL_OPEN, port=elsewhere),
        str(x.SerialErrorCode.SERIAL_PORT_UNKNOWN),
        "SERIAL_OPEN of a port not advertised",
    )
    require_error(
        await serial(conn, x.S.SERIAL_WRITE, port=path, data="PING\n"),
        str(x.SerialErrorCode.SERIAL_PORT_NOT_OPEN),
        "SERIAL_WRITE before SERIAL_OPEN",
    )
    require_error(
        await serial(conn, x.S.SERIAL_OPEN, port=path, baud_rate=12345),
        str(x.SerialErrorCode.SERIAL_CONFIG_INVALID),
        "SERIAL_OPEN at 12345 baud",
    )
    require_type(await serial(conn, x.S.SERIAL_OPEN, port=path), x.S.SERIAL_OPENED, "SERIAL_OPEN")
    require_error(
        await serial(conn, x.S.SERIAL_OPEN, port=path),
        str(x.SerialErrorCode.SERIAL_PORT_BUSY),
        "a second SERIAL_OPEN of the open port",
    )


@case(
    "LE-serial-limits",
    level=Level.MUST,
    section=EXTENSION,
    rule=f"A write of more than {x.MAX_IO_BYTES} bytes, a read of more than that, or a read "
    f"waiting more than {x.MAX_READ_TIMEOUT_MS} ms is refused with an ERROR before any I/O.",
)
async def limits(ctx: AgentContext) -> None:
    conn, port = await extension_agent(ctx)
    path = port.client_end
    require_type(await serial(conn, x.S.SERIAL_OPEN, port=path), x.S.SERIAL_OPENED, "SERIAL_OPEN")
    too_much = base64.b64encode(b"\n" * (x.MAX_IO_BYTES + 1)).decode()
    codes = [
        require_error(
            await serial(conn, x.S.SERIAL_WRITE, port=path, data=too_much, encoding="base64"),
            (),
            f"a SERIAL_WRITE of {x.MAX_IO_BYTES + 1} bytes",
        ),
        require_error(
            await serial(conn, x.S.SERIAL_READ, port=path, max_bytes=x.MAX_IO_BYTES + 1),
            (),
            f"a SERIAL_READ of {x.MAX_IO_BYTES + 1} bytes",
        ),
        require_error(
            await serial(conn, x.S.SERIAL_READ, port=path, timeout_ms=x.MAX_READ_TIMEOUT_MS + 1),
            (),
            f"a SERIAL_READ waiting {x.MAX_READ_TIMEOUT_MS + 1} ms",
        ),
    ]
    ctx.observe(f"codes {codes}")


@case(
    "LE-serial-usb-not-supported",
    level=Level.MUST,
    section=f"{HELLO}; {EXTENSION}",
    rule="SERIAL_OPEN of an advertised USB device is FEATURE_NOT_SUPPORTED: USB is "
    "advertised, but no I/O exists for it.",
)
async def usb_not_supported(ctx: AgentContext) -> None:
    conn, _ = await extension_agent(ctx, usb=True)
    if "hardware_usb" not in conn.advertised:
        ctx.not_applicable("the agent does not advertise the USB device it was given")
    answer = await serial(conn, x.S.SERIAL_OPEN, port=f"usb:{USB[0]}:{USB[1]}")
    require_error(
        answer, str(ErrorCode.FEATURE_NOT_SUPPORTED), "SERIAL_OPEN of an advertised USB device"
    )


@case(
    "LE-serial-gpio-not-supported",
    level=Level.MUST,
    section=f"{HELLO}; {EXTENSION}",
    rule="SERIAL_OPEN of an advertised GPIO line is FEATURE_NOT_SUPPORTED: GPIO is "
    "advertised, but no I/O exists for it.",
)
async def gpio_not_supported(ctx: AgentContext) -> None:
    conn, _ = await extension_agent(ctx, gpio=True)
    if "hardware_gpio" not in conn.advertised:
        ctx.not_applicable("the agent does not advertise the GPIO line it was given")
    answer = await serial(conn, x.S.SERIAL_OPEN, port=GPIO[0])
    require_error(
        answer, str(ErrorCode.FEATURE_NOT_SUPPORTED), "SERIAL_OPEN of an advertised GPIO line"
    )
