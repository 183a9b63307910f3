"""Virtual serial ports on this host: socat joins two ptys, a simulated device
serves one end, programs (the agent) open the other — what the machine image's
entrypoint does in a container, for the process backend and the tests.

`VirtualSerialPort.start(folder, name)` makes `folder/NAME` (the client end)
and `folder/NAME.device`, starts socat and the device as processes, and
`stop()` ends them by PID. `unplug()` ends socat alone: the client end
vanishes and a program reading it gets EIO, as when a USB adapter is pulled.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tetherbed.simulator.peripherals.serial_device import ask

#: A device's default speed, as Arduino sketches use.
DEFAULT_BAUD = 9600


@dataclass
class VirtualSerialPort:
    name: str
    client_end: str
    device_end: str
    baud: int
    socat: subprocess.Popen[bytes]
    device: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(
        cls,
        folder: Path,
        name: str,
        *,
        baud: int = DEFAULT_BAUD,
        seed: int = 0,
        serial: str | None = None,
        timeout: float = 5.0,
    ) -> VirtualSerialPort:
        socat = shutil.which("socat")
        if socat is None:
            raise RuntimeError("socat is not installed (apt-get install socat)")
        folder.mkdir(parents=True, exist_ok=True)
        client_end, device_end = str(folder / name), str(folder / f"{name}.device")
        proc = subprocess.Popen(
            [
                socat,
                "-d",
                f"pty,raw,echo=0,link={client_end},mode=600",
                f"pty,raw,echo=0,link={device_end},mode=600",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        port = cls(name, client_end, device_end, baud, proc)
        deadline = time.monotonic() + timeout
        while not (os.path.exists(client_end) and os.path.exists(device_end)):
            if time.monotonic() > deadline or proc.poll() is not None:
                port.stop()
                raise RuntimeError(f"socat did not make {client_end} within {timeout} s")
            time.sleep(0.02)
        port.device = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tetherbed.simulator.peripherals.serial_device",
                "serve",
                device_end,
                "--serial",
                serial or name,
                "--seed",
                str(seed),
                "--baud",
                str(baud),
                "--client-end",
                client_end,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        # Ready once it answers: bytes sent before it opened its end are flushed.
        while True:
            try:
                if ask(client_end, ["PING"], timeout=0.3, baud=baud) == ["PONG"]:
                    return port
            except (OSError, TimeoutError):
                pass
            if time.monotonic() > deadline + timeout or port.device.poll() is not None:
                port.stop()
                raise RuntimeError(f"the simulated device on {device_end} does not answer")

    def unplug(self) -> None:
        """The device goes away: socat ends, the client end with it."""
        _stop(self.socat)

    def stop(self) -> None:
        _stop(self.socat)
        if self.device is not None:
            _stop(self.device)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
