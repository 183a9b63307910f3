"""A simulated Arduino-like device on a serial port, and a small client for it.

In the machine image, socat makes a pty pair per virtual serial port: the
client end is `/dev/ttyTB0` (what the agent advertises and programs open) and
the device end is `/run/tetherbed/serial/ttyTB0.device`, where this module
serves. It works on any tty or pty, e.g. one end of a host-side socat pair.

    python -m tetherbed.simulator.peripherals.serial_device serve PORT [--serial SN]
    python -m tetherbed.simulator.peripherals.serial_device ask PORT 'PING' 'ID?'

Line protocol
-------------

ASCII/UTF-8 text, one command per line. A command line ends with LF, CRLF or
a lone CR (what terminal programs send on Enter). The command word is
case-insensitive; arguments keep their case. Every non-empty line gets
exactly one reply line, always ended with CRLF (as Arduino's `println`); an
empty line gets none. The device never speaks unprompted, so replies pair up
with commands for a client that flushes its input on open (`tcflush(TCIFLUSH)`:
a reply an earlier client left unread stays queued on the port) and then
alternates write and read.

| command             | reply                                 |
|---------------------|---------------------------------------|
| `PING`              | `PONG`                                |
| `ID?`               | `tetherbed,sim-arduino,<serial>,<fw>` |
| `ECHO <text>`       | `<text>`                              |
| `READ <sensor>`     | `<sensor>=<value>`                    |
| `SET <key> <value>` | `OK`                                  |
| `GET <key>`         | `<key>=<value>`                       |
| `RESET`             | `OK`                                  |
| `HELP`              | `OK <command> <command> ...`          |

`ID?` names vendor, model, serial number and firmware version. `ECHO` answers
the rest of the line after one space, verbatim (it may be empty). `READ`
takes sensor names in any case and answers them in lowercase. `SET` changes a
setting, or pins a sensor to a number (`auto` unpins it). `RESET` puts
settings and pinned sensors back to their defaults and restarts `uptime`.

Sensors (`READ`): `temp` (°C, 2 decimals), `humidity` (%, 1 decimal), `uptime`
(ms since start or RESET, like `millis()`), `a0` ... `a5` (analog pins,
integers 0-1023). Readings drift slowly with time plus a little noise from a
seeded generator (`--seed`), so two devices with the same seed and clock
answer alike. `SET temp 30.5` pins a reading until `SET temp auto` or
`RESET`; `uptime` cannot be pinned. A device may start with readings pinned
(`--pin temp=30.5`, a scenario's `sensors:`): those are its defaults, which
`RESET` and `auto` go back to.

Settings (`SET`/`GET`): `led` (`0`/`1`, also `on`/`off`; default 0), `pwm`
(integer 0-255; default 0), `label` (printable text up to 32 characters;
default empty).

Errors are one line `ERR <code> <message>`:

| code              | when |
|-------------------|------|
| `UNKNOWN_COMMAND` | the command word is not in the table above |
| `BAD_ARGUMENT`    | an argument is missing, extra, or out of range |
| `UNKNOWN_SENSOR`  | `READ`/`SET` names no sensor or setting (the message lists them) |
| `UNKNOWN_KEY`     | `GET` names no setting |
| `LINE_TOO_LONG`   | a line longer than 256 bytes (the whole line is discarded) |
| `BAD_ENCODING`    | a line that is not UTF-8 |

`SerialDevice` is the protocol as a plain class (bytes in, bytes out, clock
injected); `serve` drives it on a tty file descriptor and `ask` is the client
the tests and the containers use.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import math
import os
import random
import select
import sys
import termios
import time
import tty
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

#: Longest accepted command line, in bytes, without its line ending.
MAX_LINE_BYTES = 256
#: Longest `label` setting, in characters.
MAX_LABEL_CHARS = 32
#: Replies end like Arduino's `Serial.println`.
REPLY_END = b"\r\n"
FIRMWARE = "1.0.0"
COMMANDS = ("PING", "ID?", "ECHO", "READ", "SET", "GET", "RESET", "HELP")
SENSORS = ("temp", "humidity", "uptime", "a0", "a1", "a2", "a3", "a4", "a5")
SETTINGS = ("led", "pwm", "label")

_CR, _LF = 0x0D, 0x0A
_TRUE_WORDS = {"1": 1, "on": 1, "0": 0, "off": 0}


@dataclass(frozen=True, slots=True)
class DeviceIdentity:
    """What `ID?` answers."""

    serial: str = "SIM0001"
    vendor: str = "tetherbed"
    model: str = "sim-arduino"
    firmware: str = FIRMWARE

    def line(self) -> str:
        return f"{self.vendor},{self.model},{self.serial},{self.firmware}"


class DeviceError(Exception):
    """A command the device answers with `ERR <code> <message>`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code} {message}")
        self.code = code
        self.message = message


