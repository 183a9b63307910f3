"""The simulated serial device: its line protocol, then the real thing over a socat pty pair."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tetherbed.simulator.peripherals.serial_device import (
    COMMANDS,
    MAX_LINE_BYTES,
    DeviceIdentity,
    SerialDevice,
    ask,
    open_port,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def device(**kwargs: object) -> tuple[SerialDevice, FakeClock]:
    clock = FakeClock()
    return SerialDevice(DeviceIdentity(serial="SN-1"), clock=clock, **kwargs), clock


def replies(dev: SerialDevice, data: bytes) -> list[str]:
    out = dev.receive(data)
    assert out == b"" or out.endswith(b"\r\n")
    return out.decode().split("\r\n")[:-1]


# --- the protocol, sans I/O -----------------------------------------------------


def test_ping_id_and_help() -> None:
    dev, _ = device()
    assert replies(dev, b"PING\nid?\nHelp\n") == [
        "PONG",
        "tetherbed,sim-arduino,SN-1,1.0.0",
        "OK " + " ".join(COMMANDS),
    ]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_gets_exactly_one_reply(ending: bytes) -> None:
    dev, _ = device()
    assert replies(dev, b"PING" + ending + b"PING" + ending) == ["PONG", "PONG"]


def test_crlf_split_across_reads_is_one_line_end() -> None:
    dev, _ = device()
    assert replies(dev, b"PI") == []
    assert replies(dev, b"NG\r") == ["PONG"]
    assert replies(dev, b"\nPING\n") == ["PONG"]


def test_empty_lines_get_no_reply() -> None:
    dev, _ = device()
    assert replies(dev, b"\n\r\n  \nPING\n") == ["PONG"]


def test_echo_returns_the_text_verbatim() -> None:
    dev, _ = device()
    assert replies(dev, b"echo  Hello, World \n") == [" Hello, World "]
    assert replies(dev, "ECHO grüße\n".encode()) == ["grüße"]
    assert replies(dev, b"ECHO\n") == [""]


def test_read_sensors_is_reproducible_with_the_same_seed_and_clock() -> None:
    first, clock_a = device(seed=7)
    second, clock_b = device(seed=7)
    clock_a.now = clock_b.now = 130.0
    lines = b"READ temp\nREAD HUMIDITY\nREAD a0\nREAD a5\nREAD uptime\n"
    readings = replies(first, lines)
    assert readings == replies(second, lines)
    values = dict(line.split("=") for line in readings)
    assert 19.0 < float(values["temp"]) < 24.0
    assert 35.0 < float(values["humidity"]) < 55.0
    assert 0 <= int(values["a0"]) <= 1023
    assert values["uptime"] == "30000"


def test_set_pins_a_sensor_until_auto_or_reset() -> None:
    dev, _ = device()
    assert replies(dev, b"SET temp 30.5\nREAD temp\nSET a2 1023\nREAD a2\n") == [
        "OK",
        "temp=30.50",
        "OK",
        "a2=1023",
    ]
    assert replies(dev, b"SET temp auto\n") == ["OK"]
    assert replies(dev, b"READ temp\n") != ["temp=30.50"]
    replies(dev, b"SET a2 0\nRESET\n")
    assert replies(dev, b"READ a2\n") != ["a2=0"]


def test_settings_round_trip_and_reset() -> None:
    dev, clock = device()
    assert replies(dev, b"SET led on\nSET pwm 128\nSET label bench A\n") == ["OK"] * 3
    assert replies(dev, b"GET led\nGET PWM\nGET label\n") == ["led=1", "pwm=128", "label=bench A"]
    clock.now += 5
    assert replies(dev, b"RESET\nGET led\nGET label\nREAD uptime\n") == [
        "OK",
        "led=0",
        "label=",
        "uptime=0",
    ]


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"FLY", "UNKNOWN_COMMAND"),
        (b"READ", "BAD_ARGUMENT"),
        (b"READ temp humidity", "BAD_ARGUMENT"),
        (b"READ pressure", "UNKNOWN_SENSOR"),
        (b"SET led", "BAD_ARGUMENT"),
        (b"SET led 2", "BAD_ARGUMENT"),
        (b"SET pwm 256", "BAD_ARGUMENT"),
        (b"SET pwm -1", "BAD_ARGUMENT"),
        (b"SET label " + b"x" * 33, "BAD_ARGUMENT"),
        (b"SET a0 1024", "BAD_ARGUMENT"),
        (b"SET temp warm", "BAD_ARGUMENT"),
        (b"SET temp nan", "BAD_ARGUMENT"),
        (b"SET uptime 5", "UNKNOWN_SENSOR"),
        (b"SET colour red", "UNKNOWN_SENSOR"),
        (b"GET temp", "UNKNOWN_KEY"),
        (b"PING now", "BAD_ARGUMENT"),
        (b"\xff\xfe", "BAD_ENCODING"),
    ],
)
def test_errors_are_one_err_line_with_a_code(line: bytes, code: str) -> None:
    dev, _ = device()
    (reply,) = replies(dev, line + b"\r\n")
    assert reply.startswith(f"ERR {code} "), reply
    assert replies(dev, b"PING\n") == ["PONG"]  # the device carries on


def test_an_overlong_line_is_discarded_whole_and_the_next_line_works() -> None:
    dev, _ = device()
    assert replies(dev, b"ECHO " + b"y" * (MAX_LINE_BYTES - 5) + b"\n") == [
        "y" * (MAX_LINE_BYTES - 5)
    ]
    # Fed in pieces: the device stops buffering at the limit, answers once at the end.
    assert replies(dev, b"ECHO " + b"z" * MAX_LINE_BYTES) == []
    assert replies(dev, b"z" * 10_000) == []
    (reply,) = replies(dev, b"\r\n")
    assert reply.startswith("ERR LINE_TOO_LONG ")
    assert len(dev._buffer) == 0
    assert replies(dev, b"PING\r\n") == ["PONG"]


# --- over a real socat pty pair ---------------------------------------------------


@dataclass
class PtyPair:
    client_end: str
    device_end: str
    socat: subprocess.Popen[bytes]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _wait_for(predicate: Callable[[], object], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def pty_pair(tmp_path: Path) -> Iterator[PtyPair]:
    socat = shutil.which("socat")
    if socat is None:
        pytest.fail("socat is not installed (`make test` installs it: apt-get install socat)")
    client_end, device_end = str(tmp_path / "ttyTB0"), str(tmp_path / "ttyTB0.device")
    proc = subprocess.Popen(
        [
            socat,
            f"pty,raw,echo=0,link={client_end}",
            f"pty,raw,echo=0,link={device_end}",
        ],
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(
            lambda: (os.path.exists(client_end) and os.path.exists(device_end)) or proc.poll(),
            "socat's ptys",
        )
        if proc.poll() is not None:
            pytest.fail(f"socat exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        yield PtyPair(client_end, device_end, proc)
    finally:
        _stop(proc)


@pytest.fixture
def served(pty_pair: PtyPair) -> Iterator[subprocess.Popen[bytes]]:
    module = "tetherbed.simulator.peripherals.serial_device"
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "serve", pty_pair.device_end, "--serial", "TB-UNIT"],
        stderr=subprocess.PIPE,
    )
    try:
        # Ready once it answers; until then, ask() times out.
        deadline = time.monotonic() + 10
        while True:
            try:
                assert ask(pty_pair.client_end, ["PING"], timeout=0.2) == ["PONG"]
                break
            except TimeoutError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr and proc.poll() else ""
                    pytest.fail(f"the device never answered PING: {err}")
        yield proc
    finally:
        _stop(proc)


def test_ask_over_a_socat_pty_pair(pty_pair: PtyPair, served: subprocess.Popen[bytes]) -> None:
    assert ask(pty_pair.client_end, ["ID?", "ECHO over the wire", "", "GET led"]) == [
        "tetherbed,sim-arduino,TB-UNIT,1.0.0",
        "over the wire",
        "led=0",
    ]


def test_raw_bytes_with_mixed_line_endings_in_fragments(
    pty_pair: PtyPair, served: subprocess.Popen[bytes]
) -> None:
    fd = open_port(pty_pair.client_end)
    try:
        for chunk in (b"PI", b"NG\r", b"\nSET led 1\n", b"GET led\r", b"BOGUS\r\n"):
            os.write(fd, chunk)
            time.sleep(0.02)
        received = b""
        deadline = time.monotonic() + 5
        while received.count(b"\r\n") < 4 and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                received += os.read(fd, 4096)
    finally:
        os.close(fd)
    lines = received.split(b"\r\n")
    assert lines[:3] == [b"PONG", b"OK", b"led=1"]
    assert lines[3].startswith(b"ERR UNKNOWN_COMMAND ")


def test_a_client_reopening_the_port_does_not_read_stale_replies(
    pty_pair: PtyPair, served: subprocess.Popen[bytes]
) -> None:
    # A client that writes and leaves without reading leaves a reply behind.
    fd = open_port(pty_pair.client_end)
    os.write(fd, b"ECHO left behind\n")
    time.sleep(0.2)
    os.close(fd)
    assert ask(pty_pair.client_end, ["PING", "ECHO fresh"]) == ["PONG", "fresh"]
    assert served.poll() is None  # socat and the device outlive the client


def test_ask_times_out_without_a_device(pty_pair: PtyPair) -> None:
    with pytest.raises(TimeoutError, match="no reply to 'PING'"):
        ask(pty_pair.client_end, ["PING"], timeout=0.3)


def test_the_device_exits_when_socat_goes_away(
    pty_pair: PtyPair, served: subprocess.Popen[bytes]
) -> None:
    _stop(pty_pair.socat)
    try:
        code = served.wait(5)
    except subprocess.TimeoutExpired:
        pytest.fail("the device kept running after its pty pair was gone")
    assert code == 1
    assert served.stderr is not None
    assert b"the other end closed" in served.stderr.read()
