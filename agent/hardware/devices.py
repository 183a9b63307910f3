"""The hardware an agent advertises in HELLO, from its configuration.

Serial ports (`--serial-port PATH=DESC`) are `hardware_serial`; USB devices
(`--usb-device VID:PID=DESC`) are `hardware_usb`; GPIO lines
(`--gpio-line CHIP:LINE=DESC`, e.g. `gpiochip0:17`) are `hardware_gpio`. Only
serial ports have I/O (the serial extension); a SERIAL_OPEN naming a USB or
GPIO device answers FEATURE_NOT_SUPPORTED.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tetherbed.wire import serial_io
from tetherbed.wire.messages import Capability, HardwareDevice


@dataclass(frozen=True, slots=True)
class HardwareConfig:
    serial_ports: tuple[tuple[str, str], ...] = ()
    #: (vid, pid, description), vid and pid as 4 hex digits.
    usb_devices: tuple[tuple[str, str, str], ...] = ()
    #: (chip:line, description).
    gpio_lines: tuple[tuple[str, str], ...] = ()
    #: Offer the serial I/O extension with hardware_serial.
    serial_io: bool = True
    extra: tuple[str, ...] = field(default=())

    def capabilities(self) -> list[str]:
        caps: list[str] = []
        if self.serial_ports:
            caps.append(str(Capability.HARDWARE_SERIAL))
            if self.serial_io:
                caps.append(serial_io.CAPABILITY)
        if self.usb_devices:
            caps.append(str(Capability.HARDWARE_USB))
        if self.gpio_lines:
            caps.append(str(Capability.HARDWARE_GPIO))
        return caps

    def devices(self) -> list[HardwareDevice]:
        found = [HardwareDevice(type="serial", port=p, desc=d) for p, d in self.serial_ports]
        found += [HardwareDevice(type="usb", vid=v, pid=p, desc=d) for v, p, d in self.usb_devices]
        found += [HardwareDevice(type="gpio", port=line, desc=d) for line, d in self.gpio_lines]
        return found

    def other_kind(self, port: str) -> str | None:
        """`usb` or `gpio` when `port` names an advertised device of that kind."""
        if any(port == line for line, _ in self.gpio_lines):
            return "gpio"
        if any(port in (f"usb:{v}:{p}", f"{v}:{p}") for v, p, _ in self.usb_devices):
            return "usb"
        return None
