"""Hardware on the agent's machine: what HELLO advertises (`devices.py`) and
serial I/O, the Tetherbed extension (`serial_io.py`; wire/serial_io.py)."""

from tetherbed.agent.hardware.devices import HardwareConfig
from tetherbed.agent.hardware.serial_io import SerialPorts

__all__ = ["HardwareConfig", "SerialPorts"]
