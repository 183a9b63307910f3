"""Hardware on the agent's machine: what HELLO advertises (`devices.py`) and
serial I/O, the Tetherbed extension (`serial_io.py`; wire/serial_io.py), on
lines that move the bytes (`lines.py`: pyserial, or a simulated device)."""

from tetherbed.agent.hardware.devices import HardwareConfig
from tetherbed.agent.hardware.lines import LineGone, LineOpener, SerialLine
from tetherbed.agent.hardware.serial_io import SerialPorts

__all__ = ["HardwareConfig", "LineGone", "LineOpener", "SerialLine", "SerialPorts"]
