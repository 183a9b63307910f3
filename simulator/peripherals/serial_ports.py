"""Virtual serial ports on a host: socat joins two ptys, a simulated device
serves one end, programs (the agent) open the other — what the machine image's
entrypoint does in a container, for the process and docker backends and the tests.

`VirtualSerialPort.start(folder, name)` makes `folder/NAME` (the client end)
and `folder/NAME.device`, starts socat and the device as processes, and
`stop()` ends them by PID. `unplug()` ends socat alone: the client end
vanishes and a program reading it gets EIO, as when a USB adapter is pulled;
the device, its far end gone, exits by itself. Plugging it in again is a new
`start` at the same path (a device that restarts, as a real one powers up).

`DeviceSpec` is one port's device as a scenario describes it (speed, serial
number, model, noise seed, pinned readings): what the sim backend builds in
process and the other backends start here.

For a container, where the backend is not the parent of these processes,
the same is a command (`python -m tetherbed.simulator.peripherals.serial_ports`):

    ... plug --config PORTS.json --folder DIR NAME    # start it, wait until it answers
    ... unplug --folder DIR NAME                      # end its socat, wait until the port is gone
    ... boot --config PORTS.json --folder DIR -- COMMAND ARGS...

`plug` leaves socat and the device running in sessions of their own (PIDs in
`DIR/NAME.pids`) and exits, so the container's init adopts and reaps them;
`boot` plugs every port the config marks `plugged` and then becomes COMMAND
(exec: same PID, its exit code is the container's), the way the docker
backend starts an agent whose machine has serial devices.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tetherbed.simulator.peripherals.serial_device import (
    DeviceIdentity,
    SerialDevice,
    ask,
)

#: A device's default speed, as Arduino sketches use.
DEFAULT_BAUD = 9600
DEFAULT_MODEL = "sim-arduino"
#: Seconds for socat to make a pair, and again for the device to answer.
START_TIMEOUT = 5.0
_MODULE = "tetherbed.simulator.peripherals.serial_ports"


@dataclass(frozen=True)
class DeviceSpec:
    """The simulated device on one virtual port, as a scenario gives it."""

    name: str
    baud: int = DEFAULT_BAUD
    serial: str = ""
    model: str = DEFAULT_MODEL
    seed: int = 0
    #: Readings pinned from the start: {sensor: value}.
    pins: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_scenario(cls, name: str, options: Mapping[str, Any], machine: str) -> DeviceSpec:
        """`agents.A.options.serial.NAME` (checked at load) of an agent on `machine`."""
        return cls(
            name=name,
            baud=int(options.get("baud", DEFAULT_BAUD)),
            serial=str(options.get("serial") or f"{machine}-{name}"),
            model=str(options.get("model", DEFAULT_MODEL)),
            seed=int(options.get("seed", 0)),
            pins={str(k): float(v) for k, v in (options.get("sensors") or {}).items()},
        )

    @property
    def description(self) -> str:
        """What the agent advertises for the port (HELLO `hardware_devices`)."""
        return f"Tetherbed simulated Arduino ({self.serial or self.name})"

    def device(self, clock: Callable[[], float]) -> SerialDevice:
        identity = DeviceIdentity(serial=self.serial or self.name, model=self.model)
        return SerialDevice(identity, clock=clock, seed=self.seed, pins=self.pins)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "baud": self.baud,
            "serial": self.serial,
            "model": self.model,
            "seed": self.seed,
            "pins": dict(self.pins),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeviceSpec:
        return cls(
            name=str(data["name"]),
            baud=int(data.get("baud", DEFAULT_BAUD)),
            serial=str(data.get("serial", "")),
            model=str(data.get("model", DEFAULT_MODEL)),
            seed=int(data.get("seed", 0)),
            pins={str(k): float(v) for k, v in (data.get("pins") or {}).items()},
        )


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
        model: str = DEFAULT_MODEL,
        pins: Mapping[str, float] | None = None,
        timeout: float = START_TIMEOUT,
    ) -> VirtualSerialPort:
        """socat and the device, running and answering, each in a session of its
        own (a terminal's Ctrl-C or a container's group signal does not reach them)."""
        socat = shutil.which("socat")
        if socat is None:
            raise RuntimeError("socat is not installed (apt-get install socat)")
        folder.mkdir(parents=True, exist_ok=True)
        client_end, device_end = str(folder / name), str(folder / f"{name}.device")
        for stale in (client_end, device_end):  # a restarted container keeps its files
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)
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
        pinned = [f"--pin={sensor}={value}" for sensor, value in (pins or {}).items()]
        port.device = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tetherbed.simulator.peripherals.serial_device",
                "serve",
                device_end,
                "--serial",
                serial or name,
                "--model",
                model,
                "--seed",
                str(seed),
                "--baud",
                str(baud),
                "--client-end",
                client_end,
                *pinned,
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

    @classmethod
    def start_spec(cls, folder: Path, spec: DeviceSpec) -> VirtualSerialPort:
        return cls.start(
            folder,
            spec.name,
            baud=spec.baud,
            seed=spec.seed,
            serial=spec.serial or None,
            model=spec.model,
            pins=spec.pins,
        )

    def unplug(self) -> None:
        """The device goes away: socat ends, the client end with it (and the
        device, its far end gone, exits)."""
        _stop(self.socat)
        if self.device is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.device.wait(2)

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


# --- the command, for a container ----------------------------------------------------


def read_config(path: Path) -> dict[str, Any]:
    """`{"ports": [{...DeviceSpec, "plugged": bool}]}`, as the docker backend writes it."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("ports"), list):
        raise ValueError(f"{path}: expected {{'ports': [...]}}")
    return data