class SerialDevice:
    """The device's protocol, sans I/O: feed it bytes, write back what it returns.

    `clock` gives seconds (monotonic); `seed` makes the sensor noise
    reproducible; `pins` are readings pinned from the start (ValueError for
    a sensor that cannot be pinned or a value out of its range).
    """

    def __init__(
        self,
        identity: DeviceIdentity | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        seed: int = 0,
        pins: Mapping[str, float] | None = None,
    ) -> None:
        self.identity = identity or DeviceIdentity()
        self._clock = clock
        self._seed = seed
        self._default_pins: dict[str, float] = {}
        for sensor, value in (pins or {}).items():
            self._default_pins[sensor] = pin_value(sensor, str(value))
        self._buffer = bytearray()
        self._discarding = False  # inside a line that is already too long
        self._after_cr = False  # the previous byte ended a line with CR
        self._reset()

    def _reset(self) -> None:
        self._started = self._clock()
        self._rng = random.Random(self._seed)
        self.settings: dict[str, int | str] = {"led": 0, "pwm": 0, "label": ""}
        self.pinned: dict[str, float] = dict(self._default_pins)

    # --- framing -------------------------------------------------------------

    def receive(self, data: bytes) -> bytes:
        """Take bytes from the port; return the reply bytes to write back (maybe none)."""
        out = bytearray()
        for byte in data:
            if byte == _LF and self._after_cr:
                self._after_cr = False  # the LF of a CRLF: the line already ended
                continue
            self._after_cr = byte == _CR
            if byte in (_CR, _LF):
                reply = self._end_line()
                if reply is not None:
                    out += reply.encode("utf-8") + REPLY_END
            elif self._discarding:
                continue
            elif len(self._buffer) >= MAX_LINE_BYTES:
                # Stop storing at once: a limit is enforced before memory is spent.
                self._discarding = True
                self._buffer.clear()
            else:
                self._buffer.append(byte)
        return bytes(out)

    def _end_line(self) -> str | None:
        raw = bytes(self._buffer)
        self._buffer.clear()
        if self._discarding:
            self._discarding = False
            return _error("LINE_TOO_LONG", f"line longer than {MAX_LINE_BYTES} bytes")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            return _error("BAD_ENCODING", "line is not UTF-8")
        return self.handle_line(line)

    # --- commands ------------------------------------------------------------

    def handle_line(self, line: str) -> str | None:
        """The reply to one command line (no line ending), or None for an empty line."""
        if not line.strip():
            return None
        word, _, rest = line.strip(" \t").partition(" ")
        command = word.upper()
        try:
            if command == "PING":
                self._no_arguments(command, rest)
                return "PONG"
            if command == "ID?":
                self._no_arguments(command, rest)
                return self.identity.line()
            if command == "ECHO":
                # The text after the first space, verbatim: spaces and case kept.
                return line.lstrip(" \t")[len(word) + 1 :]
            if command == "READ":
                return self._read(rest.split())
            if command == "SET":
                return self._set(rest.split(maxsplit=1))
            if command == "GET":
                return self._get(rest.split())
            if command == "RESET":
                self._no_arguments(command, rest)
                self._reset()
                return "OK"
            if command == "HELP":
                return "OK " + " ".join(COMMANDS)
            raise DeviceError("UNKNOWN_COMMAND", f"unknown command {word[:32]!r}; try HELP")
        except DeviceError as exc:
            return _error(exc.code, exc.message)

    @staticmethod
    def _no_arguments(command: str, rest: str) -> None:
        if rest.strip():
            raise DeviceError("BAD_ARGUMENT", f"{command} takes no arguments")

    def _read(self, args: list[str]) -> str:
        if len(args) != 1:
            raise DeviceError("BAD_ARGUMENT", "usage: READ <sensor>")
        name = args[0].lower()
        if name not in SENSORS:
            raise DeviceError(
                "UNKNOWN_SENSOR", f"no sensor {args[0][:32]!r}; sensors: {' '.join(SENSORS)}"
            )
        return f"{name}={self.reading(name)}"

    def reading(self, name: str) -> str:
        """The current value of sensor `name`, formatted as `READ` answers it."""
        elapsed = self._clock() - self._started
        if name == "uptime":
            return str(max(0, int(elapsed * 1000)))
        pinned = self.pinned.get(name)
        noise = self._rng.uniform(-1.0, 1.0)
        if name == "temp":
            value = 21.5 + 1.5 * math.sin(elapsed / 60.0) + 0.05 * noise
            return f"{value if pinned is None else pinned:.2f}"
        if name == "humidity":
            value = 45.0 + 5.0 * math.sin(elapsed / 90.0) + 0.2 * noise
            return f"{value if pinned is None else pinned:.1f}"
        # Analog pins: each pin its own slow wave, as a 10-bit ADC reads it.
        pin = int(name[1])
        if pinned is None:
            pinned = 512 + 400 * math.sin(elapsed / (20.0 + 7 * pin) + pin) + 3 * noise
        return str(min(1023, max(0, round(pinned))))

    def _set(self, args: list[str]) -> str:
        if len(args) != 2:
            raise DeviceError("BAD_ARGUMENT", "usage: SET <key> <value>")
        key, value = args[0].lower(), args[1].strip()
        if key == "led":
            if value.lower() not in _TRUE_WORDS:
                raise DeviceError("BAD_ARGUMENT", "led is 0, 1, on or off")
            self.settings["led"] = _TRUE_WORDS[value.lower()]
        elif key == "pwm":
            if not value.isdigit() or int(value) > 255:
                raise DeviceError("BAD_ARGUMENT", "pwm is an integer 0-255")
            self.settings["pwm"] = int(value)
        elif key == "label":
            if len(value) > MAX_LABEL_CHARS or not value.isprintable():
                raise DeviceError(
                    "BAD_ARGUMENT", f"label is printable text of at most {MAX_LABEL_CHARS} chars"
                )
            self.settings["label"] = value
        elif key in SENSORS and key != "uptime":
            self._pin(key, value)
        else:
            names = " ".join([*SETTINGS, *(s for s in SENSORS if s != "uptime")])
            raise DeviceError("UNKNOWN_SENSOR", f"no setting or sensor {key[:32]!r}; try {names}")
        return "OK"

    def _pin(self, sensor: str, value: str) -> None:
        if value.lower() == "auto":
            if sensor in self._default_pins:
                self.pinned[sensor] = self._default_pins[sensor]
            else:
                self.pinned.pop(sensor, None)
            return
        try:
            self.pinned[sensor] = pin_value(sensor, value)
        except ValueError as exc:
            raise DeviceError("BAD_ARGUMENT", str(exc)) from None

    def _get(self, args: list[str]) -> str:
        if len(args) != 1:
            raise DeviceError("BAD_ARGUMENT", "usage: GET <key>")
        key = args[0].lower()
        if key not in SETTINGS:
            raise DeviceError(
                "UNKNOWN_KEY", f"no setting {args[0][:32]!r}; try {' '.join(SETTINGS)}"
            )
        return f"{key}={self.settings[key]}"


