"""The serial I/O scenarios on the Docker bed, run the way a user runs them:
`tetherbed run scenarios/serial_io/through_the_hub.yaml ... --backend docker`.

Each agent container gets its machine's virtual serial port (socat and the
simulated device, started just before the agent); a client writes to and
reads from the device through the hub container; the device is unplugged
mid-read and plugged in again inside the running container. Nothing of the
runs stays in Docker. (The baud mismatch runs on sim and process in
make test; `tetherbed run scenarios/serial_io/ --backend docker` runs it too.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from tetherbed.simulator.backends.docker.network import RUN_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("docker"), pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "scenarios" / "serial_io"


def test_serial_io_through_the_hub_and_an_unplug_on_the_docker_bed(
    tmp_path: Path, images: dict[str, str]
) -> None:
    report = tmp_path / "report"
    # Without the worker's name the runs are tb-<pid>-..., so ours can be found.
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    env.update(images)
    run = subprocess.Popen(
        [sys.executable, "-m", "tetherbed", "run", str(FOLDER / "through_the_hub.yaml"),
         str(FOLDER / "unplugged_mid_read.yaml"), "--backend", "docker", "--strict",
         "--report", str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )  # fmt: skip
    try:
        out, err = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, out[-4000:] + err[-2000:]
    document = json.loads((report / "results.json").read_text())
    verdicts = {r["scenario"]: r["verdict"] for r in document["runs"]}
    assert verdicts == {
        "serial I/O through the hub": "pass",
        "serial device unplugged mid-read": "pass",
    }
    for result in document["runs"]:
        serial = next(v for v in result["verdicts"] if v["name"] == "serial_io")
        assert serial["ok"] and "answered as the ports' states allow" in serial["summary"]

    # Through the hub: the agent advertised its container's port, and the
    # device's replies came back through the hub container.
    history = _history(report, "serial-i-o-through-the-hub-docker")
    (hello,) = [r for r in history if r["f"] == "frame" and r["value"].get("type") == "HELLO"]
    assert hello["value"]["payload"]["hardware_devices"] == [
        {"type": "serial", "port": "/tmp/tetherbed-serial/ttyTB0",
         "desc": "Tetherbed simulated Arduino (SIM-4242)"}
    ]  # fmt: skip
    assert _answer(history, "ident")["data"] == "tetherbed,sim-arduino,SIM-4242,1.0.0\r\n"
    assert _answer(history, "temp")["data"] == "temp=21.25\r\n"

    # Unplugged in the running container: the bytes read before it went.
    history = _history(report, "serial-device-unplugged-mid-read-docker")
    assert _answer(history, "waiting")["received_text"] == "PONG\r\n"
    assert _answer(history, "pong2")["data"] == "PONG\r\n"

    engine = docker.from_env()
    try:
        leftovers = [
            c["Names"][0]
            for c in engine.api.containers(all=True, filters={"label": RUN_LABEL})
            if c["Labels"][RUN_LABEL].startswith(f"tb-{run.pid}-")
        ]
    finally:
        engine.close()
    assert leftovers == []


def _history(report: Path, folder: str) -> list[dict]:
    lines = (report / folder / "history.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _answer(history: list[dict], request: str) -> dict:
    (found,) = [
        r["value"]
        for r in history
        if r["process"] == "client:alice" and r["req"] == request and r["type"] != "invoke"
    ]
    return found