def _spec_of(config: dict[str, Any], name: str) -> DeviceSpec:
    for entry in config["ports"]:
        if entry.get("name") == name:
            return DeviceSpec.from_json(entry)
    names = [entry.get("name") for entry in config["ports"]]
    raise ValueError(f"no port {name!r} in the config; ports: {names}")


def plug(folder: Path, spec: DeviceSpec) -> VirtualSerialPort:
    """Start the port's socat and device and note their PIDs for `unplug`."""
    port = VirtualSerialPort.start_spec(folder, spec)
    assert port.device is not None
    pids = {"socat": port.socat.pid, "device": port.device.pid, "client_end": port.client_end}
    (folder / f"{spec.name}.pids").write_text(json.dumps(pids), encoding="utf-8")
    return port


def unplug(folder: Path, name: str, timeout: float = START_TIMEOUT) -> None:
    """End the port's socat (started by another process) and wait until its
    client end is gone; the device exits by itself."""
    record = folder / f"{name}.pids"
    try:
        pids = json.loads(record.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{name} is not plugged in (no {record})") from None
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(pids["socat"]), signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while os.path.lexists(pids["client_end"]):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{pids['client_end']} is still there {timeout} s after SIGTERM")
        time.sleep(0.02)
    record.unlink()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tetherbed.simulator.peripherals.serial_ports",
        description="Virtual serial ports with simulated devices, for a container.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    plugging = commands.add_parser("plug", help="start a port's socat and device")
    plugging.add_argument("--config", type=Path, required=True)
    plugging.add_argument("--folder", type=Path, required=True)
    plugging.add_argument("name")
    unplugging = commands.add_parser("unplug", help="end a port's socat: the device is gone")
    unplugging.add_argument("--folder", type=Path, required=True)
    unplugging.add_argument("name")
    booting = commands.add_parser("boot", help="plug the ports, then become COMMAND")
    booting.add_argument("--config", type=Path, required=True)
    booting.add_argument("--folder", type=Path, required=True)
    booting.add_argument("run", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    args = parser.parse_args(argv)
    try:
        if args.command == "plug":
            plug(args.folder, _spec_of(read_config(args.config), args.name))
        elif args.command == "unplug":
            unplug(args.folder, args.name)
        else:
            command = args.run[1:] if args.run[:1] == ["--"] else args.run
            if not command:
                parser.error("boot: give the command to run after `--`")
            for entry in read_config(args.config)["ports"]:
                if entry.get("plugged", True):
                    # A child that exits once they run: the container's init adopts them.
                    where = ["--config", str(args.config), "--folder", str(args.folder)]
                    done = subprocess.run(
                        [sys.executable, "-m", _MODULE, "plug", *where, str(entry["name"])],
                        check=False,
                    )
                    if done.returncode != 0:
                        return done.returncode
            os.execvp(command[0], command)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"serial_ports: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