def _error(code: str, message: str) -> str:
    return f"ERR {code} {message}"


#: Sensors whose reading can be pinned (`uptime` counts time, it cannot).
PINNABLE = tuple(s for s in SENSORS if s != "uptime")


def pin_value(sensor: str, value: str) -> float:
    """The number `value` pins `sensor` to; ValueError says why it cannot."""
    if sensor not in PINNABLE:
        raise ValueError(f"{sensor!r} cannot be pinned; sensors: {' '.join(PINNABLE)}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{sensor} is a number or auto") from None
    if not math.isfinite(number) or (sensor.startswith("a") and not 0 <= number <= 1023):
        raise ValueError(f"{value[:32]!r} is out of range for {sensor}")
    return number


def pin_problem(sensor: str, value: object) -> str | None:
    """Why `value` cannot pin `sensor` (None: it can)."""
    try:
        pin_value(sensor, str(value))
    except ValueError as exc:
        return str(exc)
    return None


def reply(device: SerialDevice, data: bytes, *, baud: int | None, client_baud: int | None) -> bytes:
    """What the device at `baud` sends back for `data` from a client whose end
    is set to `client_baud` (None: unknown, taken to match): its answers, or at
    another speed garbage, with the commands not run."""
    if baud is not None and client_baud is not None and client_baud != baud:
        return garble(data)
    return device.receive(data)


# --- I/O: the device on a tty ----------------------------------------------------


def open_port(path: str, *, nonblocking: bool = False) -> int:
    """Open a tty in raw mode (no echo, no line editing, no CR/LF translation)."""
    flags = os.O_RDWR | os.O_NOCTTY | (os.O_NONBLOCK if nonblocking else 0)
    fd = os.open(path, flags)
    try:
        tty.setraw(fd)
    except termios.error:
        os.close(fd)
        raise
    return fd


def line_speed(path: str) -> int | None:
    """The baud rate the client end of the port is set to (its termios), or None.

    A pty carries bytes at any speed; reading the speed the client set on its
    end is how the simulated device notices a mismatch."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        speed = termios.tcgetattr(fd)[5]  # ospeed, a termios.B* constant
    except termios.error:
        return None
    finally:
        os.close(fd)
    return _BAUDS.get(speed)


_BAUDS = {
    getattr(termios, f"B{rate}"): rate
    for rate in (300, 600, 1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400)
    if hasattr(termios, f"B{rate}")
}
#: The speeds a simulated device can run at (and tell a client's from).
SPEEDS = tuple(sorted(_BAUDS.values()))


def garble(data: bytes) -> bytes:
    """What a UART at the wrong speed makes of `data`: framing errors, never a
    line end (every byte has its high bit set), the same bytes for the same input."""
    return bytes(((b * 7) ^ 0x5A) & 0xFF | 0x80 for b in data)


def serve(
    path: str, device: SerialDevice, *, baud: int | None = None, client_end: str | None = None
) -> None:
    """Answer commands on `path` until its other end goes away (EOF or EIO).

    With `baud` and `client_end` (the port programs open), a client whose end
    is set to another speed gets garbage back and its commands are not run,
    as with a real device at the wrong baud rate."""
    fd = open_port(path)
    try:
        termios.tcflush(fd, termios.TCIFLUSH)
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError as exc:
                if exc.errno == errno.EIO:  # a pty whose master (socat) has closed
                    return
                raise
            if not data:
                return
            speed = line_speed(client_end) if baud is not None and client_end else None
            answer = reply(device, data, baud=baud, client_baud=speed)
            while answer:
                answer = answer[os.write(fd, answer) :]
    finally:
        os.close(fd)


def ask(
    path: str, lines: Sequence[str], *, timeout: float = 2.0, baud: int | None = None
) -> list[str]:
    """Send each line to the device on `path`; return its reply lines, in order.

    `baud` sets the port's speed first (a device served with `--baud` checks
    it). Raises TimeoutError when a reply does not arrive within `timeout` seconds.
    """
    fd = open_port(path, nonblocking=True)
    try:
        if baud is not None:
            speed = getattr(termios, f"B{baud}")
            attributes = termios.tcgetattr(fd)
            attributes[4] = attributes[5] = speed
            termios.tcsetattr(fd, termios.TCSANOW, attributes)
        # Drop whatever an earlier client left unread, so replies pair up.
        termios.tcflush(fd, termios.TCIFLUSH)
        replies: list[str] = []
        pending = bytearray()
        for line in lines:
            if not line.strip():
                continue  # the device does not answer an empty line
            data = line.encode("utf-8") + b"\n"
            while data:
                data = data[os.write(fd, data) :]
            deadline = time.monotonic() + timeout
            while REPLY_END not in pending:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    raise TimeoutError(f"no reply to {line!r} from {path} within {timeout} s")
                with contextlib.suppress(BlockingIOError):
                    pending += os.read(fd, 4096)
            reply, _, rest = bytes(pending).partition(REPLY_END)
            pending = bytearray(rest)
            replies.append(reply.decode("utf-8", errors="replace"))
        return replies
    finally:
        os.close(fd)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tetherbed.simulator.peripherals.serial_device",
        description="A simulated Arduino-like serial device (protocol: module docstring).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="be the device on the tty at PORT")
    run.add_argument("port", help="the device end of a pty pair, e.g. made by socat")
    run.add_argument("--serial", default="SIM0001", help="serial number that ID? reports")
    run.add_argument("--model", default="sim-arduino")
    run.add_argument("--seed", type=int, default=0, help="seed of the sensor noise")
    run.add_argument(
        "--baud", type=int, default=None, help="the device's speed (with --client-end)"
    )
    run.add_argument(
        "--client-end",
        default=None,
        help="the port programs open: at another speed than --baud they get garbage",
    )
    run.add_argument(
        "--pin",
        action="append",
        default=[],
        metavar="SENSOR=VALUE",
        help="a reading pinned from the start, e.g. temp=30.5 (repeatable)",
    )
    client = commands.add_parser("ask", help="send lines to the device at PORT, print replies")
    client.add_argument("port")
    client.add_argument("lines", nargs="+", metavar="LINE")
    client.add_argument("--timeout", type=float, default=2.0, help="seconds per reply")
    client.add_argument("--baud", type=int, default=None, help="set the port's speed first")
    args = parser.parse_args(argv)

    if args.command == "serve":
        pins: dict[str, float] = {}
        for item in args.pin:
            sensor, sep, value = item.partition("=")
            if not sep:
                parser.error(f"--pin {item!r}: expected SENSOR=VALUE")
            try:
                pins[sensor.lower()] = pin_value(sensor.lower(), value)
            except ValueError as exc:
                parser.error(f"--pin {item!r}: {exc}")
        identity = DeviceIdentity(serial=args.serial, model=args.model)
        device = SerialDevice(identity, seed=args.seed, pins=pins)
        try:
            serve(args.port, device, baud=args.baud, client_end=args.client_end)
        except KeyboardInterrupt:
            return 0
        except OSError as exc:
            print(f"serial_device: {args.port}: {exc}", file=sys.stderr)
            return 1
        print(f"serial_device: {args.port}: the other end closed", file=sys.stderr)
        return 1
    try:
        for reply in ask(args.port, args.lines, timeout=args.timeout, baud=args.baud):
            print(reply)
    except (OSError, TimeoutError) as exc:
        print(f"serial_device: {args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
